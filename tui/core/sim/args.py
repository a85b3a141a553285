"""The vLLM engine arguments the simulator honours, with vLLM's defaults and validation messages.

`None` means "flag absent": vLLM resolves it at start-up (batch defaults depend on the GPU, see
shared/reference/engine-args.md), and `resolved()` does the same here.
"""

from __future__ import annotations

from typing import Any

from dataclasses import asdict, dataclass, fields, replace

from ..engines.vllm import KV_CACHE_DTYPES

# Engine-arg field -> CLI flag, for showing and diffing container args.
FLAGS = {
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_model_len": "--max-model-len",
    "enable_prefix_caching": "--enable-prefix-caching",
    "enable_chunked_prefill": "--enable-chunked-prefill",
    "block_size": "--block-size",
    "kv_cache_dtype": "--kv-cache-dtype",
    "swap_space": "--swap-space",
    "tensor_parallel_size": "--tensor-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "num_gpu_blocks_override": "--num-gpu-blocks-override",
}

BLOCK_SIZES = (1, 8, 16, 32, 64, 128)

# A simulator setting, not vLLM's default (0.9, engines/vllm.py): the simulated fleet runs its
# pods with --gpu-memory-utilization 0.92 (as recent vLLM releases default to), and the demo's
# pool sizes, scenarios and screenshots are tuned to the pool that gives.
SIM_GPU_MEMORY_UTILIZATION = 0.92


@dataclass(frozen=True, slots=True)
class EngineArgs:
    max_num_seqs: int | None = None  # GPUs >= 70 GiB and not A100: 1024, else 256
    max_num_batched_tokens: int | None = None  # API server: 8192 on large GPUs, else 2048
    gpu_memory_utilization: float = SIM_GPU_MEMORY_UTILIZATION
    max_model_len: int | None = None  # None: the model's context length
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    block_size: int = 16
    kv_cache_dtype: str = "auto"  # fp8 halves bytes per token
    swap_space: float | None = None  # GiB; removed in V1 (ignored), V0 sizes its CPU blocks from it
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    num_gpu_blocks_override: int | None = None

    def resolved(self, large_gpu: bool) -> "EngineArgs":
        """Fill the flags vLLM derives from the hardware (EngineArgs.get_batch_defaults)."""
        seqs = self.max_num_seqs if self.max_num_seqs is not None else (1024 if large_gpu else 256)
        tokens = self.max_num_batched_tokens
        if tokens is None:
            tokens = 8192 if large_gpu else 2048
        return replace(self, max_num_seqs=seqs, max_num_batched_tokens=tokens)

    @property
    def seqs(self) -> int:
        """max-num-seqs once resolved (the engine and the hardware model run resolved args)."""
        if self.max_num_seqs is None:
            raise ValueError("engine args not resolved: max_num_seqs unset")
        return self.max_num_seqs

    @property
    def batched_tokens(self) -> int:
        """max-num-batched-tokens once resolved."""
        if self.max_num_batched_tokens is None:
            raise ValueError("engine args not resolved: max_num_batched_tokens unset")
        return self.max_num_batched_tokens

    def validate(self) -> None:
        """Raise ValueError with vLLM's wording for combinations vLLM refuses before loading."""
        g = self.gpu_memory_utilization
        if not isinstance(g, (int, float)) or not 0 < g <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {g!r}")
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "tensor_parallel_size",
                     "data_parallel_size", "num_gpu_blocks_override"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.block_size not in BLOCK_SIZES:
            raise ValueError(f"block_size must be one of {BLOCK_SIZES}, got {self.block_size!r}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {', '.join(KV_CACHE_DTYPES)}, got {self.kv_cache_dtype!r}")
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        if seqs is not None and tokens is not None and tokens < seqs:
            raise ValueError(
                f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs ({seqs})."
            )
        if (not self.enable_chunked_prefill and tokens is not None and self.max_model_len is not None
                and tokens < self.max_model_len):
            raise ValueError(
                f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({self.max_model_len}). "
                "This effectively limits the maximum sequence length to max_num_batched_tokens and makes "
                "vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len."
            )

    def cli(self) -> list[str]:
        """The flags that differ from the simulator's defaults, as `vllm serve` arguments."""
        out: list[str] = []
        defaults = EngineArgs()
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or v == getattr(defaults, f.name):
                continue
            flag = FLAGS[f.name]
            if isinstance(v, bool):
                out.append(flag if v else "--no-" + flag[2:])
            else:
                out += [flag, str(v)]
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

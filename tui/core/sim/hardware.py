"""Simulated GPUs and models, and vLLM's KV-pool sizing from them.

The sizing follows vLLM V1 (see shared/reference/engine-args.md §3): the process may use
`total_memory x gpu_memory_utilization`; weights, the profiled activation peak and non-torch
memory come off the top; what remains is the KV pool, cut into blocks of
`block_size x bytes_per_token`. A pool that cannot hold one `max_model_len` sequence fails
start-up with vLLM's own error text, so the simulated cluster can crash-loop a pod on a bad edit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..engines.vllm import ENGINE as VLLM
from .args import EngineArgs

GiB = 1024**3
MiB = 1024**2


@dataclass(frozen=True, slots=True)
class GpuSpec:
    key: str
    name: str  # as DCGM's modelName / nvidia-smi's name
    total_bytes: int  # what torch reports as total memory (vLLM's budget base)
    fb_total_mib: int  # DCGM: FB_USED + FB_FREE + FB_RESERVED
    mem_bw: float  # effective bytes/s (decode is bound by this)
    flops: float  # effective dense bf16 FLOP/s (prefill is bound by this)
    large: bool  # vLLM's batch defaults: >= 70 GiB and not an A100

    @property
    def reserved_mib(self) -> int:
        return max(0, self.fb_total_mib - self.total_bytes // MiB)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    key: str
    name: str  # served model name (label model_name)
    params: float  # parameter count, for FLOPs per token (2 x params)
    weight_bytes: int  # bf16 checkpoint size in GPU memory
    layers: int
    kv_heads: int
    head_dim: int
    context: int  # max_model_len when the flag is absent
    dtype_bytes: int = 2

    def kv_bytes_per_token(self, cache_dtype: str = "auto", tp: int = 1) -> int:
        return VLLM.kv_bytes_per_token(self.layers, self.kv_heads, self.head_dim, cache_dtype, tp, self.dtype_bytes)


GPUS: dict[str, GpuSpec] = {
    g.key: g
    for g in (
        GpuSpec("h100-80gb", "NVIDIA H100 80GB HBM3", int(79.11 * GiB), 81559, 2.7e12, 4.9e14, True),
        GpuSpec("a100-40gb", "NVIDIA A100-SXM4-40GB", int(39.50 * GiB), 40960, 1.25e12, 1.9e14, False),
        GpuSpec("l4-24gb", "NVIDIA L4", int(22.03 * GiB), 23034, 2.4e11, 7.2e13, False),
    )
}

MODELS: dict[str, ModelSpec] = {
    m.key: m
    for m in (
        # Weights as vLLM logs them ("model weights take 14.96GiB", issue #12330).
        ModelSpec("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 8.03e9, int(14.96 * GiB), 32, 8, 128, 131072),
        ModelSpec("llama-3-8b", "meta-llama/Meta-Llama-3-8B-Instruct", 8.03e9, int(14.96 * GiB), 32, 8, 128, 8192),
        ModelSpec("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 7.62e9, int(14.19 * GiB), 28, 4, 128, 32768),
    )
}

@dataclass(frozen=True, slots=True)
class KvPlan:
    """What vLLM works out at start-up for one engine (per GPU where TP applies)."""

    total_bytes: int  # GPU memory seen by torch
    requested_bytes: int  # total x gpu_memory_utilization
    weight_bytes: int  # per GPU
    activation_bytes: int  # profiled peak, grows with max_num_batched_tokens
    non_torch_bytes: int
    available_kv_bytes: int  # "Available KV cache memory"
    bytes_per_token: int  # per GPU
    block_bytes: int
    num_gpu_blocks: int
    max_model_len: int
    needed_bytes: int  # KV bytes for one max_model_len sequence
    error: str | None = None  # vLLM's start-up error, None if it starts

    @property
    def kv_cache_size_tokens(self) -> int:
        return self.num_gpu_blocks * (self.block_bytes // self.bytes_per_token)

    @property
    def max_concurrency(self) -> float:
        return self.kv_cache_size_tokens / self.max_model_len if self.max_model_len else 0.0

    @property
    def used_bytes(self) -> int:
        """GPU memory the process holds once up: vLLM pre-allocates the whole pool."""
        kv = self.num_gpu_blocks * self.block_bytes
        return self.weight_bytes + self.activation_bytes + self.non_torch_bytes + kv


def activation_bytes(model: ModelSpec, args: EngineArgs, tp: int = 1) -> int:
    """Peak of the profiling forward pass: a base plus a share per batched token."""
    per_token = 96 * 1024 * (model.params / 8.03e9) / max(1, tp)
    return int(0.45 * GiB + per_token * args.batched_tokens)


def plan_kv(args: EngineArgs, model: ModelSpec, gpu: GpuSpec) -> KvPlan:
    """vLLM's start-up arithmetic; `error` carries the message when the replica would not start."""
    tp = max(1, args.tensor_parallel_size)
    max_len = args.max_model_len or model.context
    requested = math.ceil(gpu.total_bytes * args.gpu_memory_utilization)
    weights = model.weight_bytes // tp
    act = activation_bytes(model, args, tp)
    non_torch = int(0.35 * GiB)
    available = requested - weights - act - non_torch
    bpt = model.kv_bytes_per_token(args.kv_cache_dtype, tp)
    block_bytes = bpt * args.block_size
    blocks = max(0, available // block_bytes)
    if args.num_gpu_blocks_override:
        blocks = args.num_gpu_blocks_override
    needed = bpt * max_len
    error = None
    if args.max_model_len and args.max_model_len > model.context:
        error = (
            f"ValueError: User-specified max_model_len ({args.max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.context} in model's config.json)."
        )
    elif available <= 0:
        error = (
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    elif blocks * block_bytes < needed:
        avail = blocks * block_bytes
        est = (avail // bpt) // args.block_size * args.block_size
        error = (
            f"ValueError: To serve at least one request with the models's max seq len ({max_len}), "
            f"({needed / GiB:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({avail / GiB:.2f} GiB). Based on the available memory, the estimated maximum model "
            f"length is {est}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            "when initializing the engine."
        )
    return KvPlan(
        total_bytes=gpu.total_bytes,
        requested_bytes=requested,
        weight_bytes=weights,
        activation_bytes=act,
        non_torch_bytes=non_torch,
        available_kv_bytes=max(0, available),
        bytes_per_token=bpt,
        block_bytes=block_bytes,
        num_gpu_blocks=int(blocks),
        max_model_len=max_len,
        needed_bytes=needed,
        error=error,
    )

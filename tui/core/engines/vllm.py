"""vLLM (V0 and V1): everything kvwatch knows about this engine, behind the `Engine` interface.

Metric names and the page -> Sample mapping stay in `metrics/names.py` / `metrics/extract.py`
(the Prometheus source and the simulator read the same name table); this module is where the
rest of the tree asks for them. Flag defaults and choices are those of
shared/reference/engine-args.md; where a default depends on the generation (V0/V1) or on the
GPU, the note on the flag says so.
"""

from __future__ import annotations

from ..metrics import names
from ..metrics.extract import parse_vllm, to_sample
from ..model import Sample
from .base import ArgSpec, Engine

# vLLM's --kv-cache-dtype choices (newest literal, engine-args.md; V0 took auto and the fp8s).
KV_CACHE_DTYPES = (
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
)

# Bytes per KV element. Packed formats count their bits only (per-block scales are small);
# turboquant kNvM stores K in N bits and V in M bits, so the mean of the two. Model dtypes
# (half, float32) are here too: "auto" resolves to them and cache_config_info may name them.
DTYPE_BYTES = {
    "float16": 2.0, "half": 2.0, "bfloat16": 2.0, "float32": 4.0, "float": 4.0,
    "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0, "fp8_inc": 1.0, "fp8_ds_mla": 1.0,
    "fp8_per_token_head": 1.0, "int8_per_token_head": 1.0,
    "turboquant_k8v4": 0.75, "turboquant_4bit_nc": 0.5, "turboquant_k3v4_nc": 0.4375, "turboquant_3bit_nc": 0.375,
    "int4_per_token_head": 0.5, "nvfp4": 0.5, "nvfp4_ds_mla": 0.5, "nvfp4_4over6": 0.5,
}

# vLLM documents 0.92 for the newest releases, but the 0.9 of the V0 and V1 releases kvwatch
# reads in the field (and that their cache_config_info reports) is what a pod without the flag runs.
GPU_MEMORY_UTILIZATION_DEFAULT = 0.9

SPECS: dict[str, ArgSpec] = {
    s.name: s
    for s in (
        ArgSpec("model", "str", None, None, "required (positional after `vllm serve` or --model)", False),
        ArgSpec(
            "max-num-seqs",
            "int",
            256,
            256,
            "engine default; recent V1 releases use 1024 on >=70 GiB GPUs other than A100",
        ),
        ArgSpec(
            "max-num-batched-tokens",
            "int",
            2048,
            None,
            "engine default for the API server; 8192 on >=70 GiB GPUs other than A100 in recent V1; "
            "V0 without chunked prefill: max(max-model-len, 2048)",
        ),
        ArgSpec(
            "gpu-memory-utilization",
            "float",
            GPU_MEMORY_UTILIZATION_DEFAULT,
            GPU_MEMORY_UTILIZATION_DEFAULT,
            "engine default (0.92 in recent releases); fraction of total GPU memory",
        ),
        ArgSpec("max-model-len", "tokens", None, None, "derived from the model config"),
        ArgSpec("enable-prefix-caching", "bool", True, False, "on by default in V1, off in V0"),
        ArgSpec("enable-chunked-prefill", "bool", True, False, "on in V1 when the model supports it, off in V0"),
        ArgSpec("swap-space", "float", None, 4.0, "GiB of CPU swap per GPU; V0 only (removed in V1)"),
        ArgSpec("kv-cache-dtype", "choice", "auto", "auto", "auto = the model dtype", choices=KV_CACHE_DTYPES),
        ArgSpec("block-size", "int", 16, 16, "tokens per KV block"),
        ArgSpec("tensor-parallel-size", "int", 1, 1, "GPUs per replica (-tp: SHORT_ALIASES)", False),
        ArgSpec(
            "shutdown-timeout",
            "int",
            0,
            0,
            "seconds vLLM lets in-flight requests finish after SIGTERM (0 = abort them)",
            False,
        ),
    )
}

# The order the edit form shows them in, then the read-only ones.
EDITABLE = (
    "max-num-seqs",
    "max-num-batched-tokens",
    "gpu-memory-utilization",
    "max-model-len",
    "enable-prefix-caching",
    "enable-chunked-prefill",
    "swap-space",
    "kv-cache-dtype",
    "block-size",
)
KV_ARGS = EDITABLE + ("tensor-parallel-size", "model")

# Flags that never take a value, so the token after them is not theirs.
BOOLEAN_FLAGS = frozenset(
    {
        "trust-remote-code",
        "enforce-eager",
        "disable-log-stats",
        "disable-log-requests",
        "enable-log-requests",
        "enable-auto-tool-choice",
        "disable-frontend-multiprocessing",
        "enable-lora",
        "disable-custom-all-reduce",
        "enable-expert-parallel",
        "disable-sliding-window",
        "skip-tokenizer-init",
        "enable-prompt-tokens-details",
        "disable-fastapi-docs",
        "enable-server-load-tracking",
        "kv-cache-metrics",
        "enable-mfu-metrics",
        "headless",
    }
)
SHORT_ALIASES = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "q": "quantization", "O": "compilation-config"}
MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server", "vllm.entrypoints.cli.main")
STRONG_FLAGS = frozenset({"model", "max-num-seqs", "gpu-memory-utilization", "max-model-len", "tensor-parallel-size"})


def parse_page(text: str) -> Sample:
    return to_sample(parse_vllm(text))


ENGINE = Engine(
    name="vllm",
    label="vLLM",
    metric_prefixes=("vllm:",),
    parse_page=parse_page,
    scalars=names.SCALARS,
    histograms=names.HISTOGRAMS,
    commands=(("vllm", "serve"),),
    modules=MODULES,
    images=("vllm",),
    strong_flags=STRONG_FLAGS,
    arg_specs=SPECS,
    editable=EDITABLE,
    kv_args=KV_ARGS,
    boolean_flags=BOOLEAN_FLAGS,
    flag_aliases=SHORT_ALIASES,
    kv_cache_dtypes=KV_CACHE_DTYPES,
    dtype_bytes=DTYPE_BYTES,
)

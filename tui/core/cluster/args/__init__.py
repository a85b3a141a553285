"""Engine args as written in a Kubernetes container spec: read, validate, rewrite.

A container can start vLLM in many ways (`vllm serve MODEL --flag v`, `--flag=v`, `python -m
vllm.entrypoints.openai.api_server --model M`, a `sh -c "..."` script, flags only with the image's
entrypoint, `$(VAR)` / `${VAR}` references to the container env). kvwatch reads the KV-relevant
flags from whichever form is used and rewrites them *in that same form*, so the change shown to
the SRE is the smallest exact diff: one token, or one env value, and nothing else moves.

The flags, defaults and command forms come from the engine module (engines/vllm.py). Here:
  values     canonical flag names, typed values and their ranges
  tokens     argv / `sh -c` tokens with their place in the spec, env references
  parse      the invocation in one container -> VllmCommand
  changes    a typed change set checked against the engine's rules; incident presets
  rewrite    the edited container in its own form, the confirm dialog's diff
  preflight  will the KV pool still hold one full-length sequence after the change
"""

from __future__ import annotations

from .changes import PRESETS, Validation, eff_before, effective, preset, presets_for, validate
from .parse import ArgValue, VllmCommand, find_vllm_container, is_vllm_container, parse_container
from .preflight import (
    GiB,
    Preflight,
    _dtype_bytes,
    kv_bytes_per_token,
    kv_preflight,
    with_fit,
    observed_from_cache_config,
)
from .rewrite import Rewrite, args_diff, previous_args_annotation, rewrite_container
from .values import (
    EDITABLE,
    KV_ARGS,
    KV_CACHE_DTYPES,
    SPECS,
    ArgError,
    ArgSpec,
    canonical,
    check_range,
    coerce,
    default_for,
    format_value,
)

__all__ = [
    "PRESETS", "Validation", "eff_before", "effective", "preset", "presets_for", "validate",
    "ArgValue", "VllmCommand", "find_vllm_container", "is_vllm_container", "parse_container",
    "GiB", "Preflight", "_dtype_bytes", "kv_bytes_per_token", "kv_preflight", "with_fit", "observed_from_cache_config",
    "Rewrite", "args_diff", "previous_args_annotation", "rewrite_container",
    "EDITABLE", "KV_ARGS", "KV_CACHE_DTYPES", "SPECS", "ArgError", "ArgSpec", "canonical", "check_range",
    "coerce", "default_for", "format_value",
]

"""The flags kvwatch reads from a container, and typed values for them (coercion, ranges).

The flags, their defaults and the command forms are vLLM's own and come from its engine
module (engines/vllm.py); what is here is the generic part: a flag spelled any way -> its
canonical name, a typed or textual value -> the flag's type, with the SRE-facing error.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...engines import vllm as VLLM_MOD
from ...engines.base import ArgSpec, Engine

__all__ = ["ArgSpec"]  # re-exported: the spec type of the flags below


# The flags, defaults and command forms are vLLM's own, from its engine module.
SPECS = VLLM_MOD.SPECS
KV_CACHE_DTYPES = VLLM_MOD.KV_CACHE_DTYPES
EDITABLE = VLLM_MOD.EDITABLE
KV_ARGS = VLLM_MOD.KV_ARGS
_BOOLEAN_FLAGS = VLLM_MOD.BOOLEAN_FLAGS
_SHORT_ALIASES = VLLM_MOD.SHORT_ALIASES
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
_MODULES = VLLM_MOD.MODULES
_STRONG_FLAGS = VLLM_MOD.STRONG_FLAGS
ENGINE = VLLM_MOD.ENGINE


class ArgError(ValueError):
    """A value the SRE typed that vLLM would reject (or kvwatch cannot write)."""


def canonical(flag: str, engine: Engine = ENGINE) -> str:
    """`--max_num_seqs` -> `max-num-seqs`; `-tp` -> `tensor-parallel-size` (the engine's spellings)."""
    return engine.canonical(flag)


def default_for(name: str, generation: str = "v1", engine: Engine = ENGINE) -> Any:
    return engine.default(name, generation)


# Value coercion and validation


def _human_int(text: str) -> int:
    """vLLM's human-readable ints: 32k = 32000, 32K = 32768 (also m/M, g/G)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not m:
        raise ArgError(f"{text!r} is not a whole number (32768, 32k or 32K)")
    num, suffix = m.groups()
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    val = float(num) * mult
    if val != int(val):
        raise ArgError(f"{text!r} is not a whole number of tokens")
    return int(val)


def coerce(name: str, raw: Any, engine: Engine = ENGINE) -> Any:
    """Turn a typed or textual value into the flag's type; ArgError with a clear message if not."""
    spec = engine.arg_specs.get(name)
    if spec is None:
        raise ArgError(f"kvwatch does not edit --{name}")
    if isinstance(raw, str):
        raw = raw.strip()
        if raw == "":
            raise ArgError(f"--{name}: empty value")
    try:
        if spec.kind == "bool":
            if isinstance(raw, bool):
                return raw
            word = str(raw).lower()
            if word not in _BOOL_WORDS:
                raise ArgError(f"--{name}: {raw!r} is not true or false")
            return _BOOL_WORDS[word]
        if spec.kind in ("int", "tokens"):
            if isinstance(raw, bool):
                raise ArgError(f"--{name}: expected a whole number, got {raw!r}")
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float):
                if raw != int(raw):
                    raise ArgError(f"--{name}: {raw} is not a whole number")
                return int(raw)
            if spec.kind == "tokens":
                return _human_int(str(raw))
            if not re.fullmatch(r"[+-]?\d+", str(raw)):
                raise ArgError(f"--{name}: {raw!r} is not a whole number")
            return int(raw)
        if spec.kind == "float":
            if isinstance(raw, bool):
                raise ArgError(f"--{name}: expected a number, got {raw!r}")
            val = float(raw)
            if math.isnan(val) or math.isinf(val):
                raise ArgError(f"--{name}: {raw!r} is not a finite number")
            return val
        if spec.kind == "choice":
            if str(raw) not in spec.choices:
                raise ArgError(f"--{name}: {raw!r} is not one of {', '.join(spec.choices)}")
            return str(raw)
        return str(raw)
    except ArgError:
        raise
    except (TypeError, ValueError):
        raise ArgError(f"--{name}: {raw!r} is not a number") from None


def check_range(name: str, value: Any) -> None:
    """Single-value range rules (vLLM's own field constraints)."""
    if name == "gpu-memory-utilization" and not 0 < value <= 1:
        raise ArgError(f"--gpu-memory-utilization must be > 0 and <= 1 (got {value:g})")
    if name in ("max-num-seqs", "max-num-batched-tokens", "max-model-len", "tensor-parallel-size") and value < 1:
        raise ArgError(f"--{name} must be >= 1 (got {value})")
    if name == "block-size" and value < 1:
        raise ArgError(f"--block-size must be >= 1 (got {value})")
    if name == "swap-space" and value < 0:
        raise ArgError(f"--swap-space must be >= 0 GiB (got {value:g})")
    # SGLang's flags (engines/sglang.py)
    if name == "mem-fraction-static" and not 0 < value < 1:
        raise ArgError(f"--mem-fraction-static must be > 0 and < 1 (got {value:g})")
    if name in ("max-running-requests", "max-total-tokens", "context-length", "page-size", "max-prefill-tokens",
                "tp-size", "dp-size") and value < 1:
        raise ArgError(f"--{name} must be >= 1 (got {value})")
    if name == "chunked-prefill-size" and value < 1 and value != -1:
        raise ArgError(f"--chunked-prefill-size must be >= 1, or -1 to disable chunking (got {value})")
    if name == "schedule-conservativeness" and value <= 0:
        raise ArgError(f"--schedule-conservativeness must be > 0 (got {value:g})")


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value != int(value) else f"{value:.1f}"
    return str(value)

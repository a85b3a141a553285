"""SGLang's own rules for an args edit: relations between its flags, the incident presets in
its knobs, and the token-pool preflight.

The runbook's remedies for KV pressure, in SGLang's words: cap running requests
(`--max-running-requests`), chunk prefill (`--chunked-prefill-size`), and give the pool
headroom (`--schedule-conservativeness` above 1 admits fewer requests so fewer are retracted;
SGLang's tuning guide suggests 1.3 when retractions are frequent). Lowering
`--mem-fraction-static` only shrinks the pool: it is the remedy for CUDA OOM, not retractions.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ...engines.sglang import ENGINE
from .values import ArgError

ENGINE_NAME = ENGINE.name

# The edit form's preset slots (f2..f6) in the same order as vLLM's: key -> button label.
PRESET_LABELS: dict[str, str] = {
    "running-25": "running -25%",
    "running-50": "running -50%",
    "chunk-50": "chunk /2",
    "conservative-1.3": "conserv 1.3",
    "mfs-0.8": "mfs 0.8",
}
PRESETS: dict[str, str] = {
    "running-25": "cut --max-running-requests by 25%",
    "running-50": "cut --max-running-requests by 50%",
    "chunk-50": "halve --chunked-prefill-size",
    "conservative-1.3": "--schedule-conservativeness 1.3",
    "mfs-0.8": "--mem-fraction-static 0.8 (CUDA OOM only)",
}


def relations(eff: Mapping[str, Any], typed: Mapping[str, Any], errors: dict[str, str], warnings: list[str]) -> None:
    """Checks between flags, added to `errors` / `warnings` in place."""
    chunk, prefill = eff.get("chunked-prefill-size"), eff.get("max-prefill-tokens")
    if ("chunked-prefill-size" in typed and isinstance(chunk, int) and isinstance(prefill, int)
            and chunk > prefill):
        warnings.append(f"--chunked-prefill-size {chunk} is above --max-prefill-tokens {prefill}: "
                        "a prefill batch is capped at the smaller one")
    total, ctx = eff.get("max-total-tokens"), eff.get("context-length")
    if isinstance(total, int) and isinstance(ctx, int) and total < ctx:
        key = "max-total-tokens" if "max-total-tokens" in typed else "context-length"
        errors.setdefault(key, f"--max-total-tokens ({total}) is below --context-length ({ctx}): "
                               "one full-length request could never fit the token pool")
    mfs = typed.get("mem-fraction-static")
    if mfs is not None and mfs > 0.93:
        warnings.append(f"--mem-fraction-static {mfs:g} leaves little room for activations and CUDA graphs "
                        "(CUDA OOM risk)")
    if "page-size" in typed or "kv-cache-dtype" in typed or "mem-fraction-static" in typed:
        warnings.append("page size / KV dtype / memory fraction changes resize the token pool: check the preflight")


def preset(before: Callable[[str], Any], key: str) -> dict[str, Any]:
    """The change set of one preset; `before(name)` is the flag's effective value now."""
    if key not in PRESETS:
        raise ArgError(f"unknown preset {key!r}; known: {', '.join(PRESETS)}")
    if key.startswith("running-"):
        cur = before("max-running-requests")
        if not isinstance(cur, int):
            raise ArgError("current --max-running-requests is unknown (SGLang derives it from the pool); "
                           "type a value instead")
        return {"max-running-requests": max(1, int(cur * (0.75 if key == "running-25" else 0.5)))}
    if key == "chunk-50":
        cur = before("chunked-prefill-size")
        if not isinstance(cur, int) or cur < 1:
            raise ArgError("current --chunked-prefill-size is unknown or chunking is off; type a value instead")
        return {"chunked-prefill-size": max(512, cur // 2)}
    if key == "conservative-1.3":
        return {"schedule-conservativeness": 1.3}
    return {"mem-fraction-static": 0.8}


def _num(cfg: Mapping[str, Any], key: str) -> float | None:
    try:
        v = cfg.get(key)
        return float(v) if v not in (None, "", "None") else None
    except (TypeError, ValueError):
        return None


GiB = 1024**3
Verdict = tuple[str, tuple[str, ...], "int | None", "int | None"]  # status, messages, pool now, pool after


def preflight(before: Callable[[str], Any], changes: Mapping[str, Any], cache_config: Mapping[str, Any] | None,
              gpu_total_bytes: float | None, kv_bytes_token: float | None) -> Verdict:
    """Will one full-length request still fit SGLang's token pool after the change?

    The pool comes from `sglang:cache_config_info` (num_pages x page_size) or an explicit
    --max-total-tokens; a change of --mem-fraction-static moves (old - new) x GPU memory out of
    it, in tokens at the model's KV bytes per token (per GPU: divided by the TP size).
    """
    cfg = dict(cache_config or {})
    msgs: list[str] = []
    pages, page = _num(cfg, "num_pages"), _num(cfg, "page_size")
    cap = pages * page if pages is not None and page is not None else None
    if isinstance(changes.get("max-total-tokens"), int):
        cap_new: float = float(changes["max-total-tokens"])
        msgs.append(f"--max-total-tokens sets the token pool to {int(cap_new):,} tokens")
    elif cap is None:
        total = before("max-total-tokens")
        if not isinstance(total, int):
            return ("unknown", ("token pool not exposed (no sglang:cache_config_info, no "
                                         "--max-total-tokens); fit not checked",), None, None)
        cap = cap_new = float(total)
    else:
        cap_new = cap
    old, new = before("mem-fraction-static"), changes.get("mem-fraction-static")
    if new is not None and "max-total-tokens" not in changes:
        tp = max(1, int(before("tp-size") or 1))
        if old is None or not gpu_total_bytes or not kv_bytes_token:
            msgs.append("--mem-fraction-static moves GPU memory into or out of the pool; the current fraction, "
                        "GPU size or KV bytes/token is unknown, so the fit is not checked")
            return ("unknown", tuple(msgs), int(cap) if cap else None, None)
        delta = (old - new) * gpu_total_bytes
        cap_new -= delta / (kv_bytes_token / tp)
        msgs.append(f"mem-fraction-static {old:g} -> {new:g} {'frees' if delta < 0 else 'takes'} "
                    f"{abs(delta) / GiB:.1f} GiB per GPU {'into' if delta < 0 else 'out of'} the token pool")
    ctx = changes.get("context-length", before("context-length"))
    status = "ok"
    if cap_new <= 0:
        status = "fail"
        msgs.append("no GPU memory left for the token pool: SGLang would fail to start and crash-loop")
    elif isinstance(ctx, int):
        if cap_new < ctx:
            status = "fail"
            msgs.append(f"one {ctx}-token request needs {ctx} pool tokens but only {int(cap_new)} would exist: "
                        "lower --context-length or give the pool more memory")
        else:
            msgs.append(f"token pool ~{int(cap_new)} tokens: {cap_new / ctx:.1f} full-length ({ctx}) requests at once")
    else:
        msgs.append(f"token pool ~{int(cap_new)} tokens; context length comes from the model config, fit not checked")
    running = changes.get("max-running-requests")
    if running and cap_new > 0 and cap_new / running < 16:
        status = "warn" if status == "ok" else status
        msgs.append(f"{running} requests share ~{int(cap_new)} pool tokens ({cap_new / running:.0f} each): "
                    "expect retractions")
    return (status, tuple(msgs), int(cap) if cap else None, int(cap_new))

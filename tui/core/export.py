"""FleetState as plain JSON-able data (the `--json` mode's line format).

`verdict` values are the registry's names (tui.core.verdicts): a stable interface for scripts.
"""

from __future__ import annotations

from typing import Any

import math

from . import engines
from .model import STALE, FleetState, ReplicaView
from .textsafe import redact


def _num(v: Any) -> Any:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return round(v, 6) if isinstance(v, float) else v


def replica_json(r: ReplicaView, now: float | None = None) -> dict[str, Any]:
    m = r.metrics
    pod = r.pod
    out = {
        # "name": the pod's own name for cluster rows (short, as before); "key" is unique across namespaces
        # (namespace/name under -A, the replica's name otherwise) and "namespace" is the pod's, or null
        "name": pod.name if pod is not None else r.name,
        "key": r.name,
        "namespace": pod.namespace if pod is not None else None,
        "verdict": r.verdict,
        "evidence": [e.as_dict() for e in r.finding.evidence],
        "since": _num(r.finding.since),
        "kv_usage": _num(m.kv_usage),
        "waiting": _num(m.waiting),
        "running": _num(m.running),
        "preemptions_per_s": _num(m.preemptions_per_s),
        "gpu_memory_pct": _num(m.gpu_memory_pct),
        "gpu_util_pct": _num(m.gpu_util_pct),
        "ttft_p95_s": _num(m.ttft_p95_s),
        "state": r.state,
        "error": redact(r.error) if r.error else None,
        "group": r.group,
        "engine": engines.display(r.engine, r.generation),  # "vLLM V1", "vLLM V0", "SGLang"
        "missing": list(r.finding.missing),
        "invalid": dict(r.invalid),  # signals whose last value was NaN/Inf: {signal: reason}
    }
    if r.warnings:  # only when the page had a problem: the line format is otherwise unchanged
        out["warnings"] = list(r.warnings)
    if r.state == STALE and r.last_ok_ts is not None and now is not None:
        out["age_s"] = _num(max(0.0, now - r.last_ok_ts))  # how old its last good values are
    return out


def fleet_json(state: FleetState, replicas: list[Any] | None = None) -> dict[str, Any]:
    """The frame; `replicas` stands in for its rows (`--json` encodes them apart, see headless)."""
    rows = [replica_json(r, state.ts) for r in state.replicas] if replicas is None else replicas
    out: dict[str, Any] = {"ts": _num(state.ts), "source": state.source, "replicas": rows}
    if state.source_warnings:  # only when the source had a problem (a partial Prometheus answer, ...)
        out["source_warnings"] = [redact(w) for w in state.source_warnings]
    # fleet imbalance (a hot replica beside idle ones of its model): a list, empty when none
    out["imbalance"] = [i.as_dict() for i in state.imbalance]
    return out

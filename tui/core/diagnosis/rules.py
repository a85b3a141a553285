"""The decision procedure of diagnostics.md / preemption-thrash.md as pure rules.

vLLM pre-allocates its KV pool, so nvidia-smi's GPU memory sits near gpu_memory_utilization
whether the cache is full or empty: GPU memory is necessary evidence but never decides a
verdict. vLLM's own KV usage, waiting queue, preemption rate and batch size do.
"""

from __future__ import annotations

from ..history import ReplicaHistory
from ..model import DOWN, Evidence, Finding, ReplicaMetrics
from .thresholds import Thresholds


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "n/a"
    return f"{v:.0f}%" if pct else (f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}")


def _ev(signal: str, value, op: str, threshold, crossed: bool, label: str, pct: bool = False) -> Evidence:
    if value is None:
        return Evidence(signal, None, threshold, "missing", False, f"{label}: not exposed")
    thr = _fmt(threshold, pct) if isinstance(threshold, (int, float)) else str(threshold)
    return Evidence(signal, value, threshold, op, crossed, f"{label} {_fmt(value, pct)} {op} {thr}")


def classify(m: ReplicaMetrics, t: Thresholds) -> tuple[str, list[Evidence], list[str]]:
    """Verdict for one instant of derived metrics (no hysteresis)."""
    ev: list[Evidence] = []
    missing: list[str] = []

    kv, waiting, pre = m.kv_usage, m.waiting, m.preemptions_per_s
    mem, util, batch, cpu = m.gpu_memory_pct, m.gpu_util_pct, m.batch_p95, m.cpu_cores
    for name, v in (("kv_usage", kv), ("waiting", waiting), ("preemptions_per_s", pre),
                    ("gpu_memory_pct", mem), ("gpu_util_pct", util)):
        if v is None:
            missing.append(name)

    kv_high = kv is not None and kv >= t.kv_high
    queued = waiting is not None and waiting >= t.waiting_min
    preempting = pre is not None and pre > t.preempt_rate
    cap_wait = m.waiting_capacity is not None and m.waiting_capacity >= t.waiting_min

    if kv_high and (preempting or cap_wait or (queued and m.waiting_capacity is None)):
        ev.append(_ev("kv_usage", kv, ">=", t.kv_high, True, "KV usage"))
        if preempting:
            ev.append(_ev("preemptions_per_s", pre, ">", t.preempt_rate, True, "preemptions/s"))
        if queued:
            ev.append(_ev("waiting", waiting, ">=", t.waiting_min, True, "waiting"))
        if batch is not None:
            ev.append(_ev("batch_p95", batch, "<=", t.batch_collapse, batch <= t.batch_collapse, "batch p95"))
        if mem is not None:
            ev.append(_ev("gpu_memory_pct", mem, ">", t.gpu_mem_high_pct, mem > t.gpu_mem_high_pct, "GPU memory", True))
        if util is not None:
            ev.append(_ev("gpu_util_pct", util, "<", t.gpu_util_low_pct, util < t.gpu_util_low_pct, "GPU util", True))
        return "kv-pressure", ev, missing

    if util is not None and util >= t.gpu_util_high_pct and not preempting:
        ev.append(_ev("gpu_util_pct", util, ">=", t.gpu_util_high_pct, True, "GPU util", True))
        if kv is not None:
            ev.append(_ev("kv_usage", kv, "<", t.kv_high, kv < t.kv_high, "KV usage"))
        if batch is not None:
            ev.append(_ev("batch_p95", batch, ">", t.batch_collapse, batch > t.batch_collapse, "batch p95"))
        return "compute-bound", ev, missing

    host_cpu = cpu is not None and cpu >= t.cpu_saturated_cores
    low_util = util is not None and util < t.gpu_util_low_pct
    if queued and low_util and not kv_high and not preempting:
        ev.append(_ev("waiting", waiting, ">=", t.waiting_min, True, "waiting"))
        ev.append(_ev("gpu_util_pct", util, "<", t.gpu_util_low_pct, True, "GPU util", True))
        ev.append(_ev("kv_usage", kv, "<", t.kv_high, True, "KV usage"))
        if cpu is not None:
            ev.append(_ev("cpu_cores", cpu, ">=", t.cpu_saturated_cores, host_cpu, "API server CPU cores"))
        return "host-bound", ev, missing
    if host_cpu and low_util and not kv_high:
        ev.append(_ev("cpu_cores", cpu, ">=", t.cpu_saturated_cores, True, "API server CPU cores"))
        ev.append(_ev("gpu_util_pct", util, "<", t.gpu_util_low_pct, True, "GPU util", True))
        return "host-bound", ev, missing

    ev.append(_ev("kv_usage", kv, "<", t.kv_high, not kv_high, "KV usage"))
    ev.append(_ev("preemptions_per_s", pre, "<=", t.preempt_rate, not preempting, "preemptions/s"))
    ev.append(_ev("waiting", waiting, "<", t.waiting_min, not queued, "waiting"))
    return "healthy", ev, missing


def _node_fault(h: ReplicaHistory) -> list[Evidence]:
    s = h.last_ok
    if s is None or s.gpu is None:
        return []
    g, ev = s.gpu, []
    if g.throttle_reasons:
        ev.append(Evidence("throttle_reasons", ",".join(g.throttle_reasons), "none", "!=", True,
                           f"GPU clocks throttled: {', '.join(g.throttle_reasons)}"))
    if g.ecc_uncorrected:
        ev.append(Evidence("ecc_uncorrected", g.ecc_uncorrected, 0, ">", True,
                           f"uncorrected ECC errors: {g.ecc_uncorrected:.0f}"))
    if g.xid_errors:
        ev.append(Evidence("xid_errors", g.xid_errors, 0, ">", True, f"XID error {g.xid_errors:.0f}"))
    return ev


def diagnose(h: ReplicaHistory, now: float, t: Thresholds | None = None) -> Finding:
    """Verdict from history up to `now` only (no look-ahead)."""
    t = t or Thresholds()
    state = h.state(now)
    if state == DOWN:
        err = h.last_error.error if h.last_error is not None else "no successful scrape yet"
        return Finding("down", (Evidence("scrape", err, None, "info", True, f"scrape failed: {err}"),),
                       summary=f"down: {err}")
    nf = _node_fault(h)
    if nf:
        return Finding("node-fault", tuple(nf), summary="GPU unhealthy: do not tune the server, divert")
    if len(h.points) < t.min_points:
        return Finding("unknown", (), summary=f"collecting ({len(h.points)}/{t.min_points} scrapes)")
    # Sustain: the verdict must hold over the last `sustain_points` derived points.
    recent = [m for _, m in list(h.points)[-t.sustain_points:]]
    verdicts = [classify(m, t) for m in recent]
    v, ev, missing = verdicts[-1]
    if any(x[0] != v for x in verdicts):
        # Not sustained yet: keep the previous point's verdict.
        v, ev, missing = verdicts[0]
    return Finding(v, tuple(ev), None, tuple(missing), summary=v)

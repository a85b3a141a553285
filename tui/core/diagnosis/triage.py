"""Triage of one replica: diagnostics.md steps 2-8 run against what kvwatch already holds.

A pure function of the replica's history plus what the caller fetched from the cluster (pod
info rides on the scrapes; log lines and events are passed in, None meaning "not fetched").
Each step becomes a TriageItem with a status, a one-line answer, the comparisons behind it and
detail lines (matching log lines, events, histogram comparisons). The report also says which
evidence was missing, so "nothing found" is never confused with "nothing looked at".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .. import verdicts as V
from ..history import ReplicaHistory
from ..model import Evidence, Finding, Histogram, Scrape, seconds_text
from ..signal_windows import per_second
from ..textsafe import clean
from . import loglines
from .rules import cmp, diagnose, info, missing
from .thresholds import Thresholds

OK, WARN, BAD, MISSING = "ok", "warn", "bad", "missing"

_LOG_KV_SIZE = re.compile(
    r"GPU KV cache size: ([\d,]+) tokens|# GPU blocks: (\d+)|Maximum concurrency for ([\d,]+) tokens per "
    r"request: ([\d.]+)x",
    re.I)

# diagnostics.md step 6: event reasons (and message words) by category
_EVENT_KINDS = (
    ("node memory pressure", re.compile(r"memorypressure|insufficientmemory|evictionthreshold|"
                                        r"node.*(?:low|pressure) on.*memory", re.I)),
    ("eviction", re.compile(r"evict", re.I)),
    ("scheduling delay", re.compile(r"failedscheduling|insufficient nvidia\.com/gpu|unschedulable|"
                                    r"preempting|backofflimit", re.I)),
    ("restart / OOM", re.compile(r"oomkill|backoff|crashloop|killing|unhealthy|restart|"
                                 r"exit code 137|out of memory", re.I)),
)


@dataclass(frozen=True, slots=True)
class TriageItem:
    step: int  # diagnostics.md step
    key: str  # "restarts", "gpu", "logs", "shape", "events", "metrics", "batch"
    title: str
    status: str  # ok / warn / bad / missing
    summary: str
    evidence: tuple[Evidence, ...] = ()
    details: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "key": self.key, "title": self.title, "status": self.status,
                "summary": self.summary, "evidence": [e.as_dict() for e in self.evidence],
                "details": list(self.details)}


@dataclass(frozen=True, slots=True)
class TriageReport:
    replica: str
    ts: float
    finding: Finding
    items: tuple[TriageItem, ...]
    missing: tuple[str, ...]  # evidence not available, in words
    stage: str  # "end-stage: ..." / "early: ..." / ""

    @property
    def verdict(self) -> str:
        return self.finding.verdict

    def item(self, key: str) -> TriageItem | None:
        return next((i for i in self.items if i.key == key), None)

    def as_dict(self) -> dict[str, Any]:
        return {"replica": self.replica, "ts": self.ts, "verdict": self.verdict, "since": self.finding.since,
                "summary": self.finding.summary, "stage": self.stage,
                "evidence": [e.as_dict() for e in self.finding.evidence],
                "items": [i.as_dict() for i in self.items], "missing": list(self.missing)}


# -- helpers --------------------------------------------------------------------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def hist_between(h: ReplicaHistory, name: str, start: float, end: float) -> Histogram | None:
    """Observations of histogram `name` between the scrapes nearest `start` and `end`."""
    # the history thins old scrapes' histograms (one kept a minute): use the nearest that kept it
    view = h.scrapes
    scr = [s for s in view.since(start, end) if s.page.hist(name) is not None]
    if not scr:
        return None
    newest = scr[-1].page.hist(name)
    if newest is None:
        return None
    # the scrape just before the window is the baseline of the delta, when there is one
    before = next((s for s in view.before(start) if s.page.hist(name) is not None), None)
    base = (before or scr[0]).page.hist(name)
    d = newest.minus(base) if base is not None and base is not newest else newest
    return d if d.count > 0 else None


def _q(hh: Histogram | None, q: float) -> float | None:
    return hh.quantile(q) if hh is not None and hh.count > 0 else None


def _fmt_tokens(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


# -- the steps ------------------------------------------------------------------------------------


def _restarts(last: Scrape | None, logs_oom: bool) -> TriageItem:
    pod = last.pod if last is not None else None
    title = "Restarts and OOM kills"
    if pod is None:
        none = (missing("pod", "pod status not available (not running against Kubernetes)"),)
        if logs_oom:
            return TriageItem(2, "restarts", title, BAD, "logs show CUDA out-of-memory: hard failure", none)
        return TriageItem(2, "restarts", title, MISSING, "pod status not available", none)
    oom = pod.last_termination_reason == "OOMKilled" or pod.last_exit_code == 137
    ev = [cmp("restarts", "restarts", float(pod.restarts), ">", 0.0)]
    if pod.last_termination_reason or pod.last_exit_code is not None:
        ev.append(Evidence("last_termination", pod.last_termination_reason or pod.last_exit_code,
                           "OOMKilled / 137", "==", oom,
                           f"last termination: {clean(pod.last_termination_reason or '-')}"
                           f" (exit code {pod.last_exit_code if pod.last_exit_code is not None else '-'})"))
    if oom or logs_oom:
        return TriageItem(2, "restarts", title, BAD,
                          "OOMKilled / exit 137: hard failure (end-stage KV-cache pressure)", tuple(ev))
    if pod.restarts:
        return TriageItem(2, "restarts", title, WARN,
                          f"{pod.restarts} restart(s), no OOM kill: instability (early stage)", tuple(ev))
    return TriageItem(2, "restarts", title, OK, "no restarts", tuple(ev))


def _gpu(last: Scrape | None, traffic: bool, t: Thresholds) -> TriageItem:
    title = "GPU memory and utilisation"
    g = last.gpu if last is not None else None
    if g is None or (g.memory_pct is None and g.compute_pct is None):
        return TriageItem(3, "gpu", title, MISSING, "GPU data absent (no DCGM / NVML source)",
                          (missing("gpu", "GPU data absent"),))
    mem, util = g.memory_pct, g.compute_pct
    ev = [cmp("gpu_memory_pct", "GPU memory", mem, ">", t.gpu_mem_high_pct, "%",
              note="vLLM pre-allocates its KV pool: necessary, never decisive"),
          cmp("gpu_util_pct", "GPU util", util, "<", t.gpu_util_low_pct, "%")]
    ev.append(info("traffic", traffic, "traffic present" if traffic else "no traffic: low util is expected"))
    high = mem is not None and mem > t.gpu_mem_high_pct
    low = util is not None and util < t.gpu_util_low_pct
    if high and low and traffic:
        return TriageItem(3, "gpu", title, WARN,
                          "memory high and compute low with traffic: the KV signature, if vLLM's KV usage agrees",
                          tuple(ev))
    if util is not None and util >= t.gpu_util_high_pct:
        return TriageItem(3, "gpu", title, OK, "GPU busy: compute-heavy, not memory-starved", tuple(ev))
    return TriageItem(3, "gpu", title, OK, "no KV signature on the GPU", tuple(ev))


def _logs(lines: Sequence[str] | None) -> tuple[TriageItem, bool]:
    title = "Allocation failures in the logs"
    if lines is None:
        return TriageItem(4, "logs", title, MISSING, "logs not fetched",
                          (missing("logs", "container logs not fetched"),)), False
    hard, soft, sizes = [], [], []
    for line in lines:
        text = clean(line)[:300]
        k = loglines.kind(line)  # vLLM's periodic stats line is no warning (loglines.py)
        if k == "oom":
            hard.append(text)
        elif k == "preemption":
            soft.append(text)
        if _LOG_KV_SIZE.search(line):
            sizes.append(text)
    details = tuple(hard[-10:] + soft[-10:] + sizes[-3:])
    ev = (Evidence("log_oom_lines", float(len(hard)), 0.0, ">", bool(hard),
                   f"allocation-failure lines: {len(hard)}"),
          Evidence("log_preemption_lines", float(len(soft)), 0.0, ">", bool(soft),
                   f"preemption / KV warning lines: {len(soft)}"))
    if hard:
        return TriageItem(4, "logs", title, BAD, f"{len(hard)} allocation failure(s): CUDA OOM", ev, details), True
    if soft:
        return TriageItem(4, "logs", title, WARN, f"{len(soft)} preemption / KV warning line(s)", ev, details), False
    if not lines:  # nothing read is no evidence of no failures
        return TriageItem(4, "logs", title, MISSING, "no log lines returned: nothing to search",
                          (missing("logs", "no container log lines"),)), False
    return TriageItem(4, "logs", title, OK, f"no allocation failures in {len(lines)} line(s)", ev, details), False


def default_baseline(h: ReplicaHistory, now: float, window_s: float, finding: Finding) -> tuple[float, float]:
    """Before the current problem when there is one (its `since`), else before the recent window."""
    first = h.scrapes[0].ts if h.scrapes else now
    end = now - window_s
    if finding.verdict not in (V.HEALTHY, V.UNKNOWN) and finding.since is not None and first < finding.since < end:
        end = finding.since
    return first, end


def _shape(h: ReplicaHistory, now: float, window_s: float, baseline: tuple[float, float],
           t: Thresholds) -> TriageItem:
    title = "Request shape now vs baseline"
    first = h.scrapes[0].ts if h.scrapes else now
    recent = (now - window_s, now)
    if baseline[1] - baseline[0] < min(window_s, 60.0) / 2:
        return TriageItem(5, "shape", title, MISSING,
                          f"not enough history for a baseline (need {window_s + 30:.0f} s, have {now - first:.0f} s)",
                          (missing("baseline", "baseline window too short"),))
    ev: list[Evidence] = []
    details: list[str] = []
    shifted: list[str] = []
    seen = False
    for name, label in (("prompt_len", "prompt tokens"), ("max_tokens", "max_tokens"), ("gen_len", "output tokens")):
        now_h, base_h = hist_between(h, name, *recent), hist_between(h, name, *baseline)
        p95_now, p95_base = _q(now_h, 0.95), _q(base_h, 0.95)
        if p95_now is None or p95_base is None:
            if now_h is None and base_h is None and name != "gen_len":
                ev.append(missing(name, f"{label} histogram: not exposed or no requests"))
            continue
        seen = True
        ratio = p95_now / p95_base if p95_base else float("inf")
        p50_now, p50_base = _q(now_h, 0.5), _q(base_h, 0.5)
        r50 = p50_now / p50_base if p50_now is not None and p50_base else 1.0
        crossed = ratio >= t.shape_shift_ratio or r50 >= t.shape_shift_ratio  # the bulk moved, or the tail
        ev.append(Evidence(f"{name}_p95_ratio", ratio, t.shape_shift_ratio, ">=", crossed,
                           f"{label} p95 {_fmt_tokens(p95_now)} now vs {_fmt_tokens(p95_base)} baseline"
                           f" ({ratio:.1f}x; p50 {r50:.1f}x{', shifted' if crossed else ''})"))
        details.append(f"{label}: p50 {_fmt_tokens(_q(now_h, 0.5))} / p95 {_fmt_tokens(p95_now)} now, "
                       f"p50 {_fmt_tokens(_q(base_h, 0.5))} / p95 {_fmt_tokens(p95_base)} baseline")
        if crossed and name != "gen_len":
            shifted.append(label)
    rate_now = _rate(h, "requests_success", *recent)
    rate_base = _rate(h, "requests_success", *baseline)
    if rate_now is not None and rate_base:
        burst = rate_now >= t.shape_shift_ratio * rate_base
        ev.append(Evidence("request_rate_ratio", rate_now / rate_base, t.shape_shift_ratio, ">=", burst,
                           f"requests/s {rate_now:.2f} now vs {rate_base:.2f} baseline"))
        if burst:
            shifted.append("request rate")
    if not seen:
        return TriageItem(5, "shape", title, MISSING, "no request-length histograms with requests in both windows",
                          tuple(ev), tuple(details))
    if shifted:
        return TriageItem(5, "shape", title, WARN, f"traffic shifted: {', '.join(shifted)} up", tuple(ev), tuple(details))
    return TriageItem(5, "shape", title, OK, "request shape unchanged", tuple(ev), tuple(details))


def _rate(h: ReplicaHistory, name: str, start: float, end: float) -> float | None:
    scr = h.scrapes.since(start, end)
    if len(scr) < 2:
        return None
    a, b = scr[0].page.value(name), scr[-1].page.value(name)
    if a is None or b is None or b < a or scr[-1].ts <= scr[0].ts:
        return None
    return (b - a) / (scr[-1].ts - scr[0].ts)


def _events(events: Iterable[Any] | None) -> TriageItem:
    title = "Recent Kubernetes events"
    if events is None:
        return TriageItem(6, "events", title, MISSING, "events not fetched", (missing("events", "events not fetched"),))
    found: dict[str, int] = {}
    details = []
    total = 0
    for e in events:
        total += 1
        reason = str(_get(e, "reason", "") or "")
        msg = str(_get(e, "message", "") or "")
        count = _get(e, "count", 1) or 1
        # the reason names the event; the message only when the reason says nothing we know
        kind = next((k for k, rx in _EVENT_KINDS if rx.search(reason)), None) \
            or next((k for k, rx in _EVENT_KINDS if rx.search(msg)), None)
        if kind == "restart / OOM" and str(_get(e, "type", "") or "") == "Normal":
            kind = None  # "Killing: Stopping container" of every rollout and drain is routine
        if kind is not None:
            found[kind] = found.get(kind, 0) + int(count)
            obj = _get(e, "object", "") or _get(e, "involved", "") or ""
            details.append(clean(f"{_get(e, 'type', '') or ''} {reason} {obj}: {msg}".strip())[:300])
    ev = tuple(Evidence(f"events_{k.split()[0]}", float(n), 0.0, ">", True, f"{k}: {n}") for k, n in found.items())
    if found:
        return TriageItem(6, "events", title, WARN,
                          "; ".join(f"{k} ({n})" for k, n in found.items()) + ": amplify pressure, not its cause",
                          ev, tuple(details[-15:]))
    if not total:  # none returned (expired, or none yet): no data, not a pass
        return TriageItem(6, "events", title, MISSING, "no events returned: nothing to check",
                          (missing("events", "no events for the pod"),))
    return TriageItem(6, "events", title, OK, f"nothing relevant in {total} event(s)", ev)


def _metrics(h: ReplicaHistory, now: float) -> TriageItem:
    title = "Metrics endpoint"
    state = h.state(now)
    ok = h.last_ok
    if ok is None:
        err = h.last_error.error if h.last_error is not None else "never scraped"
        return TriageItem(7, "metrics", title, BAD, f"metrics not readable: {clean(err)}",
                          (info("scrape", err, f"scrape failed: {clean(err)}"),))
    s = ok.page
    text = f"{s.generation} metrics, {len(s.engines)} engine(s), last read {now - ok.ts:.0f} s ago"
    status = OK if state == "ok" else WARN
    if state != "ok" and h.last_error is not None:
        text += f"; now failing: {clean(h.last_error.error)}"
    return TriageItem(7, "metrics", title, status, text, (info("state", state, f"replica state {state}"),))


def _batch(h: ReplicaHistory, finding: Finding, t: Thresholds, window_s: float, now: float,
           baseline: tuple[float, float]) -> TriageItem:
    title = "Batch collapse, preemptions and KV usage"
    m = h.latest
    traffic = (m.running or 0) + (m.waiting or 0) >= 1 or (m.requests_per_s or 0) > 0
    ev = [
        cmp("kv_usage", "KV usage", m.kv_usage, ">=", t.kv_high),
        cmp("preemptions_per_s", per_second("preemptions", h.windows.rate_s), m.preemptions_per_s, ">",
            t.preempt_rate),
        cmp("waiting", "waiting", m.waiting, ">=", t.waiting_min),
        cmp("batch_p95", "batch p95 (running requests)", m.batch_p95, "<=", t.batch_collapse),
    ]
    base = baseline
    for name, label in (("ttft", "TTFT"), ("itl", "inter-token latency")):
        p_now = _q(hist_between(h, name, now - window_s, now), 0.95)
        p_base = _q(hist_between(h, name, *base), 0.95) if base[1] > base[0] else None
        if p_now is not None and p_base:
            r = p_now / p_base
            ev.append(Evidence(f"{name}_p95_ratio", r, t.latency_recovered_ratio, ">=", r >= t.latency_recovered_ratio,
                               f"{label} p95 {seconds_text(p_now)} now vs {seconds_text(p_base)} baseline ({r:.1f}x)"))
    collapsed = m.batch_p95 is not None and m.batch_p95 <= t.batch_collapse and traffic
    pressured = finding.verdict == V.KV_PRESSURE
    if pressured and collapsed:
        return TriageItem(8, "batch", title, BAD, "batch collapsed under KV pressure: strongly confirms it", tuple(ev))
    if pressured:
        return TriageItem(8, "batch", title, BAD, "KV near the ceiling with preemptions / capacity queue", tuple(ev))
    if collapsed:
        return TriageItem(8, "batch", title, WARN, "batch collapsed, but KV is not the binding limit", tuple(ev))
    return TriageItem(8, "batch", title, OK, "batching effective", tuple(ev))


def triage(h: ReplicaHistory, now: float, t: Thresholds | None = None, *, finding: Finding | None = None,
           logs: Sequence[str] | None = None, events: Iterable[Any] | None = None,
           window_s: float = 120.0, baseline: tuple[float, float] | None = None) -> TriageReport:
    """Steps 2-8 of diagnostics.md for one replica at `now` (history up to `now` only).

    `logs`: container log lines (current and previous container), None = not fetched.
    `events`: EventInfo objects or dicts with reason/message/type/object/count, None = not fetched.
    `baseline`: (start, end) of the window to compare the request shape with; default: the
    history before the last `window_s` seconds.
    """
    t = t or Thresholds()
    finding = finding or diagnose(h, now, t)
    last = h.last_ok or h.last_error
    if h.last_error is not None and h.last_error.pod is not None and (last is None or h.last_error.ts >= last.ts):
        last = h.last_error
    m = h.latest
    traffic = (m.running or 0) + (m.waiting or 0) >= 1 or (m.requests_per_s or 0) > 0
    logs_item, logs_oom = _logs(logs)
    base = baseline or default_baseline(h, now, window_s, finding)
    items = (
        _restarts(last, logs_oom),
        _gpu(h.last_ok, traffic, t),
        logs_item,
        _shape(h, now, window_s, base, t),
        _events(events),
        _metrics(h, now),
        _batch(h, finding, t, window_s, now, base),
    )
    gaps = [i.summary for i in items if i.status == MISSING]
    gaps += [f"{e.signal}: {e.text}" for e in finding.evidence if e.op == "missing"]
    seen: dict[str, None] = {}
    for g in gaps:
        seen.setdefault(g, None)
    if items[0].status == BAD:
        stage = "end-stage: the replica is crashing (OOM); lower gpu-memory-utilization before tuning further"
    elif finding.verdict == V.KV_PRESSURE:
        stage = "early: throughput collapse under KV pressure, no crash yet"
    else:
        stage = ""
    return TriageReport(h.name, now, finding, items, tuple(seen), stage)

"""The verdicts of tui/core/diagnosis/rules.py as Prometheus recording and alerting rules.

The same thresholds drive both, so the pager and the dashboard agree on what is wrong. kvwatch
counts in scrapes ("a queue held 3 scrapes"); Prometheus in time, so every count of scrapes
becomes a window of `scrape_interval_s` seconds per scrape: the rules assume Prometheus scrapes
the engines and evaluates the rules at that interval. A window that must hold the last n samples
is (n - 1/2) intervals long, one that must hold n intervals of a counter (n + 1/2): the half
interval keeps the count right whether the range is closed on the left (Prometheus 2) or open
(Prometheus 3), and under scrape jitter.

Exclusive like the verdicts: first match wins, in the order of the rules module (node-fault,
stalled, kv-pressure, host-bound, compute-bound, concurrency-capped, overloaded); each verdict's
recording rule is its own condition `unless` those before it. host-bound and compute-bound are
recorded (a look-alike must not page as overloaded) but do not alert. What the rules cannot see:
kvwatch's hysteresis (kv_clear, "recently preempted", the sustain count) beyond what `for:` and
the windows give, max-num-seqs (a cap is recognised by `running` pinned flat), and the batch size.
"""

from __future__ import annotations

from typing import Any

import math
import re
from dataclasses import dataclass, field

from ..diagnosis.thresholds import Thresholds
from ..history import Windows
from ..metrics.names import THROTTLE_BITS
from .. import verdicts as V

# Every recorded series is named kvwatch:<signal> (the by labels are the aggregation).
P = "kvwatch:"
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"^(?:{_MATCHER}(?:,{_MATCHER})*,?)?$")  # label matchers, without braces
RUNBOOK_BASE = "runbooks"  # kvwatch follows these runbooks; --runbook-base points at where they live

# alert name, verdict, severity, runbook section (file#anchor)
ALERTS: tuple[tuple[str, str, str, str], ...] = (
    ("KVWatchReplicaDown", V.DOWN, "critical", "diagnostics.md#2-check-for-restarts-or-oomkills"),
    ("KVWatchNodeFault", V.NODE_FAULT, "critical", "diagnostics.md#3-inspect-gpu-memory-and-utilization"),
    ("KVWatchStalled", V.STALLED, "critical", "diagnostics.md#4-inspect-vllm-logs-for-allocation-pressure"),
    ("KVWatchKVCachePressure", V.KV_PRESSURE, "critical", "preemption-thrash.md"),
    ("KVWatchOverloaded", V.OVERLOADED, "warning", "emergency-mitigation.md"),
    ("KVWatchConcurrencyCapped", V.CONCURRENCY_CAPPED, "warning",
     "prevention.md#2-control-runtime-concurrency-explicitly"),
    ("KVWatchFleetAlarm", "alarm", "warning", "diagnostics.md#quick-triage-5-minutes"),
)

# The engines' names for each signal, preferred first (both vLLM generations, then SGLang).
KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs")
PREEMPT = ("vllm:num_preemptions_total", "vllm:num_preemptions", "sglang:num_retracted_requests_total")
# tokens and steps: any one moving is progress
PROGRESS = (("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
            ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
            ("vllm:iteration_tokens_total_count",))
TTFT = ("vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket")
BY_REASON = "vllm:num_requests_waiting_by_reason"
THROTTLE = ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")


@dataclass(frozen=True)
class RuleOptions:
    by: tuple[str, ...] = ("namespace", "pod")  # the labels that name a replica
    gpu_by: tuple[str, ...] | None = None  # the DCGM exporter's labels for the same (default: by)
    scrape_interval_s: float = 30.0
    selector: str = ""  # label matchers added to every engine series, e.g. job="vllm"
    runbook_base: str = RUNBOOK_BASE
    runbook_urls: dict[str, str] = field(default_factory=dict)  # verdict (or alert name) -> URL
    for_s: float | None = None  # the verdict alerts' `for:`; None: derived from sustain_points
    baseline_s: float = 6 * 3600.0  # the fleet alarm's baseline: median over this window
    group: str = "kvwatch"


def validate(t: Thresholds, w: Windows, o: RuleOptions) -> None:
    """Refuse numbers that make no sense as rules (ValueError naming each), before any is written."""
    bad = []
    for name in ("kv_high", "kv_clear", "kv_low", "kv_room", "pinned_tolerance", "deferred_share"):
        v = getattr(t, name)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= 1):
            bad.append(f"{name} = {v!r}: a share of the KV cache must be within 0 to 1")
    for name in ("gpu_util_low_pct", "gpu_util_high_pct", "gpu_util_saturated_pct"):
        v = getattr(t, name)
        if not (math.isfinite(v) and 0 <= v <= 100):
            bad.append(f"{name} = {v!r}: a percentage must be within 0 to 100")
    for name in ("queue_points", "pinned_points", "stall_points", "sustain_points", "recent_points", "room_points",
                 "alarm_points", "preempt_min_count"):
        v = getattr(t, name)
        if not (isinstance(v, int) and v >= 1):
            bad.append(f"{name} = {v!r}: a count of scrapes must be at least 1")
    for name in ("preempt_rate", "waiting_min", "cpu_saturated_cores", "alarm_ratio", "alarm_queue_min",
                 "alarm_latency_min_s"):
        v = getattr(t, name)
        if not (math.isfinite(v) and v >= 0):
            bad.append(f"{name} = {v!r}: must be a number >= 0")
    if not (math.isfinite(t.kv_hold_s) and t.kv_hold_s > 0):
        bad.append(f"kv_hold_s = {t.kv_hold_s!r}: a window must be a number of seconds > 0")
    if not bad and t.kv_clear > t.kv_high:
        bad.append(f"kv_clear = {t.kv_clear} exceeds kv_high = {t.kv_high}")
    for name, v in (("scrape interval", o.scrape_interval_s), ("stale window (stale_s)", w.stale_s),
                    ("quantile window (quantile_s)", w.quantile_s), ("baseline window", o.baseline_s)):
        if not (math.isfinite(v) and v > 0):
            bad.append(f"{name} = {v!r}: a window must be a positive number of seconds")
    if o.for_s is not None and not (math.isfinite(o.for_s) and o.for_s >= 0):
        bad.append(f"for = {o.for_s!r}: must be >= 0 seconds")
    for lab in (*o.by, *(o.gpu_by or ())):
        if not _LABEL.match(lab):
            bad.append(f"label {lab!r}: not a Prometheus label name")
    if not o.by:
        bad.append("--by: at least one label names a replica")
    if o.gpu_by is not None and len(o.gpu_by) != len(o.by):
        bad.append("--gpu-by must name as many labels as --by (one for each)")
    if not _SELECTOR.match(o.selector):
        bad.append(f"selector {o.selector!r}: expected label matchers without braces, like job=\"vllm\"")
    if bad:
        raise ValueError("; ".join(bad))


def duration(seconds: float) -> str:
    """A Prometheus duration (integer units only): 45s, 1m30s, 37500ms."""
    ms = max(0, round(seconds * 1000))
    if ms % 1000:
        return f"{ms}ms"
    s = ms // 1000
    if s == 0:
        return "0s"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return "".join(f"{n}{u}" for n, u in ((h, "h"), (m, "m"), (sec, "s")) if n)


def _num(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


class _Q:
    """PromQL fragments for one set of options."""

    def __init__(self, t: Thresholds, o: RuleOptions) -> None:
        self.t, self.o = t, o
        self.iv = o.scrape_interval_s
        self.by = ", ".join(o.by)
        self.on = f"on({self.by})"

    def sel(self, name: str, extra: str = "") -> str:
        m = ", ".join(x for x in (self.o.selector, extra) if x)
        return f"{name}{{{m}}}" if m else name

    def samples(self, n: int) -> str:  # a range holding the last n samples
        return duration((n - 0.5) * self.iv)

    def intervals(self, n: int) -> str:  # a range holding n scrape intervals of a counter
        return duration((n + 0.5) * self.iv)

    def first(self, agg: str, names: tuple[str, ...], wrap: str = "{}", extra: str = "") -> str:
        """The first of several names a replica exposes, aggregated per replica."""
        return " or ".join(f"{agg} by ({self.by}) ({wrap.format(self.sel(n, extra))})" for n in names)

    def gpu(self, expr: str) -> str:
        """A DCGM series carried over to the replica's labels (when the exporter names them otherwise)."""
        gb = self.o.gpu_by
        if not gb or tuple(gb) == tuple(self.o.by):
            return expr
        for src, dst in zip(gb, self.o.by, strict=True):
            if src != dst:
                expr = f'label_replace({expr}, "{dst}", "$1", "{src}", "(.*)")'
        return expr


def _recording(q: _Q, w: Windows) -> list[dict[str, Any]]:
    t, by, on = q.t, q.by, q.on
    r = []

    def rec(name: str, expr: str) -> None:
        r.append({"record": P + name, "expr": expr})

    # -- the signals, per replica (max over a data-parallel pod's engines, sums for queues) ----
    rec("kv_usage", q.first("max", KV))
    rec("waiting", q.first("sum", WAITING))
    rec("running", q.first("sum", RUNNING))
    rec("in_flight", f"{P}running + {on} {P}waiting")
    # waiting for capacity (newest vLLM); elsewhere all waiting stands in, as in the live view
    cap, dfr = q.sel(BY_REASON, 'reason="capacity"'), q.sel(BY_REASON, 'reason="deferred"')
    rec("waiting_capacity", f"sum by ({by}) ({cap}) or {P}waiting")
    rec("waiting_deferred", f"sum by ({by}) ({dfr})")
    rec("swapped", q.first("sum", ("vllm:num_requests_swapped",)))
    # the live view's preemption rate: over the history's rate window (signal_windows)
    rec("preemptions_window", q.first("sum", PREEMPT, f"increase({{}}[{duration(w.rate_s)}])"))
    rec("preemptions_recent", q.first("sum", PREEMPT, f"increase({{}}[{q.intervals(t.recent_points)}])"))
    # the live view holds kv-pressure at a full pool until `kv_hold_s` without a preemption
    rec("preemptions_hold", q.first("sum", PREEMPT, f"increase({{}}[{duration(t.kv_hold_s)}])"))
    parts = []
    for i, names in enumerate(PROGRESS):
        for n in names:
            parts.append(f'label_replace(increase({q.sel(n)}[{q.intervals(t.stall_points)}]), '
                         f'"kvwatch_counter", "{i}", "", "")')
    rec("progress", f"sum by ({by}) ({' or '.join(parts)})")
    rec("progress_last", f"sum by ({by}) ({' or '.join(parts)})".replace(
        f"[{q.intervals(t.stall_points)}]", f"[{q.intervals(1)}]"))
    rec("gpu_util", q.gpu(f"max by ({', '.join(q.o.gpu_by or q.o.by)}) (DCGM_FI_PROF_SM_ACTIVE * 100)")
        + " or " + q.gpu(f"max by ({', '.join(q.o.gpu_by or q.o.by)}) (DCGM_FI_DEV_GPU_UTIL)"))
    rec("api_cpu_cores", f"sum by ({by}) (rate({q.sel('process_cpu_seconds_total')}[{q.intervals(1)}]))"
                         f" and {on} {P}kv_usage")
    ttft = " or ".join(f"sum by ({by}, le) (rate({q.sel(n)}[{duration(w.quantile_s)}]))" for n in TTFT)
    rec("ttft_p95_seconds", f"histogram_quantile(0.95, {ttft})")

    # -- node health: throttle reasons other than the benign ones, uncorrected ECC, XID --------
    gb = ", ".join(q.o.gpu_by or q.o.by)
    bits = [b for b, name in THROTTLE_BITS.items() if name not in t.benign_throttle]
    faults = ['label_replace(DCGM_FI_DEV_XID_ERRORS > 0, "fault", "xid", "", "")',
              'label_replace(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0, "fault", "ecc", "", "")']
    if bits:
        for m in THROTTLE:
            test = " + ".join(f"floor({m} / {b}) % 2" for b in bits)
            faults.append(f'label_replace(({test}) > 0, "fault", "throttle", "", "")')
    rec("gpu_fault", q.gpu(f"max by ({gb}, fault) ({' or '.join(faults)})"))

    # -- persistence, as counts of consecutive scrapes ------------------------------------------
    rec("queue", f"{P}waiting_capacity >= {_num(t.waiting_min)}")
    rec("queue_held", f"count_over_time({P}queue[{q.samples(t.queue_points)}]) >= {t.queue_points}")
    rec("queue_two", f"count_over_time({P}queue[{q.samples(2)}]) >= 2")
    rec("deferred_dominated", f"{P}waiting_deferred >= {_num(t.waiting_min)} and {on} "
                              f"{P}waiting_deferred >= {on} ({_num(t.deferred_share)} * {P}waiting)")
    pin = q.samples(t.pinned_points)
    hi, lo = f"max_over_time({P}running[{pin}])", f"min_over_time({P}running[{pin}])"
    rec("running_pinned", f"({hi} - {on} {lo}) <= {on} floor({_num(t.pinned_tolerance)} * {hi}) "
                          f"and {on} {P}running >= 1 "
                          f"and {on} count_over_time({P}running[{pin}]) >= {t.pinned_points}")
    rec("kv_peak", f"max_over_time({P}kv_usage[{q.samples(t.room_points)}])")
    rec("preempting", f"{P}preemptions_recent >= {t.preempt_min_count} and {on} "
                      f"{P}preemptions_window > {_num(t.preempt_rate * w.rate_s)}")
    rec("calm", f"({P}kv_usage < {_num(t.kv_high)}) unless {on} {P}preempting unless {on} ({P}swapped >= 1)")

    # -- the verdicts, first match wins ----------------------------------------------------------
    rec("verdict_node_fault", f"max by ({by}) ({P}gpu_fault)")
    stalled = (f"(({P}progress <= 0 and {on} min_over_time({P}in_flight[{q.samples(t.stall_points)}]) >= 1) "
               f"or {on} (count_over_time({P}deferred_dominated[{q.samples(t.stall_points)}]) "
               f">= {t.stall_points})) unless {on} {P}verdict_node_fault")
    # Hysteresis: a verdict's own series, read before this evaluation writes it, is the verdict
    # of the previous evaluation; while it holds, the live view's leave conditions apply (one
    # interval without progress, KV down to kv_clear, any recent preemption, a queue now).
    still = (f"({P}verdict_stalled and {on} (({P}progress_last <= 0 and {on} {P}in_flight >= 1) "
             f"or {on} {P}deferred_dominated))")
    rec("verdict_stalled", f"max by ({by}) ({P}in_flight and {on} (({stalled}) or {on} {still}))")
    kv = (f"{P}kv_usage >= {_num(t.kv_high)} and {on} ({P}preempting or {on} ({P}swapped >= 1) "
          f"or {on} ({P}queue_held unless {on} {P}running_pinned))")
    kv_still = (f"{P}kv_usage >= {_num(t.kv_clear)} and {on} {P}verdict_kv_pressure and {on} "
                f"({P}preemptions_recent > 0 or {on} ({P}swapped >= 1) or {on} ({P}queue unless {on} "
                f"{P}running_pinned) or {on} ({P}preemptions_hold > 0 and {on} "
                f"{P}kv_usage >= {_num(t.kv_high)}))")
    rec("verdict_kv_pressure", f"(({kv}) or {on} ({kv_still})) unless {on} {P}verdict_node_fault "
                               f"unless {on} {P}verdict_stalled")
    before = f"unless {on} {P}verdict_node_fault unless {on} {P}verdict_stalled unless {on} {P}verdict_kv_pressure"
    idle = (f"({P}gpu_util < {_num(t.gpu_util_low_pct)} or {on} "
            f"(({P}kv_usage < {_num(t.kv_low)}) unless {on} {P}gpu_util))")
    rec("verdict_host_bound", f"({P}api_cpu_cores >= {_num(t.cpu_saturated_cores)} and {on} {P}calm "
                              f"and {on} {idle}) {before}")
    before += f" unless {on} {P}verdict_host_bound"
    busy = f"({P}in_flight >= 1 or {on} {P}progress > 0)"
    rec("compute", f"{P}gpu_util >= {_num(t.gpu_util_high_pct)} and {on} {P}calm and {on} {busy}")
    rec("capped", f"{P}waiting_capacity and {on} {P}calm and {on} {P}queue and {on} {P}running_pinned "
                  f"and {on} ({P}kv_peak < {_num(t.kv_room)}) and {on} {P}queue_two")
    saturated = f"{P}gpu_util >= {_num(t.gpu_util_saturated_pct)}"
    rec("verdict_compute_bound", f"({P}compute unless {on} ({P}capped unless {on} {saturated})) {before}")
    before += f" unless {on} {P}verdict_compute_bound"
    cap_still = (f"{P}verdict_concurrency_capped and {on} {P}waiting_capacity and {on} {P}calm and {on} "
                 f"{P}queue and {on} {P}running_pinned and {on} ({P}kv_peak < {_num(t.kv_clear)})")
    rec("verdict_concurrency_capped", f"({P}capped or {on} ({cap_still})) {before}")
    before += f" unless {on} {P}verdict_concurrency_capped"
    # a queue that follows kv-pressure or an overload is held from its first scrape
    after = f"({P}verdict_overloaded or {on} ({P}verdict_kv_pressure offset {duration(q.iv)}))"
    rec("verdict_overloaded", f"({P}waiting_capacity and {on} ({P}queue_held or {on} ({P}queue and {on} {after})))"
                              f" {before}")
    return r


def _annotations(q: _Q, verdict: str, alert: str, section: str, summary: str, description: str) -> dict[str, Any]:
    o = q.o
    url = o.runbook_urls.get(verdict) or o.runbook_urls.get(alert) or f"{o.runbook_base.rstrip('/')}/{section}"
    who = " ".join(f"{lab}={{{{ $labels.{lab} }}}}" for lab in o.by)
    return {"summary": f"{who}: {summary}", "description": description, "runbook_url": url}


def _alerts(q: _Q, t: Thresholds, w: Windows) -> list[dict[str, Any]]:
    o, by, on = q.o, q.by, q.on
    sustain = o.for_s if o.for_s is not None else max(t.sustain_points - 1, 0) * q.iv
    advice = V.SUMMARY
    out = []
    exprs = {
        V.DOWN: (
            # a target that answered with engine metrics in the last hour and no longer answers
            f"max by ({by}) (up{{{o.selector}}}) == 0 and {on} ("
            + " or ".join(f"group by ({by}) (last_over_time({q.sel(n)}[1h]))" for n in RUNNING) + ")",
            duration(w.stale_s),
            "scrape of the engine's /metrics fails ({{ $value }} targets up)",
            "the replica's metrics endpoint has not answered for " + duration(w.stale_s)
            + "; kvwatch shows it as down."),
        V.NODE_FAULT: (
            f"max by ({by}, fault) ({P}gpu_fault)", duration(0),
            "GPU fault: {{ $labels.fault }} {{ $value }} (XID code / ECC errors / bad throttle reasons); "
            + advice[V.NODE_FAULT],
            "A GPU of this replica reports {{ $labels.fault }} (value {{ $value }}): XID errors, "
            "uncorrected ECC errors or clock throttling other than the benign reasons ("
            + ", ".join(t.benign_throttle) + ")."),
        V.STALLED: (
            f"{P}verdict_stalled", duration(sustain),
            "{{ $value }} requests in flight and no engine progress",
            f"No generated/prompt tokens or engine steps over the last {t.stall_points} scrapes with "
            f"requests in flight, or the queue dominated by deferred requests. {advice[V.STALLED]}"),
        V.KV_PRESSURE: (
            f"{P}verdict_kv_pressure", duration(sustain),
            "KV cache at {{ $value | humanizePercentage }} and preempting or queueing",
            f"KV usage >= {t.kv_high:.0%} with preemptions (>= {t.preempt_min_count} over the last "
            f"{t.recent_points} scrapes), swapped requests, or a queue held {t.queue_points} scrapes "
            f"that the concurrency cap does not explain. {advice[V.KV_PRESSURE]}"),
        V.OVERLOADED: (
            f"{P}verdict_overloaded", duration(sustain),
            "{{ $value }} requests waiting, the queue held with no room to raise the cap",
            f"A queue (>= {_num(t.waiting_min)} waiting for capacity) held {t.queue_points} scrapes, KV not "
            f"under pressure, the cap not holding it with KV room. {advice[V.OVERLOADED]}"),
        V.CONCURRENCY_CAPPED: (
            f"{P}verdict_concurrency_capped", duration(sustain),
            "{{ $value }} requests queued at the concurrency cap with KV headroom",
            f"running pinned at a cap (flat within {t.pinned_tolerance:.0%} over {t.pinned_points} scrapes), "
            f"a queue, KV peak under {t.kv_room:.0%} over {t.room_points} scrapes and no preemptions. "
            f"{advice[V.CONCURRENCY_CAPPED]}"),
        "alarm": (
            f"({P}waiting >= {_num(t.alarm_queue_min)} and {on} {P}waiting >= {on} ({_num(t.alarm_ratio)} * "
            f"quantile_over_time(0.5, {P}waiting[{duration(o.baseline_s)}])))"
            f" or {on} ({P}ttft_p95_seconds >= {_num(t.alarm_latency_min_s)} and {on} {P}ttft_p95_seconds >= {on} ("
            f"{_num(t.alarm_ratio)} * quantile_over_time(0.5, {P}ttft_p95_seconds[{duration(o.baseline_s)}])))",
            duration(max(t.alarm_points - 1, 0) * q.iv),
            "queue or TTFT p95 ({{ $value }}) far above this replica's own baseline",
            f"waiting >= max({_num(t.alarm_queue_min)}, {_num(t.alarm_ratio)}x the median over "
            f"{duration(o.baseline_s)}) or TTFT p95 >= max({_num(t.alarm_latency_min_s)} s, "
            f"{_num(t.alarm_ratio)}x its median); whatever the verdict (KV can be fine while the queue grows)."),
    }
    for alert, verdict, severity, section in ALERTS:
        expr, for_, summary, description = exprs[verdict]
        rule: dict[str, Any] = {"alert": alert, "expr": expr}
        if for_ != "0s":
            rule["for"] = for_
        rule["labels"] = {"severity": severity, "verdict": verdict}
        rule["annotations"] = _annotations(q, verdict, alert, section, summary, description)
        out.append(rule)
    return out


def build_groups(t: Thresholds | None = None, w: Windows | None = None,
                 o: RuleOptions | None = None) -> list[dict[str, Any]]:
    """The rule groups (as the `groups:` list of a rule file); ValueError on nonsensical input."""
    t, w, o = t or Thresholds(), w or Windows(), o or RuleOptions()
    validate(t, w, o)
    q = _Q(t, o)
    iv = duration(o.scrape_interval_s)
    # one group: its rules run in order, so each alert reads this evaluation's recorded signals
    return [{"name": o.group, "interval": iv, "rules": _recording(q, w) + _alerts(q, t, w)}]

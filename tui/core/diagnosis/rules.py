"""The decision procedure of diagnostics.md / preemption-thrash.md as pure rules.

vLLM pre-allocates its KV pool, so nvidia-smi's GPU memory sits near gpu_memory_utilization
whether the cache is full or empty: GPU memory is necessary evidence but never decides a
verdict. vLLM's own KV usage, waiting queue, preemption rate, batch size and token progress do.

Order of the rules (first match wins), most specific first:
  node-fault          a throttling / ECC / XID GPU: never tune the server, divert
  stalled             requests in flight, no engine progress (or waiting is all "deferred")
  kv-pressure         KV near the ceiling AND (preempting OR requests waiting for capacity)
  host-bound          API server near one core while the GPU idles
  compute-bound       GPU busy, batching effective, no KV pressure (with a queue at the cap
                      only when the GPU is saturated: raising the cap cannot help then)
  concurrency-capped  queue held with KV headroom, nothing preempted, running pinned at a cap
  overloaded          a queue that persists with no room to raise the cap (or no cap holding
                      it): arrivals exceed what the replica completes, scale out
  healthy             none of the above (never with a queue that persists)

A per-scrape classification feeds a small state machine (see `_Tracker`): a new verdict must
hold `sustain_points` scrapes in a row before it replaces the current one (one scrape for
node-fault, stalled, kv-pressure and concurrency-capped, whose conditions already demand
persistence: a stall or queue over several scrapes, two preemptions, `running` pinned);
kv-pressure is left only below `kv_clear` or after `recent_points` preemption-free intervals
without a queue, compute-bound only below `gpu_util_clear_pct`. The verdict at time t
depends only on scrapes up to t.

The state machine is advanced incrementally and lives on the history it judges
(`ReplicaHistory.diagnosis`, opaque to the history), checked against the last point it consumed,
so a refresh costs one classification per replica and a history copied with its state carries
on from it; asking about an earlier time recomputes from the retained history. `export_state` /
`import_state` snapshot and restore it (replay checkpoints). A history and its state are
advanced by the one thread that ingests into it, so no lock guards them.
"""

from __future__ import annotations

from typing import Any, Sequence

import functools
import math
from collections import deque
from dataclasses import dataclass, field, replace

from .. import engines
from ..history import ReplicaHistory
from .. import verdicts as V
from ..model import DOWN, Evidence, Finding, GpuSample, ReplicaMetrics, Scrape
from ..signal_windows import RATE_WINDOW_S, window_text
from .signals import Point, make_point
from .starting import starting
from .thresholds import Thresholds

SUMMARY = V.SUMMARY  # the one-line advice per verdict, from the registry


# -- evidence helpers ----------------------------------------------------------------------------


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if unit == "%":
        return f"{v:.0f}%"
    if math.isfinite(v) and v == int(v) and abs(v) < 1e6:
        return f"{int(v)}{unit}"
    return (f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}") + unit


# Thresholds are a few numbers, formatted for every comparison of every refresh: once each.
_thr_text = functools.lru_cache(maxsize=1024)(_fmt)

_OPS = {
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}


def cmp(signal: str, label: str, value: float | None, op: str, thr: float, unit: str = "", note: str = "") -> Evidence:
    """One threshold comparison; a missing value is reported as such, never as 0.

    The same comparison of the same value comes back as the same (immutable) Evidence: most
    refreshes of most replicas repeat many of theirs (an empty queue, nothing swapped), and
    building one is most of a verdict's cost. Remembered by type too (1 and 1.0 print and
    export differently); a NaN or a -0.0 (equal to 0.0, printed "-0") is built afresh."""
    if (value is not None and (value != value or (value == 0 and _copysign(1.0, value) < 0))) \
            or (thr == 0 and _copysign(1.0, thr) < 0):
        return _cmp(signal, label, value, op, thr, unit, note)
    return _cmp_seen(signal, label, value, op, thr, unit, note)


def _cmp(signal: str, label: str, value: float | None, op: str, thr: float, unit: str = "", note: str = "") -> Evidence:
    """`cmp`, built."""
    if value is None:
        return Evidence(signal, None, thr, "missing", False, f"{label}: not exposed")
    crossed = _OPS[op](value, thr)
    v, t = _fmt(value, unit), _thr_text(thr, unit)
    text = f"{label} {v} {op} {t}" if crossed else f"{label} {v} (not {op} {t})"
    return Evidence(signal, value, thr, op, crossed, text + (f" ({note})" if note else ""))


_cmp_seen = functools.lru_cache(maxsize=256, typed=True)(_cmp)
_copysign = math.copysign


def info(signal: str, value: Any, text: str) -> Evidence:
    return Evidence(signal, value, None, "info", False, text)


@functools.lru_cache(maxsize=64)  # a few fixed lines ("GPU data absent ..."): one object each
def missing(signal: str, text: str) -> Evidence:
    return Evidence(signal, None, None, "missing", False, text)


# -- node health -------------------------------------------------------------------------------


def node_fault_evidence(gpu: GpuSample | None, t: Thresholds) -> list[Evidence]:
    """Crossed evidence of a sick GPU (throttling, uncorrected ECC, XID); empty when healthy."""
    if gpu is None:
        return []
    ev = []
    bad = [r for r in gpu.throttle_reasons if r not in t.benign_throttle]
    if bad:
        ev.append(Evidence("throttle_reasons", ",".join(bad), "none", "!=", True,
                           f"GPU clocks throttled: {', '.join(bad)}"))
    if gpu.ecc_uncorrected:
        ev.append(Evidence("ecc_uncorrected", gpu.ecc_uncorrected, 0, ">", True,
                           f"uncorrected ECC errors {gpu.ecc_uncorrected:.0f} > 0"))
    if gpu.xid_errors:
        ev.append(Evidence("xid_errors", gpu.xid_errors, 0, ">", True, f"XID error {gpu.xid_errors:.0f}"))
    return ev


# -- one scrape --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Checks:
    """Every comparison made at one point, by name, so each verdict can list its own first."""

    ev: dict[str, Evidence] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def add(self, key: str, e: Evidence) -> Evidence:
        self.ev[key] = e
        if e.op == "missing" and e.signal not in self.missing:
            self.missing.append(e.signal)
        return e

    def ordered(self, first: tuple[str, ...]) -> list[Evidence]:
        out = [self.ev[k] for k in first if k in self.ev]
        out += [e for k, e in self.ev.items() if k not in first]
        return out


def _engine_words(name: str) -> tuple[str, str]:
    """How the evidence names KV usage and preemptions: vLLM's words as always, another
    engine's own signal with the engine named ("SGLang token usage", "SGLang retractions")."""
    if name == engines.VLLM.name:
        return "KV usage", "preemptions"
    try:
        eng = engines.get(name)
    except KeyError:
        return "KV usage", "preemptions"
    words = eng.signal_labels
    return (f"{eng.label} {words.get('kv_usage', 'KV usage')}",
            f"{eng.label} {words.get('preemptions', 'preemptions')}")


def _assess(p: Point, t: Thresholds, prev: str | None) -> tuple[str, _Checks]:
    c = _Checks()
    fault = node_fault_evidence(p.gpu, t)
    for i, e in enumerate(fault):
        c.add(f"fault{i}", e)

    # -- KV ------------------------------------------------------------------------------------
    kv_label, pre = _engine_words(p.engine)
    in_kv = prev == V.KV_PRESSURE
    kv_thr = t.kv_clear if in_kv and p.kv is not None and p.kv < t.kv_high else t.kv_high
    e_kv = c.add("kv", cmp("kv_usage", kv_label, p.kv, ">=", kv_thr,
                           note="kv-pressure is left only below this" if kv_thr != t.kv_high else ""))
    kv_high = e_kv.crossed
    # One preemption rate, the one every screen shows (signal_windows): the history's, over its
    # rate window; the count of the last intervals beside it, on the same line. SGLang's
    # retraction gauge (no counter, so no history rate) is read per interval, and says so.
    rate, recent = p.m.preemptions_per_s, p.preempts_recent
    win = f"({window_text(p.rate_s)})"
    if (p.retract_gauge or rate is None) and p.preempt_rate is not None:  # (or no history rate yet)
        rate, win = p.preempt_rate, f"(last {_fmt(p.dt)} s)"
    recently = False
    if rate is None or p.preempt_rate is None:
        c.add("preempt", missing("preemptions_per_s", f"{pre}/s: not exposed"
                                 if p.c_preempt is None and not p.retract_gauge else f"{pre}/s: needs two scrapes"))
        preempting = False
    else:
        # vLLM counts whole preemptions; a counter derived elsewhere may carry float noise
        enough = recent is not None and math.isfinite(recent) and round(recent) >= t.preempt_min_count
        preempting = rate > t.preempt_rate and enough
        n = f"{recent:.0f} in the last {t.recent_points} intervals" if recent is not None else ""
        head = f"{pre}/s {_fmt(rate)} {win}"
        if preempting:
            text = f"{head} > {_fmt(t.preempt_rate)}" + (f", {n}" if n else "")
        elif rate > t.preempt_rate and n:
            text = f"{head}, but only {n} (< {t.preempt_min_count}: not thrash)"
        else:
            text = f"{head} (not > {_fmt(t.preempt_rate)})" + (f", {n}" if n and in_kv else "")
        if in_kv and recent is not None:
            # kv-pressure is left only after `recent_points` intervals without a preemption
            recently = recent > 0
            if recently and not preempting:
                text += f" (kv-pressure holds until {t.recent_points} intervals without one)"
        c.add("preempt", Evidence("preemptions_per_s", rate, t.preempt_rate, ">", preempting or recently, text))
    if in_kv and not recently and p.kv is not None and p.kv >= t.kv_high and p.last_preempt_ts is not None:
        quiet = p.ts - p.last_preempt_ts
        held = quiet < t.kv_hold_s
        recently = held
        c.add("kv_hold", Evidence(
            "preempt_quiet_s", quiet, t.kv_hold_s, "<", held,
            f"last {pre.rstrip('s')} {quiet:.0f} s ago, KV still at the ceiling (kv-pressure is left after "
            f"{t.kv_hold_s:.0f} s without one, or below {_fmt(t.kv_clear)})"))
    swapping = False
    if p.swapped is not None:
        swapping = p.swapped >= 1
        c.add("swapped", cmp("swapped", "swapped requests", p.swapped, ">=", 1.0))

    wt = p.waiting_total
    e_wait = c.add("waiting", cmp("waiting", "waiting", wt, ">=", t.waiting_min))
    queued = e_wait.crossed
    if p.wcap is not None:
        e_cap = c.add("wcap", cmp("waiting_capacity", "waiting for capacity", p.wcap, ">=", t.waiting_min))
        cap_wait = e_cap.crossed
    else:
        c.add("wcap", missing("waiting_capacity",
                              "waiting by reason not exposed (older vLLM): total waiting stands in"))
        cap_wait = queued
    if p.wdef is not None and wt:
        c.add("wdef", Evidence("waiting_deferred", p.wdef, t.deferred_share, ">=",
                               p.deferred_run > 0,
                               f"waiting deferred {_fmt(p.wdef)} of {_fmt(wt)}"
                               f" (a stall when >= {t.deferred_share:.0%} for {t.stall_points} scrapes)"))

    # -- progress (stall) ----------------------------------------------------------------------
    if p.progress is None:
        if p.dt is not None:
            c.add("progress", missing("progress", "token counters not exposed: cannot tell a stall"))
    else:
        c.add("progress", Evidence(
            "stalled_intervals", p.stall_run, t.stall_points, ">=", p.stall_run >= t.stall_points,
            f"no engine progress for {p.stall_run} interval(s) with {_fmt(p.in_flight)} in flight"
            if p.stall_run else f"engine progress {p.progress:,.0f} (tokens + steps) in the last interval"))
    stalled_tokens = p.stall_run >= (1 if prev == V.STALLED else t.stall_points)
    advancing = p.progress is not None and p.progress > 0
    # a stall needs generation that does not advance: a deferred queue beside a generating engine
    # is admission held elsewhere (the LoRA slots, a KV transfer), not a wedge
    stalled_deferred = p.deferred_run >= (1 if prev == V.STALLED else t.stall_points) and not advancing
    lora_full = False
    if p.lora is not None:
        mx, run_a, wait_a = p.lora
        lora_full = mx is not None and len(run_a) >= mx and bool(wait_a)
        c.add("lora", Evidence(
            "lora_adapters", len(run_a), mx, ">=", lora_full,
            f"LoRA adapter slots {len(run_a)}/{mx if mx is not None else '?'} busy"
            f" ({', '.join(run_a[:6]) or 'none'}{' ...' if len(run_a) > 6 else ''})"
            + (f", waiting for a slot: {', '.join(wait_a[:6])}{' ...' if len(wait_a) > 6 else ''}"
               f" ({len(wait_a)} adapter(s))" if wait_a else "")))
    lora_capped = (lora_full and advancing and p.wdef is not None and p.wdef >= t.waiting_min
                   and p.deferred_run >= (1 if prev == V.LORA_CAPPED else t.stall_points))
    # a queue that nothing runs, with KV empty: admission itself is stuck (a livelock); KV cannot
    # be what holds it, and a scale-out would not drain it
    stalled_idle = (p.idle_queue_run >= (1 if prev == V.STALLED else t.stall_points) and not advancing
                    and p.kv is not None and p.kv < t.kv_low)
    if p.idle_queue_run:
        c.add("idle_queue", Evidence(
            "idle_queue_run", p.idle_queue_run, t.stall_points, ">=", stalled_idle,
            f"waiting {_fmt(p.waiting_total)} with nothing running for {p.idle_queue_run} scrape(s)"
            f" ({kv_label} {_fmt(p.kv)}: the queue is not held by KV)"))
    if p.rank is not None:
        lo, hi = p.others_kv or (None, None)
        # crossed: the other ranks all have room, so the pod's trouble is this rank's alone
        c.add("rank", Evidence("dp_rank", p.rank, t.kv_room, "<", one_rank(p, t),
                               f"{'dp_rank' if p.engine == 'sglang' else 'engine'} {p.rank} of {p.ranks} is the fullest:"
                               f" {kv_label} {_fmt(p.kv)}, waiting {_fmt(p.waiting_total)}, running {_fmt(p.running)};"
                               f" the other ranks {_fmt(lo)}..{_fmt(hi)}"))

    # -- running vs a cap ----------------------------------------------------------------------
    mns = p.m.max_num_seqs
    at_cap = False
    if p.running is not None and p.running >= 1:
        if mns:
            e_cap_run = cmp("running", "running", p.running, ">=", mns * (1 - t.pinned_tolerance),
                            note=f"max-num-seqs {_fmt(mns)}")
            at_cap = e_cap_run.crossed
            c.add("pinned", e_cap_run)
        elif p.running_n >= t.pinned_points and p.running_lo is not None and p.running_hi is not None:
            spread = p.running_hi - p.running_lo
            # a cap holds `running` exactly; allow a request finishing between scheduler steps
            span = t.pinned_tolerance * p.running_hi
            tol = math.floor(span) if math.isfinite(span) else 0  # non-finite: never "pinned"
            # ... and never above it: running that peaked higher a moment ago is not held by a cap
            below_peak = p.running_peak is not None and p.running_hi < p.running_peak - tol
            at_cap = math.isfinite(spread) and spread <= tol and not below_peak
            c.add("pinned", Evidence(
                "running_spread", spread, tol, "<=", at_cap,
                f"running {_fmt(p.running_lo)}..{_fmt(p.running_hi)} over {p.running_n} scrapes"
                + (" (pinned at a cap; max-num-seqs not exposed)" if at_cap else "")))
        else:
            c.add("pinned", info("running", p.running, f"running {_fmt(p.running)}"))
    elif p.running is not None:
        c.add("pinned", info("running", p.running, f"running {_fmt(p.running)}"))
    else:
        c.add("pinned", missing("running", "running requests: not exposed"))

    # -- GPU / host ----------------------------------------------------------------------------
    mem, util = p.m.gpu_memory_pct, p.m.gpu_util_pct
    if p.gpu is None:
        c.add("gpu", missing("gpu", "GPU data absent (no DCGM / NVML source)"))
    else:
        c.add("gpu_mem", cmp("gpu_memory_pct", "GPU memory", mem, ">", t.gpu_mem_high_pct, "%",
                             note="pre-allocated KV pool: necessary, not decisive"))
        if p.gpu.join.startswith("local"):  # the node's own driver: say which GPUs and why those
            c.add("gpu_src", info("gpu_source", p.gpu.source, f"GPU via {p.gpu.source}, {p.gpu.join}"))
    util_low = util is not None and util < t.gpu_util_low_pct
    # compute-bound is entered above gpu_util_high_pct and left only below gpu_util_clear_pct:
    # utilisation samples swing with the batch, the verdict should not
    util_thr = t.gpu_util_clear_pct if prev == V.COMPUTE_BOUND else t.gpu_util_high_pct
    # judged over a window: one busy sample in a steady overload is not a compute-bound GPU
    util_w = p.util_mean if p.util_mean is not None else util
    util_high = util_w is not None and util_w >= util_thr
    if util is None and p.gpu is not None:
        c.add("util", missing("gpu_util_pct", "GPU util: not reported"))
    if util is not None:
        # both comparisons are kept; each verdict shows the one its case rests on
        c.add("util", cmp("gpu_util_pct", "GPU util", util, "<", t.gpu_util_low_pct, "%"))
        c.add("util_high", cmp("gpu_util_pct", "GPU util (median of 3 scrapes)", util_w, ">=",
                               util_thr, "%"))
    # the last interval's rate (an onset is seen at once); the screens' "CPU" is the 30 s one
    e_cpu = c.add("cpu", cmp("cpu_cores", "API server CPU (last interval)", p.cpu_cores, ">=",
                             t.cpu_saturated_cores, " cores"))
    cpu_sat = e_cpu.crossed
    batch = p.m.batch_p95
    batch_ok = batch is not None and batch > t.batch_collapse
    c.add("batch", cmp("batch_p95", "batch p95", batch, "<=", t.batch_collapse))
    busy = (p.in_flight or 0.0) >= 1.0 or (p.progress or 0.0) > 0
    # Without GPU utilisation, a lightly loaded engine (KV with clear headroom) stands in for
    # "the GPU idles" next to a saturated API server.
    idle_fallback = util is None and p.kv is not None and p.kv < t.kv_low
    if util is None and cpu_sat and p.kv is not None:
        c.add("idle", Evidence("kv_usage", p.kv, t.kv_low, "<", idle_fallback,
                               f"no GPU util: KV usage {_fmt(p.kv)} {'<' if idle_fallback else '>='} "
                               f"{_fmt(t.kv_low)} stands in for an idle engine"))

    # -- queue vs room to raise the cap -----------------------------------------------------------
    # The peak over a few scrapes, not the last sample: KV swings with the batch, the remedy
    # (raise the cap vs scale out) should not.
    room_thr = {V.CONCURRENCY_CAPPED: t.kv_clear, V.OVERLOADED: t.kv_low}.get(prev or "", t.kv_room)
    if p.kv_peak is not None:
        e_room = c.add("room", cmp("kv_peak", f"peak KV over {t.room_points} scrapes", p.kv_peak, "<", room_thr,
                                   note="room to raise the cap"))
        kv_room = e_room.crossed
    else:
        kv_room = False
    need_run = 1 if prev in (V.OVERLOADED, V.KV_PRESSURE) else t.queue_points
    held_queue = cap_wait and p.queue_run >= need_run
    c.add("queue", _queue_evidence(p.queue_run, need_run, held_queue))

    # -- decide --------------------------------------------------------------------------------
    calm = not kv_high and not preempting and not swapping
    if fault:
        v = V.NODE_FAULT
    elif stalled_tokens or stalled_deferred or stalled_idle:
        v = V.STALLED
    elif lora_capped and not (kv_high and preempting):
        v = V.LORA_CAPPED
    elif kv_high and (preempting or recently or swapping or (held_queue and not at_cap)):
        # a queue with KV full is KV pressure only while the cap is not what holds admission:
        # running pinned at max-num-seqs with nothing preempted is the cap's queue
        v = V.KV_PRESSURE
    elif calm and cpu_sat and (util_low or idle_fallback):
        v = V.HOST_BOUND
    else:
        capped = (calm and cap_wait and at_cap and kv_room
                  and p.queue_run >= (1 if prev == V.CONCURRENCY_CAPPED else 2))
        compute = calm and util_high and busy and (batch is None or batch_ok)
        # With a queue at the cap, the GPU is the limit only when saturated (raising the cap
        # cannot help then); below that, the cap is what holds the queue.
        saturated = util_w is not None and (util_w >= t.gpu_util_saturated_pct or prev == V.COMPUTE_BOUND)
        # a queue that persists outranks the GPU unless the GPU is saturated over the window
        if compute and ((not capped and not held_queue) or saturated):
            v = V.COMPUTE_BOUND
        elif capped:
            v = V.CONCURRENCY_CAPPED
        elif held_queue:
            v = V.OVERLOADED  # a queue that persists is never healthy
        else:
            v = V.HEALTHY
    return v, c


@functools.lru_cache(maxsize=256, typed=True)  # a few small whole numbers (by type too): one object each
def _queue_evidence(run: int, need: int, held: bool) -> Evidence:
    return Evidence("queue_run", run, need, ">=", held,
                    f"queue held for {run} scrape(s)" + ("" if held else f" (persists at {need})"))


# The comparisons each verdict lists first (the rest follow as context).
_ORDER = {
    V.STALLED: ("progress", "idle_queue", "wdef", "waiting", "pinned", "kv"),
    V.LORA_CAPPED: ("lora", "wdef", "waiting", "progress", "pinned", "kv"),
    V.KV_PRESSURE: ("rank", "kv", "preempt", "kv_hold", "swapped", "wcap", "waiting", "batch", "gpu_mem", "util"),
    V.HOST_BOUND: ("cpu", "util", "idle", "gpu", "kv", "waiting", "batch"),
    V.CONCURRENCY_CAPPED: ("wcap", "waiting", "pinned", "room", "rank", "kv", "preempt", "util"),
    V.OVERLOADED: ("wcap", "waiting", "queue", "pinned", "room", "rank", "kv", "preempt", "util"),
    V.COMPUTE_BOUND: ("util_high", "batch", "kv", "preempt", "gpu_mem"),
    V.HEALTHY: ("kv", "preempt", "waiting", "wcap", "util", "cpu"),
}


def classify(p: Point, t: Thresholds, prev: str | None = None) -> tuple[str, list[Evidence], list[str]]:
    """Verdict of one scrape with its evidence (the enter/leave thresholds are chosen by `prev`)."""
    v, c = _assess(p, t, prev)
    return v, _ordered(v, c), c.missing


def evidence_for(verdict: str, p: Point, t: Thresholds) -> tuple[list[Evidence], list[str]]:
    """The comparisons at `p` as they stand for `verdict` (its leave thresholds, its order)."""
    _, c = _assess(p, t, verdict)
    return _ordered(verdict, c), c.missing


def _ordered(v: str, c: _Checks) -> list[Evidence]:
    """The verdict's evidence, its case first, one line per signal."""
    if v == V.NODE_FAULT:
        first: tuple[str, ...] = tuple(k for k in c.ev if k.startswith("fault"))
        drop = _drops(v, first)
    else:
        first, drop = _ORDER_DROPS.get(v) or (_ORDER.get(v, ()), _drops(v, _ORDER.get(v, ())))
    ev = c.ev
    wait, wcap = ev.get("waiting"), ev.get("wcap")
    if wait is not None and wcap is not None:  # one line for the queue
        ev = dict(ev)
        if wcap.op == "missing":  # older vLLM: the total stands in, said on its line
            drop = drop | {"wcap"}
            if wait.op != "missing":
                ev["waiting"] = _older_vllm_waiting(wait)
        else:
            drop = drop | {"waiting"}
            if isinstance(wait.value, (int, float)) and wait.value != wcap.value:
                ev["wcap"] = _with_text(wcap, f"{wcap.text} ({_fmt(wait.value)} waiting in all)")
    keys = [k for k in first if k in ev] + [k for k in ev if k not in first]
    return [ev[k] for k in keys if k not in drop]


def _drops(v: str, first: tuple[str, ...]) -> frozenset[str]:
    """The comparisons verdict `v` leaves out: GPU utilisation against the mark the verdict does
    not rest on; the queue's persistence and the room to raise the cap but in the two queue
    verdicts' case (elsewhere they are noise)."""
    return frozenset({"util" if v == V.COMPUTE_BOUND else "util_high"} | ({"room", "queue"} - set(first)))


_ORDER_DROPS = {v: (first, _drops(v, first)) for v, first in _ORDER.items()}


def _older_vllm_waiting(wait: Evidence) -> Evidence:
    """`wait` saying that the total stands in for the queue by reason (older vLLM); for the same
    object (a remembered comparison: `cmp`), the same line again (most refreshes: none waiting)."""
    hit = _OLDER_VLLM.get(id(wait))
    if hit is not None and hit[0] is wait:
        return hit[1]
    out = _with_text(wait, f"{wait.text} (older vLLM: not split by reason)")
    if len(_OLDER_VLLM) >= 256:
        _OLDER_VLLM.clear()
    _OLDER_VLLM[id(wait)] = (wait, out)  # (holding `wait`: its id is not reused while here)
    return out


_OLDER_VLLM: dict[int, tuple[Evidence, Evidence]] = {}


def _with_text(e: Evidence, text: str) -> Evidence:
    """`replace(e, text=text)` (dataclasses.replace walks the fields on every call)."""
    return Evidence(e.signal, e.value, e.threshold, e.op, e.crossed, text)


# -- hysteresis state machine ------------------------------------------------------------------

# Verdicts whose conditions already demand persistence (a stall or a queue over several scrapes,
# running pinned, two preemptions): they need no further sustain. node-fault is a hard signal.
_FAST = frozenset({V.NODE_FAULT, V.STALLED, V.CONCURRENCY_CAPPED, V.KV_PRESSURE, V.OVERLOADED, V.LORA_CAPPED})
_TAIL = 16  # points kept for short-window signals (SGLang's retraction window: 30 s at 2 s scrapes)
# What a tail point older than the newest holds as its metrics: only the newest point's are read
# (evidence), and the history keeps its own newest few as objects (~1 KB each otherwise).
_NO_METRICS = ReplicaMetrics()


@dataclass(slots=True)
class _Tracker:
    """The verdict state machine of one replica, advanced one successful scrape at a time."""

    t: Thresholds
    gap_s: float = 15.0  # failed scrapes over a gap this long (and 3 scrape intervals) between good ones
    # is an outage: the verdict starts afresh
    rate_s: float = RATE_WINDOW_S  # the history's rate window (its points' `m` rates), said in the evidence
    tail: deque[Any] = field(default_factory=lambda: deque(maxlen=_TAIL))
    last_point: tuple[float, ReplicaMetrics] | None = None  # the history's (ts, metrics) tuple last consumed (by identity)
    n: int = 0
    state: str = V.UNKNOWN
    since: float | None = None
    cand: str | None = None
    cand_since: float | None = None
    cand_n: int = 0
    # raw classification of the last point: its verdict and every comparison made, judged with
    # the state as it stands after it whenever the verdict differs from that state (the state
    # changes only to the verdict), so those checks are `evidence_for(state, point)`'s too
    last: tuple[str, _Checks] | None = None
    # scrapes since the state last came back to healthy from a queue verdict (None: it has not)
    calm_n: int | None = None

    def advance(self, scrape: Scrape, point_tuple: Any, after_failures: bool = False) -> None:
        ts, m = point_tuple
        prev = self.tail[-1] if self.tail else None
        if prev is not None and ts <= prev.ts:
            self.last_point = point_tuple  # a repeated sample (same scrape time): nothing new
            return
        # the usual interval: the longest of the recent ones (a refresh soon after another,
        # `ctrl+r`, must not make the next timed one look like an outage)
        if after_failures and prev is not None and (cadence := max((p.dt for p in self.tail if p.dt), default=None)) \
                and ts - prev.ts >= max(self.gap_s, 3 * cadence):
            # back after an outage (failed scrapes, often a restarted server): the old verdict
            # and its `since` describe another process; judge afresh. A gap in kvwatch's own
            # refreshes with no failed scrape is no outage: the verdict carries on.
            self.tail.clear()
            self.n, self.state, self.since, self.cand, self.cand_n = 0, V.UNKNOWN, None, None, 0
            self.calm_n = None
        p = make_point(scrape, m, list(self.tail), self.t, self.rate_s)
        if self.tail:  # (empty after an outage)
            # A point's metrics are read only by its own classification (made below, kept in
            # `last`), never once it has been: the older point lets them go in place (a copy
            # of its 45 fields cost more than the rest of this step). A tracker copied with
            # its tail (export_state, a cloned Monitor) shares these points, and lets the same
            # point's metrics go the same way when it moves past it.
            self.tail[-1].m = _NO_METRICS
        self.tail.append(p)
        self.last_point = point_tuple
        self.n += 1
        if self.n < self.t.min_points or p.dt is None:
            if self.since is None:
                self.since = ts
            self.last = None
            return
        v, checks = _assess(p, self.t, self.state)
        # its evidence is ordered when asked for (diagnose): for this verdict, or for the one
        # the state holds while `v` is pending, from these same checks (see `last`)
        self.last = (v, checks)
        if v == V.HEALTHY and self.state in _TROUBLE and _queued(p, self.t):
            # never down to healthy with requests still waiting: the trouble verdict holds until
            # the queue clears or the verdict that explains it (a cap, an overload) is established
            v = self.state
        if v == self.state:
            self.cand, self.cand_n = None, 0
            return
        if v == self.cand:
            self.cand_n += 1
        else:
            self.cand, self.cand_since, self.cand_n = v, ts, 1
        need = _need(self.state, v, self.t, self.calm_n)
        if self.calm_n is not None:
            self.calm_n += 1
        if self.cand_n >= need:
            self.calm_n = 0 if (v == V.HEALTHY and self.state in _QUEUED) else self.calm_n
            self.state, self.since = v, self.cand_since
            self.cand, self.cand_n = None, 0


_QUEUED = frozenset({V.OVERLOADED, V.CONCURRENCY_CAPPED, V.LORA_CAPPED})
# the verdicts a replica in trouble holds; leaving one for healthy needs the queue gone
_TROUBLE = _QUEUED | {V.KV_PRESSURE, V.STALLED}


def _queued(p: Point, t: Thresholds) -> bool:
    wt = p.waiting_total
    return wt is not None and wt >= t.waiting_min


def _need(state: str, v: str, t: Thresholds, calm_n: int | None = None) -> int:
    """Scrapes verdict `v` must hold to replace `state`: a fast verdict enters at once from
    healthy or below it; a step down to a milder verdict waits `sustain_points`, and so does a
    queue verdict shortly (`room_points` scrapes) after a queue verdict ended, so a replica on a
    boundary between two verdicts (a pool filling with queue blips) does not flap between them."""
    up = state == V.HEALTHY or V.SEVERITY.get(v, 99) < V.SEVERITY.get(state, 99)
    if state == V.HEALTHY and v in _QUEUED and calm_n is not None and calm_n < 2 * t.room_points:
        return t.sustain_points
    return 1 if (state == V.UNKNOWN or (v in _FAST and up)) else t.sustain_points


def _tracker(h: ReplicaHistory, now: float, t: Thresholds) -> _Tracker:
    """The history's state machine advanced to `now` (a fresh one when it has none, when the
    thresholds changed, or when the history no longer holds the last point it consumed)."""
    pts, scr = h.points, h.scrapes
    tr = h.diagnosis if isinstance(h.diagnosis, _Tracker) else None
    start = 0
    if tr is not None and (tr.t is t or tr.t == t) and tr.last_point is not None:
        last_ts = tr.last_point[0]
        idx = None
        n = len(pts)
        for k, p in enumerate(reversed(pts)):  # the last consumed point, searched from the right
            i = n - 1 - k
            # by identity while it is one of the newest objects; packed points (a batch of many
            # points at once) come back as equal copies: the same time in the same history
            if p is tr.last_point or (p[0] == last_ts and p == tr.last_point):
                idx = i
                break
            if p[0] < last_ts:
                break
        if idx is None:
            tr = None  # state carried from another history, or this one dropped the point: start over
        elif last_ts > now:
            return _replay(h, now, t)  # asked about the past: recompute, leave the state alone
        else:
            start = idx + 1
    else:
        tr = None
    if tr is None:
        tr, start = _Tracker(t, h.windows.stale_s, rate_s=h.windows.rate_s), 0
    for i in range(start, len(pts)):
        pt = pts[i]
        if pt[0] > now:
            break
        tr.advance(scr[i], pt, h.after_failures(pt[0]))
    h.diagnosis = tr
    return tr


def export_state(h: ReplicaHistory) -> object | None:
    """A copy of `h`'s verdict state machine (None when it has none up to its last point), for
    tools that rebuild a history elsewhere (replay checkpoints); give it back with `import_state`."""
    tr = h.diagnosis
    if not isinstance(tr, _Tracker) or tr.last_point is None or not h.points or h.points[-1] is not tr.last_point:
        return None
    return replace(tr, tail=deque(tr.tail, maxlen=_TAIL))


def import_state(h: ReplicaHistory, state: object | None) -> None:
    """Adopt an exported state machine for `h`, a copy of the history it was exported from."""
    if not isinstance(state, _Tracker) or not h.points or state.last_point is None or h.points[-1][0] != state.last_point[0]:
        return
    h.diagnosis = replace(state, tail=deque(state.tail, maxlen=_TAIL), last_point=h.points[-1])


def _replay(h: ReplicaHistory, now: float, t: Thresholds) -> _Tracker:
    tr = _Tracker(t, h.windows.stale_s, rate_s=h.windows.rate_s)
    for s, pt in zip(h.scrapes, h.points, strict=False):
        if pt[0] > now:
            break
        tr.advance(s, pt, h.after_failures(pt[0]))
    return tr


def diagnose(h: ReplicaHistory, now: float, t: Thresholds | None = None) -> Finding:
    """Verdict from history up to `now` only (no look-ahead)."""
    t = t or Thresholds()
    start = starting(h, now, t)
    if start is not None:
        return start
    if h.state(now) == DOWN:
        err = h.last_error.error if h.last_error is not None else "no successful scrape yet"
        since = h.first_error_ts
        return Finding(V.DOWN, (Evidence("scrape", err, None, "info", True, f"scrape failed: {err}"),),
                       since=since, summary=f"down: {err}")
    tr = _tracker(h, now, t)
    state, since, last, n, cand_n = tr.state, tr.since, tr.last, tr.n, tr.cand_n
    point = tr.tail[-1] if tr.tail else None
    if state == V.UNKNOWN or last is None or point is None:
        need = max(t.min_points, 2)
        return Finding(V.UNKNOWN, (), since=since, summary=f"collecting ({min(n, need)}/{need} scrapes)")
    v, checks = last
    # (the checks were made with `state` as the previous verdict whenever v != state: they are
    # `evidence_for(state, point, t)`'s, not judged a second time)
    ev, miss = _ordered(state, checks), checks.missing
    if v != state:
        # held by hysteresis: show the held verdict's case as it stands now, and what is pending
        pend = Evidence("pending", v, t.sustain_points, "info", False,
                        f"pending: {v} ({cand_n}/{_need(state, v, t, tr.calm_n)} scrapes)")
        ev = [*ev, pend]
    return Finding(state, tuple(ev), since, tuple(miss), summary=summary_for(state, point, t, ev))


def rank_bound(finding: Finding) -> bool:
    """The finding's case is one data-parallel rank's (the other ranks have room): remedies act
    on the ranks (rebalance), never on the replica count."""
    return finding.verdict in (V.KV_PRESSURE, V.OVERLOADED, V.CONCURRENCY_CAPPED) and any(
        e.signal == "dp_rank" and e.crossed for e in finding.evidence)


def one_rank(p: Point, t: Thresholds) -> bool:
    """A data-parallel pod whose fullest rank is the only one short of room."""
    return p.rank is not None and p.others_kv is not None and p.others_kv[1] < t.kv_room


def summary_for(state: str, p: Point | None, t: Thresholds, ev: Sequence[Evidence] = ()) -> str:
    """The one-line advice, where the case at `p` changes it: one full data-parallel rank is a
    rank's problem (the other ranks have room: scaling out does not help it); a queue with KV
    room and no cap holding it is not "no room to raise the cap"."""
    if p is not None and p.others_kv is not None and state in (V.KV_PRESSURE, V.OVERLOADED, V.CONCURRENCY_CAPPED) \
            and one_rank(p, t):
        who = "dp_rank" if p.engine == engines.SGLANG.name else "engine"
        lo, hi = p.others_kv
        return (f"one data-parallel rank is full ({who} {p.rank} of {p.ranks}, KV {_fmt(p.kv)}; the others "
                f"{_fmt(lo)}..{_fmt(hi)}): rebalance across ranks (the DP load-balance method, prefix or session "
                f"affinity pinning one rank); do not scale out")
    if state == V.OVERLOADED and any(e.signal == "kv_peak" and e.crossed for e in ev):
        return ("a queue persists though KV has room and running is not pinned at a cap: admission is limited "
                "elsewhere (prefill token budget, long prompts); scale out if it does not drain")
    return SUMMARY.get(state, state)

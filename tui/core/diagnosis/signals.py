"""Per-scrape signals the rules compare: gauges as scraped, counters turned into short rates.

The history's own rates use a 30 s window, which reacts late to an onset and lingers after a
recovery. The rules need "in the last scrape interval" instead, so each successful scrape gets a
`Point` built from the scrape and the few points before it (never after it: no look-ahead).
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

from ..model import GpuSample, ReplicaMetrics, Scrape, counter_step
from ..signal_windows import RATE_WINDOW_S
from .thresholds import Thresholds

# GPU utilisation is judged on the median of this many scrapes: one busy sample never decides
_UTIL_POINTS = 3

# Counters whose increase means the engine made progress (any one moving is enough).
_PROGRESS = ("generation_tokens", "prompt_tokens")


@dataclass(slots=True)
class Point:
    """The signals of one scrape. Treated as immutable (never assigned to once made, but for
    its `m`, let go once the point has been classified: rules._Tracker), but not frozen: a
    frozen dataclass's __init__ sets each of its 45 fields through object.__setattr__ (7 us
    per point, two points per replica per refresh), a plain one in under 1 us."""

    ts: float
    kv: float | None
    kv_peak: float | None  # highest KV usage over the last `room_points` scrapes (this one included)
    waiting: float | None
    wcap: float | None  # waiting for capacity (newest V1 only)
    wdef: float | None  # waiting deferred (LoRA budget, KV transfer...)
    running: float | None
    swapped: float | None  # V0 swap-mode preemption
    # raw counters, kept so the next point can take deltas
    c_preempt: float | None
    c_progress: tuple[float | None, ...]
    c_steps: float | None  # iteration_tokens histogram count: one per engine step
    c_cpu: float | None
    # derived from this and earlier points only
    dt: float | None
    d_preempt: float | None  # preemptions in the last interval
    preempt_rate: float | None  # per second over the last interval
    preempts_recent: float | None  # preemptions over the last `recent_points` intervals
    progress: float | None  # tokens + steps in the last interval; None = no counter exposed
    stall_run: int  # consecutive intervals with requests in flight and no progress
    deferred_run: int  # consecutive scrapes with waiting dominated by reason="deferred"
    queue_run: int  # consecutive scrapes with requests waiting (for capacity, where exposed)
    d_cpu: float | None  # API-server CPU seconds used in the last interval
    cpu_cores: float | None  # API-server CPU (cores) over the last interval
    running_lo: float | None  # min/max of `running` over the last `pinned_points` scrapes
    running_hi: float | None
    running_n: int
    running_peak: float | None  # max of `running` over the last `room_points` scrapes
    gpu: GpuSample | None
    m: ReplicaMetrics  # the history's derived numbers (windows) for evidence and context
    engine: str = "vllm"  # whose signals these are (engines registry name), named in the evidence
    # data-parallel ranks (engines of one pod, more than one): the focal rank the rules judge (the
    # fullest), its rank count and the other ranks' KV range; per-rank running for "pinned"
    rank: str | None = None
    ranks: int = 1
    others_kv: tuple[float, float] | None = None
    rank_running: tuple[tuple[str, float], ...] = ()
    lora: tuple[Any, ...] | None = None  # (max_lora, running adapters, waiting adapters) from lora_requests_info
    idle_queue_run: int = 0  # consecutive scrapes with a queue and nothing running
    util_mean: float | None = None  # GPU utilisation, median of the last `_UTIL_POINTS` scrapes
    c_util: float | None = None  # this scrape's utilisation (for the next point's mean)
    retract_gauge: bool = False  # preemptions read from SGLang's num_retracted_reqs gauge
    last_preempt_ts: float | None = None  # the newest scrape whose interval saw a preemption
    rate_s: float = RATE_WINDOW_S  # the window of `m`'s rates (signal_windows): the evidence says it

    @property
    def in_flight(self) -> float | None:
        if self.running is None and self.waiting is None:
            return None
        return (self.running or 0.0) + (self.waiting or 0.0)

    @property
    def waiting_total(self) -> float | None:
        if self.waiting is not None:
            return self.waiting
        if self.wcap is None and self.wdef is None:
            return None
        return (self.wcap or 0.0) + (self.wdef or 0.0)


def _delta(now: float | None, prev: float | None) -> float | None:
    if now is None or prev is None:
        return None
    if now >= prev:  # counter_step's first case, without its call
        return now - prev
    return counter_step(prev, now)[0]  # a restart: everything since it; a small step back: nothing


def _last(tail: list[Point], n: int) -> list[Point]:
    return tail[max(0, len(tail) - n):] if n > 0 else []


def make_point(scrape: Scrape, m: ReplicaMetrics, tail: list[Point], t: Thresholds,
               rate_s: float = RATE_WINDOW_S) -> Point:
    """Signals of one successful scrape given the points before it (oldest first)."""
    s = scrape.sample
    assert s is not None
    prev = tail[-1] if tail else None
    # a page of one engine (most): its own values, as Sample.value reads them, without a call each
    v = next(iter(s.engines.values())).values.get if len(s.engines) == 1 else s.value
    steps_h = s.hist("iteration_tokens")
    c_progress = tuple(map(v, _PROGRESS))
    c_steps = steps_h.count if steps_h is not None else None
    c_preempt = v("preemptions")
    running, waiting = v("running"), v("waiting")
    wcap, wdef = v("waiting_capacity"), v("waiting_deferred")
    kv = v("kv_usage")
    rank, others_kv, ranks = None, None, {}
    rank_running: tuple[tuple[str, float], ...] = ()
    if len(s.engines) > 1:
        # a data-parallel pod: each rank admits and evicts on its own, so the pod is judged by
        # its fullest rank (its KV, its own queue, its own running), not by sums over the ranks
        ranks = {k: e.values for k, e in s.engines.items() if e.values.get("kv_usage") is not None}
        if len(ranks) > 1:
            rank = max(ranks, key=lambda k: (ranks[k]["kv_usage"], ranks[k].get("waiting", 0.0)))
            fv = ranks[rank]
            kv = fv["kv_usage"]
            running, waiting = fv.get("running", running), fv.get("waiting", waiting)
            wcap, wdef = fv.get("waiting_capacity", wcap), fv.get("waiting_deferred", wdef)
            rest = [vals["kv_usage"] for k, vals in ranks.items() if k != rank]
            others_kv = (min(rest), max(rest))
            rank_running = tuple((k, vals["running"]) for k, vals in ranks.items() if "running" in vals)
    retract_gauge = False
    if c_preempt is None and v("retracted") is not None:
        retract_gauge = True  # SGLang without the counter: the gauge of the last retraction

    dt = d_pre = rate = recent = progress = None
    stall_run = 0
    if prev is not None and prev.engine != s.engine:
        prev, tail = None, []  # another engine's counters: no delta across the change
    if prev is not None and scrape.ts > prev.ts:
        dt = scrape.ts - prev.ts
        d_pre = v("retracted") if retract_gauge else _delta(c_preempt, prev.c_preempt)
        if c_preempt is not None and prev.c_preempt is not None:
            c_preempt = counter_step(prev.c_preempt, c_preempt)[1]  # a step back keeps the higher base
        rate = d_pre / dt if d_pre is not None else None
        if d_pre is not None:
            recent = d_pre
            # SGLang retracts, then tightens admission: retractions come every 10-20 s under
            # pressure, so its window is at least `retract_window_s`, whatever the interval
            span = t.retract_window_s if s.engine == "sglang" else 0.0
            older = _last(tail, t.recent_points - 1)
            if span:
                older = [p for p in tail if scrape.ts - p.ts < span] or older
            for p in older:
                recent += p.d_preempt or 0.0
        parts = [_delta(a, b) for a, b in zip(c_progress, prev.c_progress, strict=False)]
        parts.append(_delta(c_steps, prev.c_steps))
        known = [x for x in parts if x is not None]
        progress = sum(known) if known else None
        busy = (running or 0.0) + (waiting or 0.0) >= 1.0
        if progress is not None and progress <= 0 and busy:
            stall_run = prev.stall_run + 1

    wt = waiting if waiting is not None else (
        None if wcap is None and wdef is None else (wcap or 0.0) + (wdef or 0.0))
    dominated = (
        wdef is not None and wt is not None and wdef >= t.waiting_min and wdef >= t.deferred_share * wt
    )
    deferred_run = (prev.deferred_run + 1 if prev is not None else 1) if dominated else 0
    held = wcap if wcap is not None else wt
    idle_queue = running is not None and running == 0 and wt is not None and wt >= t.waiting_min
    idle_queue_run = (prev.idle_queue_run + 1 if prev is not None else 1) if idle_queue else 0
    queue_run = (prev.queue_run + 1 if prev is not None else 1) if held is not None and held >= t.waiting_min else 0

    c_cpu = s.process_cpu_seconds
    d_cpu = _delta(c_cpu, prev.c_cpu) if dt is not None and prev is not None else None
    cpu = d_cpu / dt if d_cpu is not None and dt else None

    # a cap holds `running` flat for as long as its queue lasts: over the queue's run (at least
    # `pinned_points`, at most `room_points` scrapes), so a chance flat pair in a long queue is no cap
    n_pin = max(t.pinned_points, min(queue_run, t.room_points))
    if rank is not None:  # the same rank's running in the points before (a rank's own cap)
        runs = [dict(p.rank_running).get(rank) for p in _last(tail, n_pin - 1)]
    else:
        runs = [p.running for p in _last(tail, n_pin - 1)]
    runs.append(running)
    known_runs = [r for r in runs if r is not None]
    # a cap holds `running` at most at the cap, always: the peak over the longer window too
    room = _last(tail, t.room_points - 1)
    if rank is not None:
        maybe = [dict(p.rank_running).get(rank) for p in room]
    else:
        maybe = [p.running for p in room]
    longer = [r for r in maybe if r is not None] + known_runs[-1:]
    kvs = [p.kv for p in room if p.kv is not None]
    util = scrape.gpu.compute_pct if scrape.gpu is not None else None
    utils = [p.c_util for p in _last(tail, _UTIL_POINTS - 1) if p.c_util is not None]
    if util is not None:
        utils.append(util)
    lora = s.lora
    return Point(
        ts=scrape.ts,
        kv=kv,
        kv_peak=max([*kvs, kv]) if kv is not None else None,
        waiting=waiting,
        wcap=wcap,
        wdef=wdef,
        running=running,
        swapped=v("swapped"),
        c_preempt=c_preempt,
        c_progress=c_progress,
        c_steps=c_steps,
        c_cpu=c_cpu,
        dt=dt,
        d_preempt=d_pre,
        preempt_rate=rate,
        preempts_recent=recent,
        progress=progress,
        stall_run=stall_run,
        deferred_run=deferred_run,
        queue_run=queue_run,
        d_cpu=d_cpu,
        cpu_cores=cpu,
        running_lo=min(known_runs) if known_runs else None,
        running_hi=max(known_runs) if known_runs else None,
        running_peak=max(longer) if longer else None,
        running_n=len(known_runs),
        gpu=scrape.gpu,
        m=m,
        engine=s.engine,
        rank=rank,
        ranks=len(ranks) if rank is not None else 1,
        others_kv=others_kv,
        rank_running=rank_running,
        lora=lora,
        idle_queue_run=idle_queue_run,
        util_mean=sorted(utils)[len(utils) // 2] if utils and util is not None else None,
        c_util=util,
        retract_gauge=retract_gauge,
        last_preempt_ts=scrape.ts if d_pre is not None and d_pre > 0 else (prev.last_preempt_ts if prev else None),
        rate_s=rate_s,
    )

"""Per-scrape signals the rules compare: gauges as scraped, counters turned into short rates.

The history's own rates use a 30 s window, which reacts late to an onset and lingers after a
recovery. The rules need "in the last scrape interval" instead, so each successful scrape gets a
`Point` built from the scrape and the few points before it (never after it: no look-ahead).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import GpuSample, ReplicaMetrics, Scrape, counter_step
from .thresholds import Thresholds

# Counters whose increase means the engine made progress (any one moving is enough).
_PROGRESS = ("generation_tokens", "prompt_tokens")


@dataclass(frozen=True, slots=True)
class Point:
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
    gpu: GpuSample | None
    m: ReplicaMetrics  # the history's derived numbers (windows) for evidence and context
    engine: str = "vllm"  # whose signals these are (engines registry name), named in the evidence

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
    return counter_step(prev, now)[0]  # a restart: everything since it; a small step back: nothing


def _last(tail: list[Point], n: int) -> list[Point]:
    return tail[max(0, len(tail) - n):] if n > 0 else []


def make_point(scrape: Scrape, m: ReplicaMetrics, tail: list[Point], t: Thresholds) -> Point:
    """Signals of one successful scrape given the points before it (oldest first)."""
    s = scrape.sample
    assert s is not None
    prev = tail[-1] if tail else None
    v = s.value
    steps_h = s.hist("iteration_tokens")
    c_progress = tuple(v(n) for n in _PROGRESS)
    c_steps = steps_h.count if steps_h is not None else None
    c_preempt = v("preemptions")
    running, waiting = v("running"), v("waiting")
    wcap, wdef = v("waiting_capacity"), v("waiting_deferred")

    dt = d_pre = rate = recent = progress = None
    stall_run = 0
    if prev is not None and prev.engine != s.engine:
        prev, tail = None, []  # another engine's counters: no delta across the change
    if prev is not None and scrape.ts > prev.ts:
        dt = scrape.ts - prev.ts
        d_pre = _delta(c_preempt, prev.c_preempt)
        if c_preempt is not None and prev.c_preempt is not None:
            c_preempt = counter_step(prev.c_preempt, c_preempt)[1]  # a step back keeps the higher base
        rate = d_pre / dt if d_pre is not None else None
        if d_pre is not None:
            recent = d_pre
            for p in _last(tail, t.recent_points - 1):
                recent += p.d_preempt or 0.0
        parts = [_delta(a, b) for a, b in zip(c_progress, prev.c_progress, strict=True)]
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
    queue_run = (prev.queue_run + 1 if prev is not None else 1) if held is not None and held >= t.waiting_min else 0

    c_cpu = s.process_cpu_seconds
    d_cpu = _delta(c_cpu, prev.c_cpu) if dt is not None and prev is not None else None
    cpu = d_cpu / dt if d_cpu is not None and dt else None

    runs = [p.running for p in _last(tail, t.pinned_points - 1)]
    runs.append(running)
    known_runs = [r for r in runs if r is not None]
    kvs = [p.kv for p in _last(tail, t.room_points - 1) if p.kv is not None]
    kv = v("kv_usage")
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
        running_n=len(known_runs),
        gpu=scrape.gpu,
        m=m,
        engine=s.engine,
    )

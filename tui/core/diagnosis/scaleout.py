"""How many replicas a workload needs when its queue persists: measured arrivals over measured
per-replica completions.

Over the last `window_s` seconds of each replica of the workload:
  served/s       = rate of vllm:request_success_total, less finished_reason="abort" (clients
                   that gave up waiting: demand that was never served)
  arrivals/s     = finished/s (aborted included) + growth of (waiting + running) per second
The fleet's arrival rate is the sum; what one replica serves at its limit is the mean served
rate of the replicas that are at it (overloaded, capped, KV-pressured, compute-bound;
all of them when none is). The replica count carries `capacity_headroom` spare and drains the
current backlog within `drain_s`:
  replicas = ceil((arrivals x (1 + headroom) + backlog / drain_s) / per-replica completions)
Every step of the arithmetic is returned as text, so the runbook shows it and the scale prompt
is pre-filled with the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..history import ReplicaHistory, counter_delta
from .. import verdicts as V
from .thresholds import Thresholds

# the verdicts of a replica working at its limit: its completion rate is what one replica can do
AT_LIMIT = frozenset({V.OVERLOADED, V.CONCURRENCY_CAPPED, V.KV_PRESSURE, V.COMPUTE_BOUND})


@dataclass(frozen=True, slots=True)
class ScaleOut:
    replicas_now: int
    arrivals_per_s: float  # the workload's, summed over its replicas
    per_replica_per_s: float  # what one replica at its limit completes
    backlog: float  # requests waiting now, summed
    replicas: int  # the count to scale to
    lines: tuple[str, ...]  # the arithmetic, step by step

    @property
    def suggest(self) -> dict[str, str]:
        return {"replicas": str(self.replicas)}


@dataclass(frozen=True, slots=True)
class _Rates:
    completions: float  # served: finished, less the ones clients abandoned in the queue
    arrivals: float
    waiting: float
    abandoned: float


_VALUES = ("requests_success", "requests_aborted", "running", "waiting")


def _rates(h: ReplicaHistory, now: float, window_s: float) -> _Rates | None:
    win = h.scrapes.values_since(now - window_s, now, _VALUES)  # (ts, (success, aborted, running, waiting))
    if len(win) < 2 or win[-1][0] - win[0][0] <= 0:
        return None
    dt = win[-1][0] - win[0][0]
    done = counter_delta(vals[0] for _, vals in win)
    if done is None:
        return None

    def load(vals: tuple[float | None, ...]) -> float | None:
        r, w = vals[2], vals[3]
        return None if r is None and w is None else (r or 0.0) + (w or 0.0)

    first, last = load(win[0][1]), load(win[-1][1])
    growth = (last - first) / dt if first is not None and last is not None else 0.0
    # finished_reason="abort" (clients that gave up waiting) is demand, not served capacity
    gave_up = counter_delta(vals[1] for _, vals in win) or 0.0
    return _Rates((done - gave_up) / dt, max(0.0, done / dt + growth), win[-1][1][3] or 0.0,
                  gave_up / dt)


def scale_out(replicas: Sequence[tuple[ReplicaHistory, str]], now: float, t: Thresholds | None = None,
              *, window_s: float = 120.0, drain_s: float = 600.0) -> ScaleOut | None:
    """The replica count for one workload from its replicas' histories and verdicts (a replica
    starting or down counts as one more replica but adds no rates); None without rates."""
    t = t or Thresholds()
    measured = [(r, v) for h, v in replicas if (r := _rates(h, now, window_s)) is not None]
    if not measured:
        return None
    n_now = len(replicas)
    arrivals = sum(r.arrivals for r, _ in measured)
    backlog = sum(r.waiting for r, _ in measured)
    limited = [r.completions for r, v in measured if v in AT_LIMIT] or [r.completions for r, _ in measured]
    per = sum(limited) / len(limited)
    if per <= 0:
        return None
    need = arrivals * (1 + t.capacity_headroom) + backlog / drain_s
    n = max(n_now if backlog >= t.waiting_min else 1, math.ceil(need / per - 1e-9))
    gave_up = sum(r.abandoned for r, _ in measured)
    lines = (
        f"arrivals {arrivals:.2f} req/s = finished + queue growth over the last {window_s:.0f} s "
        f"(summed over {len(measured)} replica(s)"
        + (f"; {gave_up:.2f} req/s of them gave up waiting)" if gave_up else ")"),
        f"one replica at its limit serves {per:.2f} req/s (mean of {len(limited)}, abandoned ones not counted)",
        f"steady state: {arrivals:.2f} x {1 + t.capacity_headroom:.2f} headroom / {per:.2f} = "
        f"{arrivals * (1 + t.capacity_headroom) / per:.2f} -> {math.ceil(arrivals * (1 + t.capacity_headroom) / per - 1e-9)}"
        " replicas",
        f"backlog {backlog:.0f} waiting, drained within {drain_s:.0f} s: +{backlog / drain_s:.2f} req/s",
        f"({arrivals:.2f} x {1 + t.capacity_headroom:.2f} + {backlog / drain_s:.2f}) / {per:.2f} = "
        f"{need / per:.2f} -> {n} replicas (now {n_now})",
    )
    return ScaleOut(n_now, arrivals, per, backlog, n, lines)

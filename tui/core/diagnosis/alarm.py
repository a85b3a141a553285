"""The fleet-level alarm for queue and latency: a replica whose queue or TTFT p95 is far above
its own pre-incident baseline is named in the banner, whatever its verdict (KV can be fine while
the queue grows to thousands).

A replica's baseline is learnt while it is calm (judged, not in alarm, no queue that persists):
its mean waiting and median TTFT p95 over the last `alarm_baseline_points` calm scrapes; it is
frozen while the replica is in trouble, so an incident never becomes its own baseline. A replica
born into an incident (a rollout's new pod) takes its workload's last learnt baseline until it
has calm scrapes of its own.
Hysteresis: the alarm is raised after `alarm_points` scrapes over the entry marks (queue >=
max(alarm_queue_min, alarm_ratio x baseline), TTFT p95 >= max(alarm_latency_min_s, alarm_ratio
x baseline)) and cleared after as many scrapes under the much lower leave marks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..history import ReplicaHistory
from ..model import AtLeast, FleetState, seconds_text
from .. import verdicts as V
from .thresholds import Thresholds

_CALM = frozenset({V.HEALTHY, V.COMPUTE_BOUND, V.HOST_BOUND})


@dataclass(frozen=True, slots=True)
class Alarm:
    replica: str
    kinds: tuple[str, ...]  # "queue", "latency"
    text: str
    since: float

    def as_dict(self) -> dict[str, Any]:
        return {"replica": self.replica, "kinds": list(self.kinds), "text": self.text, "since": self.since}


@dataclass(slots=True)
class _Replica:
    waits: deque[Any] = field(default_factory=deque)  # calm scrapes' waiting
    ttfts: deque[Any] = field(default_factory=deque)  # calm scrapes' TTFT p95
    base_wait: float | None = None
    base_ttft: float | None = None
    on_since: float | None = None
    over: int = 0  # consecutive scrapes over the entry marks (while off)
    under: int = 0  # consecutive scrapes under the leave marks (while on)
    last_ts: float | None = None


def _median(xs: Sequence[float]) -> float | None:
    s = sorted(xs)
    return s[len(s) // 2] if s else None


class FleetAlarms:
    def __init__(self, t: Thresholds | None = None) -> None:
        self.t = t or Thresholds()
        self._r: dict[str, _Replica] = {}
        # the last baseline learnt per workload, for its replicas that have none of their own yet
        self._group: dict[str, tuple[float | None, float | None]] = {}

    def update(self, state: FleetState, histories: Mapping[str, ReplicaHistory]) -> tuple[Alarm, ...]:
        """The alarms as of `state` (advanced once per new scrape of each replica)."""
        t = self.t
        for name in list(self._r):
            if name not in histories:
                del self._r[name]
        out = []
        for v in state.replicas:
            h = histories.get(v.name)
            if h is None or h.last_ok is None:
                continue
            r = self._r.setdefault(v.name, _Replica(deque(maxlen=t.alarm_baseline_points),
                                                    deque(maxlen=t.alarm_baseline_points)))
            ts = h.last_ok.ts
            m = v.metrics
            wait, ttft = m.waiting, m.ttft_p95_s
            if ts != r.last_ts:
                r.last_ts = ts
                self._advance(r, v.verdict, wait, ttft)
                if r.waits.maxlen and len(r.waits) >= t.alarm_baseline_points and v.group:
                    self._group[v.group] = (r.base_wait, r.base_ttft)
                elif r.base_wait is None and r.base_ttft is None and v.group in self._group:
                    # born into the incident (a rollout's new pod): the workload's baseline
                    r.base_wait, r.base_ttft = self._group[v.group]
            if r.on_since is not None:
                out.append(self._alarm(v.name, r, wait, ttft))
        return tuple(out)

    def _marks(self, r: _Replica) -> tuple[float, float | None, float, float | None]:
        t = self.t
        bw = r.base_wait or 0.0
        q_in = max(t.alarm_queue_min, t.alarm_ratio * bw)
        q_out = max(t.alarm_queue_clear, 2 * bw)
        l_in = max(t.alarm_latency_min_s, t.alarm_ratio * r.base_ttft) if r.base_ttft else None
        l_out = max(t.alarm_latency_min_s / 2, t.latency_recovered_ratio * r.base_ttft) if r.base_ttft else None
        return q_in, l_in, q_out, l_out

    def _advance(self, r: _Replica, verdict: str, wait: float | None, ttft: float | None) -> None:
        t = self.t
        if r.on_since is None and verdict in _CALM and (wait or 0.0) < t.waiting_min:
            if wait is not None:
                r.waits.append(wait)
            if ttft is not None and not isinstance(ttft, AtLeast):
                r.ttfts.append(ttft)
            if len(r.waits) >= t.alarm_baseline_points:
                r.base_wait = sum(r.waits) / len(r.waits)
            if len(r.ttfts) >= t.alarm_baseline_points:
                r.base_ttft = _median(r.ttfts)
        q_in, l_in, q_out, l_out = self._marks(r)
        if r.base_wait is None and r.base_ttft is None:
            return  # nothing to compare with yet
        if r.on_since is None:
            over = (wait is not None and wait >= q_in) or (ttft is not None and l_in is not None and ttft >= l_in)
            r.over = r.over + 1 if over else 0
            if r.over >= t.alarm_points:
                r.on_since, r.under = r.last_ts, 0
        else:
            under = (wait is None or wait < q_out) and (ttft is None or l_out is None or ttft < l_out)
            r.under = r.under + 1 if under else 0
            if r.under >= t.alarm_points:
                r.on_since, r.over = None, 0

    def _alarm(self, name: str, r: _Replica, wait: float | None, ttft: float | None) -> Alarm:
        q_in, l_in, _, _ = self._marks(r)
        kinds, parts = [], []
        if wait is not None and wait >= q_in:
            kinds.append("queue")
            parts.append(f"queue {wait:.0f} (baseline {r.base_wait or 0:.0f})")
        if ttft is not None and l_in is not None and ttft >= l_in:
            kinds.append("latency")
            base = seconds_text(r.base_ttft) if r.base_ttft is not None else "none"
            parts.append(f"TTFT p95 {seconds_text(ttft)} (baseline {base})")
        if not parts:  # held by hysteresis: say where it stands
            parts.append(f"queue {wait or 0:.0f}, TTFT p95 {seconds_text(ttft) if ttft is not None else 'n/a'}: "
                         "clearing")
        return Alarm(name, tuple(kinds), f"{name}: " + ", ".join(parts), r.on_since or 0.0)

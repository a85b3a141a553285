"""Fleet imbalance: one replica of a model pressured or queued while replicas of the same model
sit idle. That is a routing problem (prefix or session affinity, a hot LoRA adapter, a skewed
endpoint picker), and the per-replica remedies are wrong for it: scaling out adds more idle
replicas beside the hot one, cutting max-num-seqs starves the one that has the traffic.

A model group is its workload group where known, else its model name. The finding is raised
after `alarm_points` refreshes with at least one hot replica (a queue or pressure verdict) and
at least one idle one (healthy, no queue, KV below `kv_idle`) in the group, and cleared after as
many without; a group whose replicas are all busy or all idle never raises it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .. import verdicts as V
from ..model import FleetState, ReplicaView
from .thresholds import Thresholds

# verdicts of a replica that has more work than it admits
HOT = frozenset({V.KV_PRESSURE, V.OVERLOADED, V.CONCURRENCY_CAPPED, V.LORA_CAPPED})
REMEDY = ("rebalance: check the router / InferencePool endpoint picker and the prefix or session affinity "
          "(or the hot adapter) that sends the traffic to the hot replica; drain its affinity. Not a scale-out, "
          "not a smaller max-num-seqs")


def _range(xs: list[float]) -> tuple[float, float] | None:
    xs = [x for x in xs if math.isfinite(x)]  # --json writes these: never a NaN or an infinity
    return (min(xs), max(xs)) if xs else None


@dataclass(frozen=True, slots=True)
class Imbalance:
    group: str
    hot: tuple[str, ...]
    idle: tuple[str, ...]
    replicas: int  # judged replicas in the group
    spread: dict[str, Any]  # kv / queue / running: {"hot": (lo, hi), "idle": (lo, hi)}
    since: float
    text: str
    remedy: str = REMEDY

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "hot": list(self.hot), "idle": list(self.idle), "replicas": self.replicas,
                "spread": self.spread, "since": self.since, "text": self.text, "remedy": self.remedy}


def _fmt_range(r: tuple[float, float] | None, digits: int = 0) -> str:
    if r is None:
        return "n/a"
    lo, hi = (f"{x:.{digits}f}" for x in r)
    return lo if lo == hi else f"{lo}-{hi}"


def _group_case(views: list[ReplicaView], t: Thresholds) -> tuple[list[Any], list[Any]] | None:
    hot, idle = [], []
    for v in views:
        m = v.metrics
        if v.verdict in HOT:
            hot.append(v)
        elif (v.verdict == V.HEALTHY and (m.waiting or 0.0) < t.waiting_min and m.kv_usage is not None
              and m.kv_usage < t.kv_idle):
            idle.append(v)
    return (hot, idle) if hot and idle else None


def _finding(group: str, hot: list[Any], idle: list[Any], n: int, since: float) -> Imbalance:
    def spread(vs: list[Any], attr: str) -> tuple[float, float] | None:
        return _range([getattr(v.metrics, attr) for v in vs if getattr(v.metrics, attr) is not None])

    sp: dict[str, dict[str, tuple[float, float] | None]] = {}
    for key, attr in (("kv", "kv_usage"), ("queue", "waiting"), ("running", "running")):
        sp[key] = {"hot": spread(hot, attr), "idle": spread(idle, attr)}
    names_hot = ", ".join(v.name for v in hot[:3]) + (f" +{len(hot) - 3}" if len(hot) > 3 else "")
    text = (f"{group}: {names_hot} {'is' if len(hot) == 1 else 'are'} {hot[0].verdict} while {len(idle)} of {n} "
            f"replicas idle (KV {_fmt_range(sp['kv']['hot'], 2)} vs {_fmt_range(sp['kv']['idle'], 2)}, "
            f"queue {_fmt_range(sp['queue']['hot'])} vs {_fmt_range(sp['queue']['idle'])}, "
            f"running {_fmt_range(sp['running']['hot'])} vs {_fmt_range(sp['running']['idle'])})")
    return Imbalance(group, tuple(v.name for v in hot), tuple(v.name for v in idle), n, sp, since, text)


class FleetImbalance:
    """Advanced once per refresh; `update` returns the groups in imbalance now."""

    def __init__(self, t: Thresholds | None = None) -> None:
        self.t = t or Thresholds()
        self._on: dict[str, float] = {}  # group -> since
        self._over: dict[str, tuple[int, float]] = {}  # group -> (refreshes in a row, first ts)
        self._under: dict[str, int] = {}
        self._last_ts: float | None = None
        self._last: tuple[Imbalance, ...] = ()

    def update(self, state: FleetState) -> tuple[Imbalance, ...]:
        # advanced once per new scrape (a redraw without one changes nothing)
        tick = max((v.last_ok_ts for v in state.replicas if v.last_ok_ts is not None), default=None)
        if tick is None or (self._last_ts is not None and tick <= self._last_ts):
            return self._last
        self._last_ts = tick
        t = self.t
        groups: dict[str, list[ReplicaView]] = {}
        for v in state.replicas:
            key = v.group or v.model_name
            if key and v.state == "ok" and v.verdict not in (V.UNKNOWN, V.DOWN, V.STARTING):
                groups.setdefault(key, []).append(v)
        out = []
        for g in sorted(set(groups) | set(self._on) | set(self._over)):
            views = groups.get(g, [])
            case = _group_case(views, t) if len(views) >= 2 else None
            if case is not None:
                self._under.pop(g, None)
                n, first = self._over.get(g, (0, tick))
                self._over[g] = (n + 1, first)
                if g not in self._on and n + 1 >= t.alarm_points:
                    self._on[g] = first
            else:
                self._over.pop(g, None)
                if g in self._on:
                    self._under[g] = self._under.get(g, 0) + 1
                    if self._under[g] >= t.alarm_points:
                        del self._on[g]
                        self._under.pop(g, None)
            if g in self._on and case is not None:
                out.append(_finding(g, *case, len(views), self._on[g]))
            elif g in self._on:  # held while it clears: the last finding, said to be clearing
                prev = next((i for i in self._last if i.group == g), None)
                if prev is not None:
                    out.append(prev)
        self._last = tuple(out)
        return self._last

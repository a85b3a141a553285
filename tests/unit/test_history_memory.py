"""What an hour of one replica's history costs per retained point (derived points, old scrapes)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from tui.core.history import ReplicaHistory
from tui.core.model import EngineSample, Histogram, Sample, Scrape

HOUR = 3600


def _deep_size(roots: list[object]) -> int:
    """Bytes reachable from `roots`, each object counted once (shared ones once in all)."""
    seen, todo, total = set(), list(roots), 0
    while todo:
        o = todo.pop()
        if id(o) in seen or o is None or isinstance(o, (str, bool, type)):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, Mapping):
            todo.extend(o.values())
        elif isinstance(o, (tuple, list)) or type(o).__name__ == "deque":
            todo.extend(o)
        else:
            for cls in type(o).__mro__:
                todo.extend(getattr(o, n) for n in getattr(cls, "__slots__", ()) if hasattr(o, n))
    return total


def _hour() -> ReplicaHistory:
    h = ReplicaHistory("r", maxlen=HOUR)
    hist = Histogram((0.1, 1.0, float("inf")), (1.0, 2.0, 3.0), 0.5, 3.0)
    extra = {"process_start_time_seconds": 1.7e9, "process_resident_memory_bytes": 3.1e9}
    for i in range(HOUR):
        vals = {"kv_usage": 0.5 + i % 7 / 100, "running": float(i % 13), "waiting": 1.0, "preemptions": i / 10,
                "generation_tokens": 100.0 * i, "requests_success": 2.0 * i}
        h.add(Scrape(float(i), "r", Sample(engines={"0": EngineSample(vals, {"ttft": hist})}, generation="v1",
                                          extra=dict(extra))))
    return h


def test_an_hour_keeps_630_points_at_under_500_bytes_each():
    """Issue 14: an hour at 1 s keeps 300 + 330 points (pointlog.py); points and the scrapes
    packed beside them, histograms included, cost under 500 bytes per retained point."""
    h = _hour()
    assert len(h.points) == len(h.scrapes) == 630
    assert _deep_size([h.points]) / len(h.points) < 500


def test_old_scrapes_are_rebuilt_not_kept():
    h = _hour()
    old = list(h.scrapes)[:-200]  # well past the windows
    assert all(a is not b for a, b in zip(old, list(h.scrapes)[:-200]))  # rebuilt on each read
    assert _deep_size([h]) / len(h.points) < 600  # the whole history per retained point

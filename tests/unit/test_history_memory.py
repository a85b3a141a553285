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


def test_old_scrapes_are_rebuilt_not_kept():
    h = _hour()
    old = list(h.scrapes)[:-200]  # well past the windows
    assert all(a is not b for a, b in zip(old, list(h.scrapes)[:-200], strict=False))  # rebuilt on each read
    assert _deep_size([h]) < 200_000  # the whole history: no old scrape kept whole


def _real_sample() -> Sample:
    from tui.core.metrics.extract import parse_vllm, to_sample

    with open("/work/shared/reference/samples/vllm-0.6.x-v0-vllmComposer-test-fixture-codeindex-48058675646.prom") as f:
        return to_sample(parse_vllm(f.read()))


def test_window_histograms_pack_their_bucket_counts_in_four_bytes_and_read_back_exactly():
    """A real page's window histograms are ~140 bucket counts per scrape, kept for every scrape
    of the windows: whole counts are packed as 32-bit unsigned integers, the rest as doubles."""
    from tui.core.pointlog import WINDOW_HISTS, pack_hists, unpack_hist

    s = _real_sample()
    packed = pack_hists(s)
    buckets = sum(len(s.hist(n).bounds) for n in WINDOW_HISTS if s.hist(n) is not None)
    assert buckets > 40
    size = sys.getsizeof(packed)
    assert size < 4.5 * buckets + 8 * 2 * len(WINDOW_HISTS) + 200, (size, buckets)
    for n in WINDOW_HISTS:
        assert unpack_hist(packed, n) == s.hist(n)
    # counts that are not whole 32-bit numbers keep doubles, exactly
    odd = Histogram((1.0, float("inf")), (0.5, 5e9), 1.25, 5e9)
    odd_packed = pack_hists(Sample(engines={"0": EngineSample({}, {"ttft": odd})}))
    assert unpack_hist(odd_packed, "ttft") == odd


def test_a_scrapes_window_histograms_are_one_object_that_copies_and_pickles_whole():
    """~120 of them per replica at an hour (the windows' scrapes and the look-back baselines):
    a tuple of the layout and two arrays cost ~130 bytes more than the numbers' own bytes."""
    import copy
    import pickle

    from tui.core.pointlog import WINDOW_HISTS, pack_hists, unpack_hist

    s = _real_sample()
    packed = pack_hists(s)
    hists = [n for n in WINDOW_HISTS if s.hist(n) is not None]
    buckets = sum(len(s.hist(n).bounds) for n in hists)
    own = _deep_size([packed]) - _deep_size([packed.layout])
    assert own < 4 * buckets + 16 * len(hists) + 100, (own, buckets, len(hists))
    for twin in (copy.copy(packed), copy.deepcopy(packed), pickle.loads(pickle.dumps(packed))):
        assert twin.layout is packed.layout
        assert [unpack_hist(twin, n) for n in hists] == [s.hist(n) for n in hists]


def test_an_hour_of_points_and_scrapes_costs_under_135_kb():
    """Issue 14 (256 replicas x one hour under 150 MB, the whole process): an hour at 1 s keeps
    its newest three minutes at the interval and one point in COARSE_EVERY before, that tier
    to float32 precision; histograms one array per scrape, the windows' rows in one array
    (142 / 191 KB before those, 125 / 150 KB after)."""
    from tui.core.pointlog import COARSE_EVERY, FINE_POINTS

    h = _hour()
    assert len(h.points) == len(h.scrapes) == FINE_POINTS + (HOUR - FINE_POINTS) // COARSE_EVERY
    assert _deep_size([h.points]) < 135_000, _deep_size([h.points])
    assert _deep_size([h]) < 165_000, _deep_size([h])


def test_the_diagnosis_holds_no_derived_metrics_beyond_the_historys_own_newest_points():
    """The verdict state machine keeps its last few points for the short-window signals; only
    the newest one's metrics are read (evidence), so older ones do not keep theirs alive past
    the history's own newest points (~1 KB each, 4 per replica)."""
    from tui.core.diagnosis.rules import diagnose
    from tui.core.model import ReplicaMetrics

    h = ReplicaHistory("r", maxlen=HOUR)
    for i in range(40):
        vals = {"kv_usage": 0.5 + i % 7 / 100, "running": float(i % 13), "waiting": 1.0, "preemptions": i / 10}
        h.add(Scrape(float(i), "r", Sample(engines={"0": EngineSample(vals, {})}, generation="v1")))
        diagnose(h, float(i))
    tail = list(h.diagnosis.tail)
    assert len(tail) > 4
    assert tail[-1].m is h.points[-1][1]
    own = {id(m) for _, m in h.points[-4:]}  # the newest points, kept as objects
    extra = [p.m for p in tail if id(p.m) not in own and p.m != ReplicaMetrics()]
    assert not extra, len(extra)


def test_the_windows_scrapes_cost_under_200_bytes_each_beside_their_histograms():
    """What the rates and quantiles are derived from (~61 scrapes at the default windows): each
    scrape's window values and running sums as one row of one array, not an array and a tuple
    of its own (~300 bytes)."""
    h = ReplicaHistory("r", maxlen=HOUR)
    hist = Histogram((0.1, 1.0, float("inf")), (1.0, 2.0, 3.0), 0.5, 3.0)
    for i in range(300):
        vals = {"kv_usage": 0.5, "running": float(i % 13), "preemptions": i / 10, "requests_success": 2.0 * i}
        h.add(Scrape(float(i), "r", Sample(engines={"0": EngineSample(vals, {"ttft": hist})}, generation="v1")))
    rec = h._recent
    n = len(rec)
    assert 61 <= n <= 62, n  # the 60 s quantile window and its baseline
    hists = [p for p in rec.hists if p is not None]  # (counted with the points they belong to)
    assert _deep_size([rec]) - _deep_size(hists) < 200 * n, (_deep_size([rec]) - _deep_size(hists), n)


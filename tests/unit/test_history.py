"""ReplicaHistory: rates across counter resets, windowed quantiles, states, bounded memory."""

from __future__ import annotations

from itertools import pairwise
from tui.core.history import ReplicaHistory, Windows, counter_delta
from tui.core.model import DOWN, OK, STALE, EngineSample, Histogram, Sample, Scrape

BOUNDS = (0.1, 0.5, 1.0, float("inf"))


def sample(preempt: float, ttft_counts: tuple[float, ...], running: float = 10) -> Sample:
    h = Histogram(BOUNDS, ttft_counts, 0.0, ttft_counts[-1])
    return Sample(engines={"0": EngineSample({"preemptions": preempt, "running": running, "kv_usage": 0.5},
                                             {"ttft": h})}, generation="v1")


def test_counter_delta_handles_resets_and_gaps():
    assert counter_delta([10, 15, 20]) == 10
    assert counter_delta([10, 15, 3, 5]) == 5 + 3 + 2  # restart: 3 counted from zero
    assert counter_delta([None, 4, None, 6]) == 2
    assert counter_delta([7]) is None


def test_rate_over_window_survives_a_restart():
    h = ReplicaHistory("r", windows=Windows(rate_s=30))
    for i, v in enumerate([0, 10, 20, 30, 2, 12]):  # server restarted between 30 and 2
        h.add(Scrape(1000.0 + 5 * i, "r", sample(v, (0, 0, 0, 0))))
    # window 30 s covers all six points: increase 10+10+10+2+10 = 42 over 25 s
    assert abs(h.latest.preemptions_per_s - 42 / 25) < 1e-9


def test_quantile_uses_only_observations_inside_the_window():
    h = ReplicaHistory("r", windows=Windows(quantile_s=10))
    # 100 slow requests long ago, then 100 fast ones inside the window
    h.add(Scrape(0.0, "r", sample(0, (0, 0, 0, 0))))
    h.add(Scrape(100.0, "r", sample(0, (0, 0, 100, 100))))  # all in (0.5, 1.0]
    h.add(Scrape(105.0, "r", sample(0, (50, 50, 100, 100))))
    h.add(Scrape(110.0, "r", sample(0, (100, 100, 150, 150))))
    # window [100, 110]: 100 new observations, all <= 0.1
    assert h.latest.ttft_p95_s is not None and h.latest.ttft_p95_s <= 0.1


def test_states_ok_stale_down():
    h = ReplicaHistory("r", windows=Windows(stale_s=15))
    assert h.state(0) == DOWN  # never seen
    h.add(Scrape(0.0, "r", sample(0, (0, 0, 0, 0))))
    assert h.state(0) == OK
    h.add(Scrape(5.0, "r", error="HTTP 500"))
    assert h.state(5) == STALE
    h.add(Scrape(25.0, "r", error="HTTP 500"))
    assert h.state(25) == DOWN
    h.add(Scrape(30.0, "r", sample(0, (0, 0, 0, 0))))
    assert h.state(30) == OK


def test_raw_pages_are_dropped_and_old_histograms_thinned():
    h = ReplicaHistory("r", maxlen=400, windows=Windows(rate_s=30, quantile_s=60, hist_keep_every_s=60))
    for i in range(300):  # 300 scrapes, 1 s apart
        h.add(Scrape(float(i), "r", sample(i, (i, i, i, i)), raw="x" * 1000))
    assert all(s.raw is None for s in h.scrapes)
    with_hists = [s.ts for s in h.scrapes if s.sample.hist("ttft") is not None]
    recent = [t for t in with_hists if t >= 299 - 65]
    old = [t for t in with_hists if t < 299 - 65]
    assert len(recent) >= 60  # the whole quantile window keeps its histograms
    assert 2 <= len(old) <= 5  # older: about one per minute, as baselines
    assert len(h.scrapes) == len(h.points)  # scrapes and derived points stay aligned
    # the latest quantile still sees the full window
    assert h.latest.ttft_p95_s is not None


def test_old_scrapes_read_back_their_values_exactly():
    """Issue 14: scrapes past the newest are packed (pointlog.py): the values the diagnosis
    reads come back exactly (doubles: 1e12 + i included), the config is shared, the window
    histograms are there inside the windows and as baselines, and a rebuilt scrape pickles."""
    import pickle

    h = ReplicaHistory("r", maxlen=400, windows=Windows(rate_s=30, quantile_s=60, hist_keep_every_s=60))
    originals = []
    for i in range(200):
        s = sample(1e12 + i, (i, i, i, i), running=i % 7)
        s = Sample(s.engines, "v1", cache_config={"block_size": "16", "max_num_seqs": "256"}, extra={"x": 1.5},
                   process_cpu_seconds=3.25 * i)
        originals.append(s)
        h.add(Scrape(float(i), "r", s, latency_s=0.001 * i))
    scr = list(h.scrapes)
    assert len(scr) == len(h.points) == 200 and scr[-1] is h.last_ok
    for s in scr[:-1]:
        orig = originals[int(s.ts)]
        for name in ("preemptions", "running", "kv_usage", "waiting", "generation_tokens"):
            assert s.sample.value(name) == orig.value(name), name
        assert s.sample.process_cpu_seconds == orig.process_cpu_seconds and s.latency_s == 0.001 * s.ts
        assert s.sample.generation == "v1" and list(s.sample.engines) == ["0"] and s.replica == "r"
        if s.ts >= 199 - 65:
            assert s.sample.hist("ttft") == orig.hist("ttft")  # inside the windows: every histogram
        assert pickle.loads(pickle.dumps(s)) == s
    old = [s for s in scr if s.ts < 199 - 65]
    assert 2 <= sum(s.sample.hist("ttft") is not None for s in old) <= 4  # baselines, about one a minute
    assert len({id(s.sample.cache_config) for s in scr[:-1]}) == 1  # one config object for the run


def test_an_hour_keeps_three_minutes_at_the_interval_and_one_point_in_thirty_before():
    """Issue 14: a history longer than ten minutes keeps its newest FINE_POINTS at the interval,
    exactly, and one point in COARSE_EVERY before, to float32 precision; points and scrapes
    stay aligned."""
    from tui.core.pointlog import COARSE_EVERY, FINE_POINTS

    n = 3600
    h = ReplicaHistory("r", maxlen=n, windows=Windows(rate_s=30, quantile_s=60))
    ref = []
    for i in range(n + 500):
        h.add(Scrape(float(i), "r", sample(3.0 * i, (i, 2 * i, 3 * i, 3 * i), running=i % 7)))
        ref.append(h.latest)
    pts, scr = list(h.points), list(h.scrapes)
    assert len(pts) == len(scr) == FINE_POINTS + (n - FINE_POINTS) // COARSE_EVERY
    assert [p[0] for p in pts] == [s.ts for s in scr]
    newest = n + 499
    fine = [p for p in pts if p[0] > newest - FINE_POINTS]
    assert [p[0] for p in fine] == [float(t) for t in range(newest - FINE_POINTS + 1, newest + 1)]
    assert all(m == ref[int(ts)] for ts, m in fine)
    coarse = [p for p in pts if p[0] <= newest - FINE_POINTS]
    assert all(ts % COARSE_EVERY == 0 for ts, _ in coarse) and coarse[0][0] >= newest - n
    assert all(_f32_equal(m, ref[int(ts)]) for ts, m in coarse)
    assert any(m != ref[int(ts)] for ts, m in coarse)  # (float32: not every value is a float32)
    for s in scr[:-1]:
        assert s.sample.value("preemptions") == 3.0 * s.ts  # whole counters < 2**24: exact in every tier
    kept = [s.ts for s in scr if s.ts <= newest - FINE_POINTS and s.sample.hist("ttft") is not None]
    assert kept and all(60 <= b - a <= 60 + COARSE_EVERY for a, b in pairwise(kept))  # baselines, ~1 a minute


def test_counters_of_the_thinned_tier_read_back_exactly():
    """Old scrapes' counters are differenced against the newest (rates over look-back windows,
    with reset detection): a float32 of a big counter can round above the later value and read
    as a restart. The thinned tier keeps its counters as doubles."""
    from tui.core.pointlog import FINE_POINTS

    n = 3600
    h = ReplicaHistory("r", maxlen=n, windows=Windows(rate_s=30, quantile_s=60))
    big = 2_000_000_001.0  # an idle replica's token counter: no float32 holds it
    for i in range(n):
        s = sample(3.0 * i, (i, i, i, i))
        vals = dict(s.engines["0"].values, prompt_tokens=big, requests_success=1e12 + i)
        h.add(Scrape(float(i), "r", Sample(engines={"0": EngineSample(vals, s.engines["0"].hists)}, generation="v1")))
    old = [s for s in h.scrapes if s.ts <= n - 1 - FINE_POINTS]
    assert old
    assert all(s.sample.value("prompt_tokens") == big for s in old)
    assert all(s.sample.value("requests_success") == 1e12 + s.ts for s in old)


def _f32_equal(a, b) -> bool:
    """Every field of two ReplicaMetrics equal to float32 precision (None and types alike)."""
    import dataclasses
    import math

    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if (x is None) != (y is None) or type(x) is not type(y):
            return False
        if x is not None and not math.isclose(x, y, rel_tol=2 ** -23, abs_tol=1e-38):
            return False
    return True


def test_the_default_ten_minutes_are_kept_whole():
    h = ReplicaHistory("r", maxlen=600, windows=Windows(rate_s=30, quantile_s=60))
    for i in range(900):
        h.add(Scrape(float(i), "r", sample(3.0 * i, (i, 2 * i, 3 * i, 3 * i))))
    assert [p[0] for p in h.points] == [float(t) for t in range(300, 900)]


def test_running_sums_give_counter_delta_rates_with_gaps_and_resets():
    """Rates come from running reset-adjusted sums at the window's ends; a window with a
    missing value falls back to counter_delta: both give what counter_delta gives."""
    h = ReplicaHistory("r", maxlen=200, windows=Windows(rate_s=10, quantile_s=10))
    seq = []
    for i in range(60):
        v = None if i in (20, 21) else (5.0 * i if i < 35 else 2.0 * (i - 35))  # a gap, then a restart
        seq.append(v)
        vals = {"running": 1.0} if v is None else {"running": 1.0, "preemptions": v}
        h.add(Scrape(float(i), "r", Sample(engines={"0": EngineSample(vals, {})})))
        win = [x for t, x in enumerate(seq) if t >= i - 10]
        d = counter_delta(win)
        want = None if d is None or len(win) < 2 else d / min(10, i)
        assert h.latest.preemptions_per_s == want, (i, h.latest.preemptions_per_s, want)


def test_sparkline_series_match_the_points_they_come_from():
    from tui.core.history import SERIES, SPARK_POINTS

    for maxlen in (10, 400):
        h = ReplicaHistory("r", maxlen=maxlen, windows=Windows(rate_s=5, quantile_s=5))
        for i in range(100):
            h.add(Scrape(float(i), "r", sample(i, (i, i, i, i), running=i % 9)))
            for name in SERIES:
                for n in (1, 7, SPARK_POINTS, SPARK_POINTS + 30):
                    assert h.series(name, n) == tuple(getattr(m, name) for _, m in list(h.points)[-n:])


def test_a_sparkline_value_that_repeats_is_one_object():
    # Past the newest few points the sparkline deques are the only holders of these floats
    # (24 bytes each, 7 series x 60 per replica); a steady value (an idle queue, no
    # preemptions) is kept once for the run instead of once per point.
    h = ReplicaHistory("r", maxlen=600, windows=Windows(rate_s=5, quantile_s=5))
    for i in range(100):
        h.add(Scrape(float(i), "r", sample(0.0, (i, i, i, i), running=float(7 + i % 2))))
    rate, running = h.series("preemptions_per_s", 60), h.series("running", 60)
    assert rate == (0.0,) * 60  # derived anew at each point: a new float each time
    assert len({id(v) for v in rate}) == 1
    assert running == tuple(float(7 + i % 2) for i in range(40, 100))  # values that change are kept as they are


def test_a_counter_step_back_is_not_a_restart():
    from tui.core.history import counter_delta

    assert counter_delta([500.0, 499.0, 500.0, 499.0, 501.0]) == 1.0  # the higher base holds
    assert counter_delta([500.0, 3.0, 5.0]) == 5.0  # a restart: everything since it


def test_batch_p95_reads_running_as_a_gauge_not_a_counter():
    # `running` dropping from 40 to 30 (less than half: a counter would call it a step back and
    # keep 40) is the batch getting smaller: over a window of 30s, its p95 is 30.
    h = ReplicaHistory("r", windows=Windows(quantile_s=60.0))
    h.add(Scrape(ts=0.0, replica="r", sample=sample(0, (0, 0, 0, 0), running=40)))
    for t in range(1, 121):
        h.add(Scrape(ts=float(t), replica="r", sample=sample(0, (0, 0, 0, 0), running=30)))
    assert h.latest.batch_p95 == 30

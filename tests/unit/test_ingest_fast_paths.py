"""The ingest's fast paths give exactly what their plain definitions give, on varied inputs
(resets, gaps, NaN, another layout, an engine change): each is compared with the definition it
replaces, value and type."""

from __future__ import annotations

import math
import random

import pytest

from tui.core.model import AtLeast, EngineSample, Histogram, Sample, Scrape
from tui.core.pointlog import _pack, delta_quantiles

INF = math.inf
BOUNDS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, INF)
OTHER = (0.1, 1.0, 10.0, INF)


def _same(a: object, b: object) -> bool:
    """Equal in value and type (NaN equal to NaN; an AtLeast is not a plain float)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _hist(rng: random.Random, bounds: tuple[float, ...], whole: bool = True, scale: float = 1.0) -> Histogram:
    counts, c = [], 0.0
    for _ in bounds:
        c += rng.choice((0, 0, 1, 3, 17, 250)) * scale
        counts.append(float(c) if whole else c + rng.random())
    if rng.random() < 0.1:  # a broken exporter: cumulative counts that go down
        counts[rng.randrange(len(counts))] = rng.choice((0.0, -2.0, 1e9))
    count = counts[-1] if rng.random() < 0.9 else counts[-1] + rng.choice((-1.0, 1.0, 0.5))
    return Histogram(bounds, tuple(counts), rng.random() * count, count)


def _older_of(rng: random.Random, newest: Histogram) -> Histogram | None:
    kind = rng.choice(("none", "same", "less", "reset", "other", "fraction", "bucket_up", "zero"))
    if kind == "none":
        return None
    if kind == "same":  # nothing observed since: the count delta is 0
        return Histogram(newest.bounds, newest.counts, newest.sum, newest.count)
    if kind == "other":  # another bucket layout: the newest whole
        return _hist(rng, OTHER)
    if kind == "zero":
        return Histogram(newest.bounds, (0.0,) * len(newest.bounds), 0.0, 0.0)
    f = {"less": 0.5, "reset": 3.0, "fraction": 0.37, "bucket_up": 0.9}[kind]
    counts = tuple(math.floor(c * f) if kind != "fraction" else c * f for c in newest.counts)
    if kind == "bucket_up":  # one bucket above the newest's: that bucket's delta clamps at 0
        i = rng.randrange(len(counts))
        counts = counts[:i] + (newest.counts[i] + 5,) + counts[i + 1:]
    count = newest.count * f if kind != "bucket_up" else newest.count - 1
    return Histogram(newest.bounds, counts, newest.sum * f, count)


def _definition(newest: Histogram, older: Histogram | None, qs: tuple[float, ...]) -> list[float | None]:
    """What the history derived before: the delta as a Histogram, then each quantile of it."""
    h = newest.minus(older)
    return [h.quantile(q) if h.count > 0 else None for q in qs]


@pytest.mark.parametrize("seed", range(40))
def test_quantiles_of_a_delta_in_one_pass_equal_the_definition(seed):
    rng = random.Random(seed)
    for _ in range(60):
        newest = _hist(rng, BOUNDS, whole=rng.random() < 0.8)
        older = _older_of(rng, newest)
        packed = _pack([("ttft", older)] if older is not None else []) if rng.random() < 0.9 else None
        if packed is None:
            older = None
        for qs in ((0.5, 0.95, 0.99), (0.95,), (0.0, 1.0)):
            got = delta_quantiles(newest, packed, "ttft", qs)
            want = _definition(newest, older, qs)
            assert all(_same(a, b) for a, b in zip(got, want, strict=True)), (newest, older, qs, got, want)


def test_quantiles_of_a_delta_cover_the_edge_cases():
    newest = Histogram((1.0, 2.0, INF), (0.0, 0.0, 10.0), 50.0, 10.0)  # all in +Inf: "at least 2"
    got = delta_quantiles(newest, None, "ttft", (0.5, 0.95, 0.99))
    assert got == [AtLeast(2.0)] * 3 and all(type(v) is AtLeast for v in got)
    nan = Histogram((1.0, INF), (1.0, 2.0), 1.0, math.nan)  # a NaN count: no quantile
    assert delta_quantiles(nan, None, "ttft", (0.5,)) == _definition(nan, None, (0.5,)) == [None]
    neg = Histogram((1.0, 2.0, INF), (3.0, 2.0, -1.0), 1.0, 4.0)  # a negative total: ranks descend
    assert all(_same(a, b) for a, b in zip(delta_quantiles(neg, None, "ttft", (0.5, 0.99)),
                                           _definition(neg, None, (0.5, 0.99)), strict=True))
    empty = Histogram((), (), 0.0, 1.0)
    assert delta_quantiles(empty, None, "ttft", (0.5,)) == [None]
    # a name the packed baseline lacks: the newest whole
    p = _pack([("itl", newest)])
    assert delta_quantiles(newest, p, "ttft", (0.5,)) == _definition(newest, None, (0.5,))


def _engine_sample(rng: random.Random, n_engines: int) -> Sample:
    names = ("running", "waiting", "kv_usage", "preemptions", "generation_tokens", "prompt_tokens")
    engines = {}
    for e in range(n_engines):
        vals = {n: float(rng.randrange(50)) for n in names if rng.random() < 0.8}
        engines[str(e) if n_engines > 1 else ""] = EngineSample(vals, {})
    return Sample(engines=engines)


@pytest.mark.parametrize("n_engines", [0, 1, 2, 3])
def test_pod_values_read_once_equal_sample_value(n_engines):
    from tui.core.history import pod_values

    rng = random.Random(n_engines)
    for _ in range(50):
        s = _engine_sample(rng, n_engines)
        vals = pod_values(s)
        for n in ("running", "waiting", "kv_usage", "preemptions", "generation_tokens", "prompt_tokens", "absent"):
            assert _same(vals.get(n), s.value(n)), (n, s)


# -- the history's derived point against the definition it replaced --------------------------------

def _old_derive(h, s):
    """ReplicaHistory._derive as it was: Sample.value per read, each quantile of a Histogram delta."""
    from dataclasses import replace

    from tui.core.history import _CPU, _IDX, _METRIC_FIELDS, _RUNNING, _float_or_none, counter_delta
    from tui.core.model import ReplicaMetrics
    from tui.core.pointlog import minus_packed

    def _first(*vals):
        return next((v for v in vals if v is not None), None)

    sm, w, rec = s.sample, h.windows, h._recent
    ra = rec.first(w.rate_s)
    qa, qb = rec.first(w.quantile_s), len(rec.hists) - 1
    base = rec.hists[qa] if qb > qa else None
    deltas = {}

    def q(name, p):
        if name not in deltas:
            newest = sm.hist(name)
            deltas[name] = None if newest is None else (newest if base is None else minus_packed(newest, base, name))
        d = deltas[name]
        return d.quantile(p) if d is not None and d.count > 0 else None

    def rate(name):  # ReplicaHistory._rate as it was
        i = name if isinstance(name, int) else _IDX[name]
        b = len(rec.hists) - 1
        if b - ra < 1:
            return None
        ca, cb = rec.total(ra, i), rec.total(b, i)
        if ca == ca and cb == cb and rec.gaps[ra][i] == rec.gaps[b][i]:
            d = cb - ca
        else:
            d = counter_delta(v if v == v else None for v in rec.values(ra, b, i))
        dt = rec.times[b] - rec.times[ra]
        if d is None or dt <= 0:
            return None
        return d / dt

    running_vals = sorted([v for v in rec.values(qa, qb, _RUNNING) if v == v])
    batch_p95 = None
    if running_vals:
        batch_p95 = running_vals[min(len(running_vals) - 1, int(0.95 * (len(running_vals) - 1) + 0.5))]
    hits, queries = rate("prefix_hits"), rate("prefix_queries")
    gpu = s.gpu
    mns = sm.cache_config.get("max_num_seqs") if sm.cache_config else None
    m = ReplicaMetrics(
        kv_usage=sm.value("kv_usage"), waiting=sm.value("waiting"), waiting_capacity=sm.value("waiting_capacity"),
        waiting_deferred=sm.value("waiting_deferred"), running=sm.value("running"),
        preemptions_per_s=rate("preemptions"),
        gen_tokens_per_s=_first(rate("generation_tokens"), sm.value("gen_throughput")),
        prompt_tokens_per_s=rate("prompt_tokens"), requests_per_s=rate("requests_success"),
        prefix_hit_rate=(hits / queries) if hits is not None and queries else sm.value("cache_hit_rate"),
        gpu_memory_pct=gpu.memory_pct if gpu else None, gpu_util_pct=gpu.compute_pct if gpu else None,
        gpu_count=len(gpu.devices) if gpu else None, cpu_cores=rate(_CPU),
        ttft_p50_s=q("ttft", 0.5), ttft_p95_s=q("ttft", 0.95), ttft_p99_s=q("ttft", 0.99),
        itl_p50_s=q("itl", 0.5), itl_p95_s=q("itl", 0.95), itl_p99_s=q("itl", 0.99),
        e2e_p50_s=q("e2e", 0.5), e2e_p95_s=q("e2e", 0.95), e2e_p99_s=q("e2e", 0.99),
        queue_p95_s=q("queue_time", 0.95), batch_p95=batch_p95, prompt_len_p95=q("prompt_len", 0.95),
        gen_len_p95=q("gen_len", 0.95), max_tokens_p95=q("max_tokens", 0.95), max_num_seqs=_float_or_none(mns))
    if s.derived:
        m = replace(m, **{k: v for k, v in s.derived.items() if k in _METRIC_FIELDS})
    return m


def _page(rng: random.Random, step: int, engine: str, n_engines: int, hists: dict) -> Sample:
    from tui.core.model import GpuDevice, GpuSample  # noqa: F401  (the scrape carries the GPU)

    engines = {}
    for e in range(n_engines):
        vals = {}
        for n in ("kv_usage", "running", "waiting", "waiting_capacity", "preemptions", "generation_tokens",
                  "prompt_tokens", "requests_success", "prefix_hits", "prefix_queries", "gen_throughput",
                  "cache_hit_rate"):
            if rng.random() < 0.85:  # gaps: a value a page lacks now and then
                vals[n] = float(step * rng.randrange(1, 9)) if rng.random() < 0.9 else float(rng.randrange(4))
        hs = {}
        for n in ("ttft", "itl", "e2e", "queue_time", "prompt_len", "gen_len", "max_tokens", "iteration_tokens"):
            if rng.random() < 0.9:
                prev = hists.get((e, n))
                if prev is None or rng.random() < 0.08:  # a reset now and then
                    prev = Histogram(BOUNDS, (0.0,) * len(BOUNDS), 0.0, 0.0)
                grow, c, counts = rng.choice((0, 0, 1, 5)), 0.0, []
                for old in prev.counts:  # cumulative buckets growing (or not at all)
                    c += rng.randrange(grow + 1)
                    counts.append(old + c)
                h = Histogram(BOUNDS, tuple(counts), prev.sum + c, counts[-1])
                hists[(e, n)] = h
                hs[n] = h
        engines[str(e) if n_engines > 1 else ""] = EngineSample(vals, hs)
    cc = {"max_num_seqs": rng.choice(("256", "x", "64"))} if rng.random() < 0.7 else {}
    return Sample(engines=engines, generation="v1", engine=engine, cache_config=cc,
                  process_cpu_seconds=float(step) * 0.3 if rng.random() < 0.9 else None)


@pytest.mark.parametrize("seed", range(12))
def test_derived_points_equal_the_definition(seed):
    from tui.core.history import ReplicaHistory, Windows
    from tui.core.model import GpuDevice, GpuSample, Scrape

    rng = random.Random(seed)
    h = ReplicaHistory("r", maxlen=rng.choice((40, 600)), windows=Windows(rate_s=rng.choice((5.0, 30.0)),
                                                                          quantile_s=rng.choice((3.0, 60.0))))
    hists: dict = {}
    engine, n_engines, ts = "vllm", rng.choice((1, 2)), 0.0
    for step in range(150):
        ts += rng.choice((1.0, 1.0, 0.5, 7.0))
        if rng.random() < 0.03:  # another engine answers at the address: the windows start again
            engine = "sglang" if engine == "vllm" else "vllm"
        if rng.random() < 0.05:
            h.add(Scrape(ts, "r", error="HTTP 500"))
            continue
        gpu = GpuSample((GpuDevice("0", memory_used_bytes=5.0, memory_total_bytes=10.0, util_pct=50.0),)) \
            if rng.random() < 0.5 else None
        derived = {"ttft_p95_s": 0.25, "not_a_field": 1.0} if rng.random() < 0.05 else {}
        s = Scrape(ts, "r", _page(rng, step, engine, n_engines, hists), gpu=gpu, derived=derived)
        h.add(s)
        want = _old_derive(h, s)
        got = h.latest
        for f in want.__dataclass_fields__:
            assert _same(getattr(got, f), getattr(want, f)), (step, f, getattr(got, f), getattr(want, f))


# -- finite_scrape: the all-finite fast path against the full check ---------------------------------

_ODD = (math.nan, math.inf, -math.inf, -1.0, 2.0, 1e20, 1e308, 10**400, True, 3, "x", -0.0)


def _finite_case(rng: random.Random) -> Scrape:

    def val(name: str) -> object:
        if rng.random() < 0.04:
            return rng.choice(_ODD)
        return rng.choice((0.0, 0.5, 12.0, 1e6)) if name != "kv_usage" else rng.random()

    engines = {}
    for e in range(rng.choice((1, 1, 2))):
        vals = {n: val(n) for n in ("kv_usage", "running", "waiting", "preemptions", "used_tokens", "free_x")}
        hs = {}
        for n in ("ttft", "itl"):
            counts = [float(i) for i in range(5)]
            h_sum, h_count = 10.0, 4.0
            if rng.random() < 0.05:
                counts[rng.randrange(5)] = rng.choice(_ODD[:3] + (1e308,))
            if rng.random() < 0.03:
                h_sum = rng.choice(_ODD[:3] + (1e308,))
            if rng.random() < 0.03:
                h_count = rng.choice(_ODD[:3])
            hs[n] = Histogram(BOUNDS[:5], tuple(counts), h_sum, h_count)
        engines[str(e)] = EngineSample(vals, hs)
    extra = {"x": rng.choice(_ODD)} if rng.random() < 0.2 else {"x": 1.0}
    derived = {"ttft_p95_s": rng.choice(_ODD[:3])} if rng.random() < 0.1 else {"ttft_p95_s": 0.5}
    cpu = rng.choice(_ODD[:3]) if rng.random() < 0.05 else 3.0
    return Scrape(1.0, "r", Sample(engines=engines, extra=extra, process_cpu_seconds=cpu), derived=derived)


@pytest.mark.parametrize("seed", range(20))
def test_finite_fast_path_equals_the_full_check(seed):
    from tui.core.finite import _finite_scrape_full, finite_scrape

    rng = random.Random(seed)
    for _ in range(100):
        s = _finite_case(rng)
        got, got_invalid = finite_scrape(s)
        want, want_invalid = _finite_scrape_full(s)
        assert got_invalid == want_invalid, s
        assert (got is s) == (want is s)
        assert repr(got) == repr(want)  # (repr: NaN compares unequal to itself)


def test_a_scrape_with_unchanged_histograms_shares_the_last_packing():
    from tui.core.history import ReplicaHistory
    from tui.core.pointlog import pack_hists, unpack_hist

    rng = random.Random(5)
    h, hists = ReplicaHistory("r"), {}
    page = _page(rng, 1, "vllm", 1, hists)
    h.add(Scrape(1.0, "r", page))
    h.add(Scrape(2.0, "r", Sample(engines=page.engines, generation="v1")))  # the same histograms
    rows = h._recent.hists
    assert rows[-1] is rows[-2]
    # equal histograms whose zero sum differs in sign (a sum is kept as a double): packed anew
    zero = Histogram(BOUNDS, (0.0,) * len(BOUNDS), 0.0, 0.0)
    for k, sign in enumerate((1.0, -1.0, -1.0)):
        h.add(Scrape(2.1 + k / 10, "r", Sample(engines={"": EngineSample({}, {"ttft": Histogram(
            BOUNDS, zero.counts, sign * 0.0, 0.0)})})))
        if k == 1:
            assert rows[-1] is not rows[-2] and rows[-1].pair(0)[0] == 0.0 and math.copysign(1, rows[-1].pair(0)[0]) < 0
        if k == 2:
            assert rows[-1] is rows[-2]
    for step in range(3, 40):  # any change, even of one bucket of one histogram: packed anew, exactly
        page = _page(rng, step, "vllm", 1, hists)
        h.add(Scrape(float(step), "r", page))
        want = pack_hists(page)
        assert (rows[-1] is rows[-2]) == (want == rows[-2] and want.layout is rows[-2].layout)
        assert rows[-1].layout is want.layout and list(rows[-1]) == list(want)
        for n in want.layout.names:
            assert unpack_hist(rows[-1], n) == page.hist(n)


@pytest.mark.parametrize("seed", range(6))
def test_sparkline_series_equal_the_points_values(seed):
    from tui.core.history import SERIES, ReplicaHistory

    rng = random.Random(seed)
    h = ReplicaHistory("r", maxlen=rng.choice((5, 60, 600)))
    run = {"running": 3.0, "waiting": 0.0, "kv_usage": 0.5}
    for step in range(200):
        for k in run:  # long steady runs, then a change (to an equal int now and then: not the same value)
            if rng.random() < 0.1:
                run[k] = rng.choice((0.0, 1.0, 1, 2.5, None, run[k]))
        vals = {k: v for k, v in run.items() if v is not None}
        h.add(Scrape(float(step), "r", Sample(engines={"": EngineSample(vals, {})})))
        pts = [m for _, m in h.points][-60:]
        for name in SERIES:
            every = tuple(getattr(m, name) for m in pts)
            for n in (1, 7, 60):
                want = every[-n:]
                for got in (h.series(name, n), h.all_series(n)[name]):
                    assert len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want, strict=True)), \
                        (step, name, n, got, want)


# -- the diagnosis' threshold comparisons, remembered, against a fresh one each ---------------------

def test_remembered_comparisons_equal_fresh_ones():
    from tui.core.diagnosis.rules import _cmp, cmp

    rng = random.Random(3)
    values = (None, 0.0, -0.0, 0, 1, 1.0, True, AtLeast(1.0), 0.9, 0.95, 2.5, 1e7, math.nan, math.inf, -3)
    thrs = (0.9, 1.0, 1, 0.0, -0.0, 95.0)
    for _ in range(3000):  # the same arguments again and again, equal values of other types between
        args = ("kv_usage", rng.choice(("KV usage", "waiting")), rng.choice(values), rng.choice((">=", "<", ">", "<=")),
                rng.choice(thrs), rng.choice(("", "%", " cores")), rng.choice(("", "a note")))
        got, want = cmp(*args), _cmp(*args)
        for f in ("signal", "value", "threshold", "op", "crossed", "text"):
            assert _same(getattr(got, f), getattr(want, f)), (args, f, got, want)


def test_packing_keeps_every_count_exactly_and_whole_counts_as_32_bit():
    from tui.core.pointlog import unpack_hist

    rng = random.Random(9)
    odd = (0.5, -1.0, -0.5, 2.0**32, 2.0**32 - 1, 1e-9, 3, 7.999999999999999)
    for _ in range(400):
        counts = [float(rng.randrange(1000)) for _ in BOUNDS]
        if rng.random() < 0.5:
            counts[rng.randrange(len(counts))] = rng.choice(odd)
        h = Histogram(BOUNDS, tuple(counts), 1.5, counts[-1])
        p = _pack([("ttft", h)])
        whole = all(float(c).is_integer() and 0 <= c < 2**32 for c in counts)
        assert p.typecode == ("I" if whole else "d"), counts
        back = unpack_hist(p, "ttft")
        assert back == h and all(type(a) is float for a in back.counts)


# -- all the window histograms' quantiles at once, against delta_quantiles of each ------------------

@pytest.mark.parametrize("seed", range(30))
def test_window_quantiles_equal_delta_quantiles_of_each_histogram(seed):
    """Several histograms packed together (the window's), some of them whole counts with ascending
    deltas (the bisection), others not (fractions, buckets that go down, resets, another layout,
    one missing): each quantile in value and type as delta_quantiles gives it, histogram by histogram."""
    from tui.core.pointlog import window_quantiles

    rng = random.Random(seed)
    spec = (("ttft", (0.5, 0.95, 0.99)), ("itl", (0.5, 0.95, 0.99)), ("e2e", (0.95,)), ("gen_len", (0.25, 0.95)))
    fast = 0
    for _ in range(80):
        newest = {n: _hist(rng, BOUNDS if n != "itl" else OTHER, whole=rng.random() < 0.9)
                  for n, _ in spec if rng.random() < 0.9}
        older = {}
        for n, h in newest.items():
            o = _older_of(rng, h) if rng.random() < 0.3 else Histogram(
                h.bounds, tuple(float(math.floor(c * 0.6)) for c in h.counts), h.sum * 0.6, math.floor(h.count * 0.6))
            if o is not None and o.bounds == h.bounds:
                older[n] = o
        pairs = [(n, h) for n, h in newest.items()]
        packed_new = _pack(pairs)
        base = _pack([(n, older[n]) for n in newest if n in older] if rng.random() < 0.9 else
                     [(n, o) for n, o in older.items()][::-1])  # now and then another layout
        got = window_quantiles(packed_new, base, newest, spec)
        want = []
        for n, qs in spec:
            want.extend(delta_quantiles(newest[n], base, n, qs) if n in newest else [None] * len(qs))
        assert len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want, strict=True)), (got, want)
        fast += base is not None and packed_new is not None and base.layout is packed_new.layout
    assert fast > 20  # the batched path was taken, not only the fallbacks

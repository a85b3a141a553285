"""Per-replica bounded history and the numbers derived from it (rates, quantiles, batch p95).

Counters become rates over a short window with reset handling; histograms become quantiles of
the observations inside the window (delta of cumulative buckets), as Prometheus'
rate()+histogram_quantile() would compute them.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, fields, replace
from itertools import islice
from math import copysign
from typing import Any, Iterable, Iterator, Mapping

from .model import DOWN, OK, STALE, Histogram, ReplicaMetrics, Sample, Scrape, counter_step
from .pointlog import WINDOW_HISTS, Packed, PointLog, ScrapeView, pack_hists_of, window_quantiles
from .signal_windows import RATE_WINDOW_S

# Sparkline series kept per replica, in the order the fleet screen draws them.
SPARK_POINTS = 60  # points per sparkline on the fleet screen (and per Prometheus back-fill)
POINTS_KEPT = 4  # newest derived points kept as objects (older ones packed: pointlog.py)
SERIES = ("kv_usage", "waiting", "preemptions_per_s", "gpu_memory_pct", "gpu_util_pct", "running", "ttft_p95_s")


@dataclass(frozen=True, slots=True)
class Windows:
    rate_s: float = RATE_WINDOW_S  # counters -> rates over this many (source) seconds: every screen's
    quantile_s: float = 60.0  # histogram quantiles over this window
    stale_s: float = 15.0  # failed scrapes for longer than this: down
    # Histograms are most of a scrape's memory. Past the quantile window only one scrape per
    # `hist_keep_every_s` keeps them (baselines for "did the request shape change?").
    hist_keep_every_s: float = 60.0


def counter_delta(values: Iterable[float | None]) -> float | None:
    """Increase of a counter over consecutive samples, tolerating resets (restart -> from 0)."""
    total, prev, seen = 0.0, None, False
    for v in values:
        if v is None:
            continue
        if prev is not None:
            d, v = counter_step(prev, v)  # a restart: the new value is all since it
            total += d
            seen = True
        prev = v
    return total if seen else None


# Pod-level values the rate and batch windows read, taken from each scrape once when it is
# added (Sample.value builds a list per call: ~77 calls per replica per refresh before).
_WINDOW_VALUES = ("running", "requests_success", "prefix_hits", "prefix_queries", "preemptions",
                  "generation_tokens", "prompt_tokens")
_RUNNING, _CPU = 0, len(_WINDOW_VALUES)  # index of `running`; of process_cpu_seconds, after them
_IDX = {name: i for i, name in enumerate(_WINDOW_VALUES)}
# the rates each point takes, in the order _derive unpacks them (process CPU last)
_RATE_IDX = (*(_IDX[n] for n in ("requests_success", "prefix_hits", "prefix_queries", "preemptions",
                                 "generation_tokens", "prompt_tokens")), _CPU)
# The quantiles each window histogram gives, in ReplicaMetrics' field order (ascending per histogram)
_QUANTILES = (("ttft", (0.5, 0.95, 0.99)), ("itl", (0.5, 0.95, 0.99)), ("e2e", (0.5, 0.95, 0.99)),
              ("queue_time", (0.95,)), ("prompt_len", (0.95,)), ("gen_len", (0.95,)), ("max_tokens", (0.95,)))
assert all(0 < a < b for _, qs in _QUANTILES for a, b in zip(qs, (*qs[1:], 2.0), strict=True)), \
    "window_quantiles takes each histogram's quantiles ascending, above 0"
# _derive builds ReplicaMetrics by position (a third cheaper than by keyword): in this order
assert tuple(f.name for f in fields(ReplicaMetrics)) == (
    "kv_usage", "waiting", "waiting_capacity", "waiting_deferred", "running", "preemptions_per_s", "gen_tokens_per_s",
    "prompt_tokens_per_s", "requests_per_s", "prefix_hit_rate", "gpu_memory_pct", "gpu_util_pct", "gpu_count",
    "cpu_cores", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "itl_p50_s", "itl_p95_s", "itl_p99_s", "e2e_p50_s",
    "e2e_p95_s", "e2e_p99_s", "queue_p95_s", "batch_p95", "prompt_len_p95", "gen_len_p95", "max_tokens_p95",
    "max_num_seqs"), "ReplicaMetrics' fields moved: _derive passes them by position"

_NVALS = len(_WINDOW_VALUES) + 1
_STRIDE = 2 * _NVALS
_NAN = float("nan")


class _WindowRows:
    """The scrapes inside the longest window (and the one before it: the baseline), oldest
    first, as rows of one array: (the values at _IDX / _CPU, then their running reset-adjusted
    sums) as doubles with NaN for None; beside them its time, its window
    histograms packed (pointlog.pack_hists) and the None values counted so far. A counter's
    increase over a window is the difference of its running sums at the window's ends, without
    a pass over the window. Rows before `start` are dropped ones, cut off eight at a time
    (a tuple and an array per scrape cost ~150 bytes more: ~2 MiB at 256 replicas)."""

    __slots__ = ("times", "rows", "hists", "gaps", "start")

    def __init__(self) -> None:
        self.times = array("d")
        self.rows = array("d")
        self.hists: list[Packed | None] = []
        self.gaps: list[tuple[int, ...]] = []
        self.start = 0

    def __len__(self) -> int:
        return len(self.hists) - self.start

    def append(self, ts: float, row: list[float], hists: Packed | None, gaps: tuple[int, ...]) -> None:
        if self.start >= 8:  # (moves the live rows down: ~8 KB at a 60 s window of 1 s scrapes)
            del self.times[:self.start], self.rows[:self.start * _STRIDE], self.hists[:self.start]
            del self.gaps[:self.start]
            self.start = 0
        self.times.append(ts)
        self.rows.extend(row)
        self.hists.append(hists)
        self.gaps.append(gaps)

    def values(self, a: int, b: int, i: int) -> array[Any]:
        """Value i of rows a..b."""
        return self.rows[a * _STRIDE + i:(b + 1) * _STRIDE:_STRIDE]

    def total(self, k: int, i: int) -> float:
        return self.rows[k * _STRIDE + _NVALS + i]

    def first(self, seconds: float) -> int:
        """Index of the window's first row: the newest at or before `seconds` before the newest
        row (the baseline), else the oldest."""
        t = self.times
        return max(self.start, bisect_right(t, t[-1] - seconds, self.start) - 1)


class ReplicaHistory:
    """Bounded ring buffer of one replica's scrapes plus derived series, updated per scrape."""

    __slots__ = ("name", "points", "windows", "last_ok", "first_error_ts", "last_error", "_kept_ts", "diagnosis",
                 "_recent", "_run", "_spark", "_spark_cap", "recovered", "_hists_in")

    def __init__(self, name: str, maxlen: int = 600, windows: Windows | None = None) -> None:
        self.name = name
        # (ts, ReplicaMetrics) per successful scrape, and the scrape's packed values beside it
        # (`scrapes`); past the newest POINTS_KEPT packed; a history longer than ten minutes
        # keeps one point in thirty past its newest three (pointlog.py)
        self.points = PointLog(maxlen, POINTS_KEPT)
        # The sparkline series' values, kept as points arrive (at least the last `_spark_cap`),
        # in lists that are only appended to: a refresh's view reads its series through a
        # snapshot of these lists and their length (`SparkSeries`), tuples made only when a
        # screen draws them. Past twice the cap, the newest `_spark_cap` go into new lists (and a
        # new dict): snapshots taken before keep the old ones.
        self._spark_cap = min(maxlen, SPARK_POINTS)
        self._spark: dict[str, list[Any]] = {k: [] for k in SERIES}
        self.windows = windows or Windows()
        self.last_ok: Scrape | None = None
        self.first_error_ts: float | None = None  # start of the current run of failures
        self.last_error: Scrape | None = None
        self._kept_ts = float("-inf")  # last old scrape that kept its histograms
        # The diagnosis' state for this replica (its verdict state machine), opaque here: it
        # travels with the history (copies, forgotten replicas) instead of a cache beside it.
        self.diagnosis: object | None = None
        # The scrapes of the longest window (and the one before it: the baseline), with their
        # window values and histograms read once: what each refresh's rates and quantiles are
        # derived from.
        self._recent = _WindowRows()
        # per window value: (last value seen, its running reset-adjusted sum, None values seen)
        # (a list of lists, not a tuple: the replay controller's clone copies lists, shares tuples)
        self._run: list[list[Any]] = [[None] * _NVALS, [0.0] * _NVALS, [0] * _NVALS]
        # the times of good scrapes that ended a run of failed ones: what tells an outage from a
        # gap in kvwatch's own refreshes (a `ctrl+r`, a late refresh), which must not cost a verdict
        self.recovered: deque[float] = deque(maxlen=64)
        # the last scrape's window histograms and their packing: a scrape whose histograms are
        # all equal to them (nothing observed since) shares that packing (an array per scrape
        # less, and no packing: ~25 us)
        self._hists_in: tuple[list[tuple[str, Histogram]], Packed | None] | None = None

    # -- ingest -----------------------------------------------------------------
    def add(self, scrape: Scrape) -> None:
        if scrape.ok:
            if self.last_ok is not None and self.last_ok.page.engine != scrape.page.engine:
                # another engine answers at this address: its counters and histograms are not
                # the previous one's, so the windows start again (no rate across the two)
                self._recent = _WindowRows()
                self._run = [[None] * _NVALS, [0.0] * _NVALS, [0] * _NVALS]
            if scrape.raw is not None:  # the page text was for the recorder; history keeps the parse
                scrape = replace(scrape, raw=None)
            if self.first_error_ts is not None and self.last_ok is not None:
                self.recovered.append(scrape.ts)
            self.last_ok = scrape
            self.first_error_ts = None
            self.last_error = None
            assert scrape.sample is not None  # an ok scrape has its page
            vals = pod_values(scrape.sample)  # read once: the windows, the point and its packing
            hists = self._pack_hists(scrape.sample)
            self._remember(scrape, hists, vals)
            m = self._derive(scrape, vals, self._hists_in[0] if self._hists_in is not None else [], hists)
            self.points.append((scrape.ts, m), scrape, hists, vals)
            self._thin(scrape.ts)
            spark = self._spark
            if len(spark["kv_usage"]) >= 2 * self._spark_cap:
                cap = self._spark_cap
                spark = self._spark = {k: d[-cap:] if cap else [] for k, d in spark.items()}
            for k, d in spark.items():
                v = getattr(m, k)
                if d:  # a value equal to the one before: that object again (a steady series is one float)
                    last = d[-1]
                    if v is last or (v == last and type(v) is type(last)):
                        v = last
                d.append(v)
        else:
            if self.first_error_ts is None:
                self.first_error_ts = scrape.ts
            self.last_error = scrape

    def _pack_hists(self, sm: Sample) -> Packed | None:
        """`pack_hists(sm)`; the last scrape's packing when its histograms are all equal."""
        hl = [(n, h) for n in WINDOW_HISTS if (h := sm.hist(n)) is not None]
        last = self._hists_in
        # (a Histogram compares its bounds, counts, sum and count; packed as whole numbers, a count
        # of -0.0 is 0 like 0.0, but a sum or count is kept as a double: its zero's sign too)
        if last is not None and (last[1] is None or last[1].typecode == "I") and last[0] == hl \
                and _zero_signs_equal(last[0], hl):
            packed = last[1]
        else:
            packed = pack_hists_of(hl)
        self._hists_in = (hl, packed)
        return packed

    @property
    def scrapes(self) -> ScrapeView:
        """The successful scrapes behind `points`, oldest first: the newest whole, older ones
        rebuilt from what the history keeps of them (pointlog.py says what)."""
        return ScrapeView(self.points, self.last_ok)

    def _remember(self, scrape: Scrape, hists: Packed | None, pod: Mapping[str, Any]) -> None:
        sm = scrape.sample
        assert sm is not None  # only ok scrapes are remembered
        get = pod.get
        vals = [get(n) for n in _WINDOW_VALUES]
        vals.append(sm.process_cpu_seconds)
        last, run, gaps = self._run
        row = [_NAN] * _STRIDE
        for i, v in enumerate(vals):
            if v is None:
                if last[i] is not None:  # (one never seen has no sums to compare: not counted, so
                    gaps[i] += 1  # a value a page lacks does not make each scrape's counts differ)
                continue
            row[i] = v  # the page's value (`running` is a gauge: its window is read as given)
            p = last[i]
            if p is not None:
                if v >= p:  # counter_step's first case, without its call (most values, most scrapes)
                    run[i] += v - p
                else:
                    d, v = counter_step(p, v)  # as counter_delta: a restart counts from zero
                    run[i] += d
            last[i] = v
            row[_NVALS + i] = run[i]
        rec = self._recent
        g = tuple(gaps)
        if rec and rec.gaps[-1] == g:
            g = rec.gaps[-1]  # gaps rarely change: one tuple for the run
        rec.append(scrape.ts, row, hists, g)
        cutoff = scrape.ts - max(self.windows.rate_s, self.windows.quantile_s)
        n = len(rec.hists)
        # rows[start + 1] is a baseline on its own; at most maxlen rows
        while n - rec.start >= 2 and (rec.times[rec.start + 1] <= cutoff or n - rec.start > self.points.maxlen):
            rec.start += 1

    def _thin(self, now: float) -> None:
        """Scrapes past the windows keep their histograms only as baselines, about one per
        `hist_keep_every_s` (in the thinned tier, only points that tier keeps)."""
        w = self.windows
        every = self.points.thinned_every

        def keep(ts: float, seq: int) -> bool:
            if ts - self._kept_ts >= w.hist_keep_every_s and seq % every == 0:
                self._kept_ts = ts
                return True
            return False

        self.points.drop_hists(now - max(w.quantile_s, w.rate_s) - 5.0, keep)

    # -- state ------------------------------------------------------------------
    def after_failures(self, ts: float) -> bool:
        """Whether the good scrape at `ts` came after failed ones."""
        for at in reversed(self.recovered):
            if at <= ts:
                return at == ts
        return False

    def state(self, now: float) -> str:
        if self.last_error is None:
            return OK if self.last_ok is not None else DOWN
        if self.last_ok is None or self.first_error_ts is None or now - self.first_error_ts >= self.windows.stale_s:
            return DOWN
        return STALE

    @property
    def latest(self) -> ReplicaMetrics:
        return self.points[-1][1] if self.points else ReplicaMetrics()

    def all_series(self, n: int) -> Mapping[str, tuple[float | None, ...]]:
        """`{k: self.series(k, n) for k in SERIES}` as it stands now: while `n` is within the
        kept values, a snapshot whose tuples are made when read (a screen draws a few rows'
        sparklines; `--json` none)."""
        if 0 < n <= self._spark_cap:
            spark = self._spark
            return SparkSeries(spark, len(spark["kv_usage"]), n)
        return {k: self.series(k, n) for k in SERIES}

    def series(self, name: str, n: int) -> tuple[float | None, ...]:
        d = self._spark.get(name)
        if d is not None:
            kept = min(len(d), self._spark_cap)  # the newest `_spark_cap` values are the series'
            if n <= self._spark_cap or kept == len(self.points):
                t = tuple(d[len(d) - kept:])
                return t[-n:] if n < len(t) else t
        # From the right end: copying the whole deque (an hour of points) per call cost more
        # than the rest of a refresh's history work.
        out = [getattr(m, name) for _, m in islice(reversed(self.points), n)]
        out.reverse()
        return tuple(out)

    def window(self, seconds: float) -> list[Scrape]:
        if not self.scrapes:
            return []
        cutoff = self.scrapes[-1].ts - seconds
        out = []
        for s in reversed(self.scrapes):
            if s.ts <= cutoff:
                out.append(s)  # the first point at or before the window start is the baseline
                break
            out.append(s)
        out.reverse()
        return out

    # -- derivation -------------------------------------------------------------
    def _rates(self, a: int, idx: tuple[int, ...]) -> list[float | None]:
        """Increase per second of each window value in `idx` from row `a` (the window's first)
        to the newest."""
        rec = self._recent
        b = len(rec.hists) - 1
        if b - a < 1:
            return [None] * len(idx)
        rows, ga, gb = rec.rows, rec.gaps[a], rec.gaps[b]
        oa, ob = a * _STRIDE + _NVALS, b * _STRIDE + _NVALS  # the running sums of rows a and b
        dt = rec.times[b] - rec.times[a]
        out: list[float | None] = []
        for i in idx:
            ca, cb = rows[oa + i], rows[ob + i]
            d: float | None
            if ca == ca and cb == cb and ga[i] == gb[i]:  # (x == x: not NaN)
                d = cb - ca  # a value at every point of the window: the running sums
            else:
                d = counter_delta(v if v == v else None for v in rec.values(a, b, i))  # gaps: counter_delta's rules
            out.append(None if d is None or dt <= 0 else d / dt)
        return out

    def _derive(self, s: Scrape, vals: Mapping[str, Any], hl: list[tuple[str, Histogram]],
                packed: Packed | None = None) -> ReplicaMetrics:
        """The point's numbers; `vals` is `pod_values(s.sample)`, `hl` its window histograms and
        `packed` their packing."""
        sm = s.sample
        assert sm is not None  # derived from ok scrapes only
        w = self.windows
        rec = self._recent
        ra = rec.first(w.rate_s)  # the rate window's first row
        qa, qb = rec.first(w.quantile_s), len(rec.hists) - 1
        base = rec.hists[qa] if qb > qa else None  # the delta's older end (the newest is `s`)
        # Each histogram's quantiles over the window, from its delta to the baseline
        # (a reset inside the window: as Histogram.minus, the observations since the reset)
        quant = window_quantiles(packed, base, dict(hl), _QUANTILES)

        # Effective batch size: p95 of `running` over the window (instantaneous gauge samples).
        window = rec.values(qa, qb, _RUNNING)  # NaN where a page lacked it; else finite (finite_scrape)
        total = sum(window)
        running_vals = sorted(window) if total == total else sorted([v for v in window if v == v])
        batch_p95 = None
        if running_vals:
            batch_p95 = running_vals[min(len(running_vals) - 1, int(0.95 * (len(running_vals) - 1) + 0.5))]

        reqs, hits, queries, preempt, gen, prompt, cpu = self._rates(ra, _RATE_IDX)
        gpu = s.gpu
        mns = sm.cache_config.get("max_num_seqs") if sm.cache_config else None
        get = vals.get
        m = ReplicaMetrics(  # type: ignore[call-arg]  # mypy cannot count starred arguments; the assert on its fields above keeps the order
            get("kv_usage"), get("waiting"), get("waiting_capacity"), get("waiting_deferred"), get("running"),
            preempt,
            # SGLang pages without the token counter still give the scheduler's own rate
            gen if gen is not None else get("gen_throughput"),
            prompt,
            reqs,
            (hits / queries) if hits is not None and queries else get("cache_hit_rate"),
            gpu.memory_pct if gpu else None,
            gpu.compute_pct if gpu else None,
            len(gpu.devices) if gpu else None,
            cpu,
            *quant[:10],  # ttft p50/95/99, itl p50/95/99, e2e p50/95/99, queue p95
            batch_p95,
            *quant[10:],  # prompt_len, gen_len, max_tokens p95
            _float_or_none(mns),
        )
        if s.derived:  # values the source derived itself (Prometheus) win
            m = replace(m, **{k: v for k, v in s.derived.items() if k in _METRIC_FIELDS})  # type: ignore[arg-type]  # each field takes a float (ints are floats here)
        return m


_METRIC_FIELDS = frozenset(f.name for f in fields(ReplicaMetrics))


class SparkSeries(Mapping[str, tuple[Any, ...]]):
    """A view's sparkline series (`ReplicaHistory.all_series`): the last `n` of the first `end`
    values of each of the history's series lists, which are only ever appended to (or replaced
    whole), so the values stay those of the refresh that made it. Each tuple is made when first
    read; equal to the dict of them (and pickled, copied and printed as that dict)."""

    __slots__ = ("_lists", "_end", "_n", "_made")

    def __init__(self, lists: dict[str, list[Any]], end: int, n: int) -> None:
        self._lists = lists
        self._end = end
        self._n = n
        self._made: dict[str, tuple[Any, ...]] | None = None

    def __getitem__(self, key: str) -> tuple[Any, ...]:
        made = self._made
        if made is None:
            made = self._made = {}
        t = made.get(key)
        if t is None:
            d = self._lists[key]  # (a KeyError for a name that is no series)
            t = made[key] = tuple(d[max(0, self._end - self._n):self._end])
        return t

    def __iter__(self) -> Iterator[str]:
        return iter(self._lists)

    def __len__(self) -> int:
        return len(self._lists)

    def __contains__(self, key: object) -> bool:
        return key in self._lists

    def __repr__(self) -> str:
        return repr(dict(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def _float_or_none(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _zero_signs_equal(a: list[tuple[str, Histogram]], b: list[tuple[str, Histogram]]) -> bool:
    """Whether the sums and counts of two equal lists of histograms that are zero have the same sign."""
    for (_, x), (_, y) in zip(a, b, strict=True):
        if (x.sum == 0 and copysign(1.0, x.sum) != copysign(1.0, y.sum)) or \
                (x.count == 0 and copysign(1.0, x.count) != copysign(1.0, y.count)):
            return False
    return True


def pod_values(sample: Sample) -> Mapping[str, Any]:
    """Every pod-level value of `sample` at once: `.get(name)` is `sample.value(name)` (a page
    of one engine: that engine's own mapping, not copied; read-only)."""
    engines = sample.engines
    if len(engines) == 1:
        for e in engines.values():
            return e.values
    names: dict[str, None] = {}
    for e in engines.values():
        names.update(dict.fromkeys(e.values))
    return {n: sample.value(n) for n in names}

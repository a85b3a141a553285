"""A replica's retained points, (ts, ReplicaMetrics), oldest first, and aligned with them the
part of each scrape the diagnosis reads back (`ScrapeView`: what `ReplicaHistory.scrapes` is).

An hour of points is most of kvwatch's memory. Only the newest `keep` points stay objects (the
diagnosis follows its last point by identity while it is one, by time after); older ones are
packed as rows of numbers in fixed-stride arrays and rebuilt on demand for the few readers that
iterate old points (verdict replay, plots, the triage and runbook look-backs). Three tiers,
newest first:

- objects: the newest `keep` points;
- fine: the next points up to `fine` in all (all of a history up to `whole` points: the
  default ten minutes), at the scrape interval;
- coarse: past `fine` (only in a history longer than `whole`), one point in `every`, its
  points' values as float32 (this tier is already a thinned view of minutes-old points).

Every other packed number is a double, so a scrape, and a point of the fine tier, reads back
exactly; window histograms keep their bucket counts as 32-bit integers while they are whole
(`_pack`), which is exact too.

A packed scrape keeps its pod-level values of `SCRAPE_VALUES` (what the rules, runbook, triage
and scale-out read; the gauges its point already holds are taken from the point), its process
CPU and scrape latency, its GPU reading when it had one, and, while inside the windows, the
window histograms (`WINDOW_HISTS`, summed over engines) in one array; past the windows, about
one scrape a minute keeps the look-back ones (`LOOKBACK_HISTS`) as a baseline. Everything else
of the page (other families, per-engine breakdown, the other histograms) lives only on the
newest scrape (`ReplicaHistory.last_ok`).
"""

from __future__ import annotations

import math
import operator
import struct
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable, SupportsIndex

from .model import AtLeast, EngineSample, Histogram, ReplicaMetrics, Sample, Scrape, in_bucket

Point = tuple[float, ReplicaMetrics]
_NAMES = tuple(f.name for f in fields(ReplicaMetrics))
_STRIDE = len(_NAMES)

WHOLE_POINTS = 600  # a history up to this many points (the default ten minutes) is kept at the interval
FINE_POINTS = 180  # a longer one keeps its newest this many at the interval (past the windows),
COARSE_EVERY = 30  # and one point in thirty before them (an hour at 1 s: 180 + 114 points)

# Pod-level values an old scrape answers `sample.value(name)` for.
SCRAPE_VALUES = ("kv_usage", "running", "waiting", "waiting_capacity", "waiting_deferred", "swapped", "preemptions",
                 "requests_success", "requests_aborted", "generation_tokens", "prompt_tokens", "prefix_hits",
                 "prefix_queries", "gen_throughput", "cache_hit_rate", "retracted")
# Of those, the gauges the point holds as they were on the page (unless the source derived its own).
_FROM_POINT = ("kv_usage", "running", "waiting", "waiting_capacity", "waiting_deferred")
_PACKED = tuple(n for n in SCRAPE_VALUES if n not in _FROM_POINT)
_CPU, _LAT = len(_PACKED), len(_PACKED) + 1  # process_cpu_seconds, latency_s after them
_VSTRIDE = len(_PACKED) + 2
# Histograms the windows' quantiles and the look-backs (triage, runbook, capacity) read.
WINDOW_HISTS = ("ttft", "itl", "e2e", "queue_time", "prompt_len", "gen_len", "max_tokens")
LOOKBACK_HISTS = ("ttft", "itl", "prompt_len", "gen_len", "max_tokens")  # triage, runbook, capacity
_NAN = float("nan")


@dataclass(frozen=True, slots=True)
class _Meta:
    """What a run of scrapes shares (one object for them all while it does not change)."""

    replica: str
    engine_key: str
    generation: str
    engine: str
    model_name: str | None
    cache_config: Mapping[str, str]
    pod: Any
    group: str | None


@dataclass(frozen=True, slots=True)
class _Extra:
    """A packed scrape's rarer parts; rows without any share their `_Meta` instead."""

    meta: _Meta
    hists: Packed | None  # the histograms this scrape keeps (`_pack`), or None
    gpu: Any = None
    page: Mapping[str, float | None] | None = None  # _FROM_POINT values where the point's differ




def pack_hists(sample: Sample, names: tuple[str, ...] = WINDOW_HISTS) -> Packed | None:
    """The window histograms of `sample`, summed over engines, packed (`_pack`)."""
    return _pack([(n, h) for n in names if (h := sample.hist(n)) is not None])


def pack_hists_of(hists: list[tuple[str, Histogram]]) -> Packed | None:
    """(name, histogram) pairs packed (`_pack`): `pack_hists` of a page whose pairs these are."""
    return _pack(hists)


def _subset(packed: Packed | None, names: tuple[str, ...]) -> Packed | None:
    if packed is None:
        return None
    return _pack([(n, h) for n in names if (h := unpack_hist(packed, n)) is not None])


class _Layout:
    """Which histograms a packed array holds and where: one object per bucket shape (interned)."""

    __slots__ = ("key", "names", "bounds", "at", "ncounts")

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.names = tuple(n for n, _ in key)
        self.bounds = tuple(b for _, b in key)
        # name -> (offset of its bucket counts, index of its (sum, count) pair, bounds)
        self.at: dict[str, tuple[int, int, tuple[float, ...]]] = {}
        o = 0
        for j, (n, bounds) in enumerate(key):
            self.at[n] = (o, j, bounds)
            o += len(bounds)
        self.ncounts = o

    def __reduce__(self) -> tuple[Callable[[tuple[Any, ...]], _Layout], tuple[tuple[Any, ...]]]:
        return (_layout, (self.key,))


_LAYOUTS: dict[tuple[Any, ...], _Layout] = {}
_BY_IDS: dict[tuple[Any, ...], _Layout] = {}  # (name, id(bounds)) -> layout; checked by identity on use


def _layout(key: tuple[Any, ...]) -> _Layout:
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) > 1000:
            _LAYOUTS.clear()
            _BY_IDS.clear()
        layout = _LAYOUTS[key] = _Layout(key)
    return layout


if TYPE_CHECKING:
    _ArrayBase = array[Any]
else:
    _ArrayBase = array  # not subscriptable at run time before Python 3.12


class Packed(_ArrayBase):
    """Histograms in one array: the bucket counts of each, then the (sum, count) pair of each as
    doubles. The counts are whole numbers on every real page, so the array is of 32-bit
    unsigned integers (exact, half a double's size; each pair then takes four of them): a real
    page's window histograms are ~140 counts, kept for every scrape of the windows. Counts
    that are not (a fraction, 2**32 or more) make it an array of doubles. One object per
    scrape: a tuple of the layout and two arrays cost ~130 bytes more, ~4 MiB at 256 replicas
    over an hour."""

    __slots__ = ("layout",)
    layout: _Layout

    # (array's own copy and pickle would make a plain array, without the layout)
    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (_packed, (self.typecode, self.tobytes(), self.layout))

    def __copy__(self) -> Packed:
        return _packed(self.typecode, self.tobytes(), self.layout)

    def __deepcopy__(self, memo: Any) -> Packed:
        return self.__copy__()

    def pair(self, j: int) -> tuple[float, float]:
        """(sum, count) of the layout's j-th histogram."""
        return _PAIR.unpack_from(self, self.layout.ncounts * self.itemsize + 16 * j)


_PAIR = struct.Struct("dd")


def _packed(typecode: str, data: bytes, layout: _Layout) -> Packed:
    p = Packed(typecode)
    p.frombytes(data)
    p.layout = layout
    return p


def _pack(hists: list[tuple[str, Histogram]]) -> Packed | None:
    if not hists:
        return None
    counts: list[float] = []
    tails: list[float] = []
    for _name, h in hists:
        counts.extend(h.counts)
        tails.append(h.sum)
        tails.append(h.count)
    # The parser shares one bounds tuple per bucket layout: look the layout up by those objects
    # (hashing the bounds themselves cost more than the rest of the packing)
    ids = tuple((n, id(h.bounds)) for n, h in hists)
    layout = _BY_IDS.get(ids)
    if layout is None or any(a is not h.bounds for a, (_n, h) in zip(layout.bounds, hists, strict=True)):
        layout = _layout(tuple((n, h.bounds) for n, h in hists))
        _BY_IDS[ids] = layout
    # built from one list, so that the array is allocated at its exact size
    try:
        whole = list(map(math.floor, counts))  # (equal to the counts only where each is whole: then int())
        packed = Packed("I", whole + array("I", array("d", tails).tobytes()).tolist()) if whole == counts else None
    except (ValueError, OverflowError):  # NaN or inf; below 0 or from 2**32 on
        packed = None
    if packed is None:
        packed = Packed("d", counts + tails)
    packed.layout = layout
    return packed


def unpack_hist(packed: Packed | None, name: str) -> Histogram | None:
    if packed is None:
        return None
    at = packed.layout.at.get(name)
    if at is None:
        return None
    o, j, bounds = at
    part = packed[o:o + len(bounds)]
    total, count = packed.pair(j)
    return Histogram(bounds, tuple(map(float, part)) if packed.typecode == "I" else tuple(part), total, count)


def minus_packed(newest: Histogram, packed: Packed | None, name: str) -> Histogram:
    """`newest.minus(unpack_hist(packed, name))` without building the older histogram."""
    at = packed.layout.at.get(name) if packed is not None else None
    if packed is None or at is None:
        return newest
    o, j, bounds = at
    total, count = packed.pair(j)
    if bounds != newest.bounds or count > newest.count:
        return newest  # another layout, or a reset: as Histogram.minus
    d = map(operator.sub, newest.counts, packed[o:o + len(bounds)])  # float - int: a float
    return Histogram(bounds, tuple([x if x > 0.0 else 0.0 for x in d]), newest.sum - total, newest.count - count)


def delta_quantiles(newest: Histogram, packed: Packed | None, name: str,
                    qs: tuple[float, ...]) -> list[float | None]:
    """`[h.quantile(q) if h.count > 0 else None for q in qs]` of `h = minus_packed(newest, packed,
    name)`, `qs` ascending, without building `h`: nothing observed since the baseline (a count
    delta that is not above 0) is None at once, and the quantiles come from one walk up the
    buckets (the delta of each bucket taken as it is reached)."""
    nq = len(qs)
    counts, bounds = newest.counts, newest.bounds
    at = packed.layout.at.get(name) if packed is not None else None
    older = None
    n = newest.count
    if at is not None:
        o, j, ob = at
        total, count = packed.pair(j)  # type: ignore[union-attr]
        if (ob is bounds or ob == bounds) and not count > n:  # else another layout, or a reset: newest whole
            n = n - count
            older = packed[o:o + len(ob)]  # type: ignore[index]
    if not n > 0 or not counts:  # (a NaN count too)
        return [None] * nq
    if len(counts) != len(bounds):  # a malformed histogram: the definition, with its errors
        h = minus_packed(newest, packed, name)
        return [h.quantile(q) for q in qs]
    if older is None:
        cum: Any = counts
        top = counts[-1]
    else:
        top = counts[-1] - older[-1]  # float - int: a float, as Histogram.minus
        top = top if top > 0.0 else 0.0
        cum = None
    if not top >= 0.0:  # ranks would not ascend with the quantiles: the definition, one by one
        h = minus_packed(newest, packed, name)
        return [h.quantile(q) for q in qs]
    out: list[float | None] = []
    k, rank = 0, qs[0] * top
    prev_bound = prev_count = 0.0
    it = zip(bounds, cum if cum is not None else map(operator.sub, counts, older), strict=True)  # type: ignore[arg-type]
    for bound, c in it:
        if cum is None:
            c = c if c > 0.0 else 0.0
        while c >= rank:
            out.append(in_bucket(prev_bound, prev_count, bound, c, rank))
            k += 1
            if k == nq:
                return out
            rank = qs[k] * top
        prev_bound, prev_count = bound, c
    out.extend([prev_bound] * (nq - k))
    return out


_PAIRS: dict[int, struct.Struct] = {}  # the (sum, count) pairs of k histograms at once, by k


def window_quantiles(newest: Packed | None, base: Packed | None, hists: Mapping[str, Histogram],
                     spec: tuple[tuple[str, tuple[float, ...]], ...]) -> list[float | None]:
    """`delta_quantiles(hists[name], base, name, qs)` for each (name, qs) of `spec` in turn
    (None for each q of a histogram `hists` lacks), all in one list; `newest` is `hists`
    packed (`_pack`), every `qs` ascending and above 0. Where both packings are whole counts
    of one layout (every real page's window), the bucket deltas of all the histograms are
    taken at once and each quantile's bucket is a bisection of its histogram's deltas while
    those ascend (cumulative buckets that only grew), with the walk's arithmetic: the same
    values, without a walk up every bucket of every histogram. Anything else: delta_quantiles."""
    out: list[float | None] = []
    fast = (newest is not None and base is not None and base.layout is newest.layout
            and newest.typecode == "I" and base.typecode == "I")
    if fast:
        assert newest is not None and base is not None
        layout = base.layout
        at = layout.at
        nc = layout.ncounts
        d = list(map(operator.sub, newest[:nc], base[:nc]))
        k = len(layout.names)
        pairs_of = _PAIRS.get(k)
        if pairs_of is None:
            pairs_of = _PAIRS[k] = struct.Struct(f"{2 * k}d")
        pairs = pairs_of.unpack_from(base, nc * 4)
    for name, qs in spec:
        h = hists.get(name)
        if h is None:
            out.extend([None] * len(qs))
            continue
        a = at.get(name) if fast else None
        if a is None:
            out.extend(delta_quantiles(h, base, name, qs))
            continue
        o, j, ob = a
        counts, bounds = h.counts, h.bounds
        count = pairs[2 * j + 1]
        if count > h.count or len(counts) != len(ob) or len(bounds) != len(ob):
            out.extend(delta_quantiles(h, base, name, qs))  # a reset, a malformed histogram
            continue
        if not h.count - count > 0 or not counts:
            out.extend([None] * len(qs))
            continue
        seg = d[o:o + len(ob)]
        if seg[0] < 0 or seg != sorted(seg):
            out.extend(delta_quantiles(h, base, name, qs))  # buckets that do not ascend: the walk
            continue
        top, n = seg[-1], len(seg)
        i = 0
        for q in qs:
            rank = q * top
            i = bisect_left(seg, rank, i)  # the first bucket whose delta reaches the rank
            if i == n:
                out.append(bounds[-1])
                continue
            prev_bound, prev_count = (bounds[i - 1], seg[i - 1]) if i else (0.0, 0.0)
            out.append(in_bucket(prev_bound, prev_count, bounds[i], seg[i], rank))
    return out


def _unpack_all(packed: Packed | None) -> Mapping[str, Histogram]:
    if packed is None:
        return _EMPTY
    return {n: h for n in packed.layout.names if (h := unpack_hist(packed, n)) is not None}


class _Ring:
    """Fixed-capacity ring of packed rows: time, sequence number, the point's values with bit
    masks of the fields that were None / ints / AtLeast, the scrape's values, one side object.
    `points` is the typecode of the points' values: "d" (exact) or "f" (the thinned tier); the
    scrapes' values (counters among them) are always doubles."""

    __slots__ = ("cap", "ts", "seq", "m", "none", "ints", "v", "side", "head", "n")

    def __init__(self, cap: int, points: str = "d") -> None:
        self.cap = cap
        self.ts, self.m, self.v = array("d"), array(points), array("d")
        self.seq, self.none, self.ints = array("q"), array("Q"), array("Q")
        self.side: list[Any] = []
        self.head = 0
        self.n = 0

    def copy(self) -> _Ring:
        new = _Ring(self.cap, self.m.typecode)
        new.ts, new.m, new.v = array("d", self.ts), array(self.m.typecode, self.m), array("d", self.v)
        new.seq, new.none, new.ints = array("q", self.seq), array("Q", self.none), array("Q", self.ints)
        new.side = list(self.side)
        new.head, new.n = self.head, self.n
        return new

    def slot(self, i: int) -> int:
        return (self.head + i) % self.cap

    def get(self, i: int) -> tuple[Any, ...]:
        s = self.slot(i)
        return (self.ts[s], self.seq[s], self.m[s * _STRIDE:(s + 1) * _STRIDE], self.none[s], self.ints[s],
                self.v[s * _VSTRIDE:(s + 1) * _VSTRIDE], self.side[s])

    def push(self, row: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Add `row` as the newest; the oldest row when one made way, else None."""
        if self.cap <= 0:
            return row
        out = None
        if self.n == self.cap:
            out = self.get(0)
            s = self.head
            self.head = (self.head + 1) % self.cap
        else:
            s = self.slot(self.n)
            self.n += 1
        ts, seq, m, none, ints, v, side = row
        if not (isinstance(m, array) and m.typecode == self.m.typecode):
            m = array(self.m.typecode, m)
        if not isinstance(v, array):
            v = array("d", v)
        if s == len(self.ts):  # still growing
            self.ts.append(ts)
            self.seq.append(seq)
            self.m.extend(m)
            self.none.append(none)
            self.ints.append(ints)
            self.v.extend(v)
            self.side.append(side)
            if self.n == self.cap:  # full from now on: arrays of exactly its size (growth over-allocates)
                for name in ("ts", "seq", "m", "none", "ints", "v"):
                    a = getattr(self, name)
                    setattr(self, name, array(a.typecode, a))
        else:
            self.ts[s], self.seq[s] = ts, seq
            self.m[s * _STRIDE:(s + 1) * _STRIDE] = m
            self.none[s], self.ints[s], self.side[s] = none, ints, side
            self.v[s * _VSTRIDE:(s + 1) * _VSTRIDE] = v
        return out


_FROM_IDX = tuple((n, _NAMES.index(n)) for n in _FROM_POINT)
_TYPE_BITS = _STRIDE  # `ints` holds int bits at j and, at _TYPE_BITS + j, an AtLeast (+Inf bucket)
assert 2 * _STRIDE < 64


_FIELDS = operator.attrgetter(*_NAMES)


def _pack_metrics(m: ReplicaMetrics) -> tuple[list[float], int, int, bool]:
    none = ints = 0
    row = [0.0] * _STRIDE
    odd = False
    for i, v in enumerate(_FIELDS(m)):
        if v is None:
            none |= 1 << i
        elif type(v) is float:
            row[i] = v
        elif type(v) is int and abs(v) < 1 << 53:
            row[i] = float(v)
            ints |= 1 << i
        elif type(v) is AtLeast:
            row[i] = float(v)
            ints |= 1 << (_TYPE_BITS + i)
        else:
            odd = True
    return row, none, ints, odd


def _unpack_metrics(m: Sequence[float], none: int, ints: int) -> ReplicaMetrics:
    if not ints >> _TYPE_BITS:
        # the packed row holds each field's own type (None / int / float), in field order
        return ReplicaMetrics(*[None if none >> j & 1 else (int(v) if ints >> j & 1 else v) for j, v in enumerate(m)])  # type: ignore[arg-type]
    return ReplicaMetrics(*[None if none >> j & 1 else (int(v) if ints >> j & 1 else
                                                          AtLeast(v) if ints >> (_TYPE_BITS + j) & 1 else v)
                            for j, v in enumerate(m)])  # type: ignore[arg-type]


def pack_scrape(s: Scrape | None, m: ReplicaMetrics, meta: _Meta | None, hists: Any = False,
                vals: Mapping[str, Any] | None = None) -> tuple[list[float], Any]:
    """(scrape values row, side object) for a successful scrape whose point is `m`; `meta` is
    reused when equal; `hists` is its `pack_hists` and `vals` its pod-level values (a mapping
    whose `get` is `sample.value`) when the caller already has them."""
    if s is None or s.sample is None:
        return [_NAN] * _VSTRIDE, None
    sm = s.sample
    get = sm.value if vals is None else vals.get
    row = [_NAN if (v := get(n)) is None else v for n in _PACKED]
    page = None
    for n in _FROM_POINT:
        v, mv = get(n), getattr(m, n)
        if v is not mv and (v != mv or type(v) is not type(mv)):
            page = page or {}
            page[n] = v
    row.append(_NAN if sm.process_cpu_seconds is None else sm.process_cpu_seconds)
    row.append(_NAN if s.latency_s is None else s.latency_s)
    key = next(iter(sm.engines), "")
    if not (meta is not None and meta.replica == s.replica and meta.engine_key == key
            and meta.generation == sm.generation and meta.engine == sm.engine and meta.model_name == sm.model_name
            and (meta.cache_config is sm.cache_config or meta.cache_config == sm.cache_config)
            and meta.pod == s.pod and meta.group == s.group):
        meta = _Meta(s.replica, key, sm.generation, sm.engine, sm.model_name, sm.cache_config, s.pod, s.group)
    if hists is False:
        hists = pack_hists(sm)
    # (a source's own derived values are not kept: the point holds them, nothing reads them back)
    if hists is None and s.gpu is None and page is None:
        return row, meta
    return row, _Extra(meta, hists, s.gpu, page)


def _meta_of(side: Any) -> _Meta | None:
    return side.meta if isinstance(side, _Extra) else side


def with_hists(side: Any, names: tuple[str, ...]) -> Any:
    """`side` with only the histograms `names` (none: its meta alone, when it has nothing else)."""
    if not isinstance(side, _Extra) or side.hists is None:
        return side
    hists = _subset(side.hists, names) if names else None
    if hists is None and side.gpu is None and side.page is None:
        return side.meta
    return _Extra(side.meta, hists, side.gpu, side.page)


def hists_of(side: Any) -> Packed | None:
    return side.hists if isinstance(side, _Extra) else None


class PointLog(Sequence[Any]):
    __slots__ = ("maxlen", "keep", "every", "_recent", "_fine", "_coarse", "_odd", "_seq", "_meta", "_thin_seq")

    def __init__(self, maxlen: int, keep: int = 16, fine: int = FINE_POINTS, every: int = COARSE_EVERY,
                 whole: int = WHOLE_POINTS) -> None:
        self.maxlen = maxlen
        self.keep = max(1, min(keep, maxlen))
        fine_n = max(self.keep, maxlen if maxlen <= whole else min(fine, maxlen))
        self.every = max(1, every)
        # newest: (point, scrape values row, side object)
        self._recent: deque[tuple[Point, list[float], Any]] = deque()
        self._fine = _Ring(fine_n - self.keep)
        # The thinned tier keeps its points' values as float32 (7 significant digits; whole
        # numbers exact to 2**24): one point in `every`, minutes old. Its scrapes' values stay
        # doubles: counters are differenced against newer ones, where a float32 rounded up
        # would read as a restart.
        self._coarse = _Ring(-(-(maxlen - fine_n) // self.every) if maxlen > fine_n else 0, "f")
        self._odd: dict[int, Point] = {}  # points with a value that is no float or int, kept whole, by seq
        self._seq = 0  # points appended so far: the next point's sequence number
        self._meta: _Meta | None = None
        self._thin_seq = 0  # points before this one had their window histograms thinned

    # -- writing ------------------------------------------------------------------
    def append(self, point: Point, scrape: Scrape | None = None, hists: Any = False,
               vals: Mapping[str, Any] | None = None) -> None:
        row, side = pack_scrape(scrape, point[1], self._meta, hists, vals)
        if side is not None:
            self._meta = _meta_of(side)
        self._recent.append((point, row, side))
        self._seq += 1
        if len(self._recent) > self.keep:
            self._pack(*self._recent.popleft())

    def _pack(self, point: Point, vrow: list[float], side: Any) -> None:
        ts, m = point
        seq = self._seq - len(self._recent) - 1  # the sequence number of the point being packed
        mrow, none, ints, odd = _pack_metrics(m)
        if odd:
            self._odd[seq] = point
        out = self._fine.push((ts, seq, mrow, none, ints, vrow, side))
        if out is None or self._coarse.cap <= 0:
            if out is not None:
                self._odd.pop(out[1], None)
            return
        if out[1] % self.every == 0:  # baselines were chosen among these: they all stay
            out = self._coarse.push(out)
            if out is not None:
                self._odd.pop(out[1], None)
        else:
            self._odd.pop(out[1], None)

    def drop_hists(self, before_ts: float, keep: Callable[[float, int], bool]) -> None:
        """Forget the window histograms of the points older than `before_ts`, except where
        `keep(ts, seq)` says to keep them (the baselines); each point is visited once."""
        f, rec = self._fine, self._recent
        first = self._seq - len(rec) - f.n  # sequence number of the oldest fine row
        seq = max(self._thin_seq, first)
        while seq < self._seq - 1:  # never the newest
            k = seq - first
            if k < f.n:
                s = f.slot(k)
                ts, side = f.ts[s], f.side[s]
            else:
                pt, v, side = rec[k - f.n]
                ts = pt[0]
            if ts >= before_ts:
                break
            if isinstance(side, _Extra) and side.hists is not None:
                side = with_hists(side, LOOKBACK_HISTS if keep(ts, seq) else ())
                if k < f.n:
                    f.side[s] = side
                else:
                    rec[k - f.n] = (pt, v, side)
            seq += 1
        self._thin_seq = seq

    def frozen(self) -> PointLog:
        """An independent copy (the packed rows copied as memory, not rebuilt): a snapshot."""
        new = PointLog.__new__(PointLog)
        new.maxlen, new.keep, new.every = self.maxlen, self.keep, self.every
        new._recent = deque(self._recent)
        new._fine, new._coarse = self._fine.copy(), self._coarse.copy()
        new._odd, new._seq, new._meta, new._thin_seq = dict(self._odd), self._seq, self._meta, self._thin_seq
        return new

    @property
    def thinned_every(self) -> int:
        """1 in how many points the thinned tier keeps (1: this log has no such tier)."""
        return self.every if self._coarse.cap > 0 else 1

    # -- reading --------------------------------------------------------------------
    def _where(self, i: int) -> tuple[_Ring | None, int]:
        nc, nf = self._coarse.n, self._fine.n
        if i < nc:
            return self._coarse, i
        if i < nc + nf:
            return self._fine, i - nc
        return None, i - nc - nf

    def _point(self, ring: _Ring, j: int) -> Point:
        ts, seq, m, none, ints, _v, _side = ring.get(j)
        odd = self._odd.get(seq)
        if odd is not None:
            return odd
        return (ts, _unpack_metrics(m, none, ints))

    def ts(self, i: int) -> float:
        ring, j = self._where(i)
        return self._recent[j][0][0] if ring is None else ring.ts[ring.slot(j)]

    def row(self, i: int) -> tuple[float, Sequence[float], Any, dict[str, float | None]]:
        """(ts, scrape values row, side object, the _FROM_POINT values) of point i, for ScrapeView."""
        ring, j = self._where(i)
        if ring is None:
            (ts, m), v, side = self._recent[j]
            return ts, v, side, {n: getattr(m, n) for n in _FROM_POINT}
        ts, _seq, m, none, ints, v, side = ring.get(j)
        return ts, v, side, {n: None if none >> k & 1 else (int(m[k]) if ints >> k & 1 else m[k])
                             for n, k in _FROM_IDX}

    def __len__(self) -> int:
        return self._coarse.n + self._fine.n + len(self._recent)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("point index out of range")
        ring, j = self._where(i)
        return self._recent[j][0] if ring is None else self._point(ring, j)

    def __iter__(self) -> Iterator[Point]:
        for ring in (self._coarse, self._fine):
            for j in range(ring.n):
                yield self._point(ring, j)
        for p, _v, _s in self._recent:
            yield p

    def __reversed__(self) -> Iterator[Point]:
        for p, _v, _s in reversed(self._recent):
            yield p
        for ring in (self._fine, self._coarse):
            for j in range(ring.n - 1, -1, -1):
                yield self._point(ring, j)

    def __bool__(self) -> bool:
        return bool(self._recent)

    def timestamps(self) -> Iterator[float]:
        for ring in (self._coarse, self._fine):
            for j in range(ring.n):
                yield ring.ts[ring.slot(j)]
        for (ts, _), _v, _s in self._recent:
            yield ts


class _Empty(Mapping[str, Any]):
    """The one read-only empty mapping rebuilt scrapes share; pickles as itself."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __reduce__(self) -> tuple[Callable[[], Mapping[str, Any]], tuple[()]]:
        return (_empty, ())


def _empty() -> Mapping[str, Any]:
    return _EMPTY


_EMPTY: Mapping[str, Any] = _Empty()


def rebuild(ts: float, v: Sequence[float], side: Any, gauges: dict[str, float | None]) -> Scrape:
    """A packed scrape as a Scrape: its pod-level values under its first engine's key."""
    meta = _meta_of(side)
    extra = side if isinstance(side, _Extra) else None
    if extra is not None and extra.page:
        gauges = {**gauges, **extra.page}
    vals = {n: x for n, x in gauges.items() if x is not None}
    vals.update({n: x for n, x in zip(_PACKED, v, strict=False) if x == x})  # NaN: not on the page
    cpu, lat = v[_CPU], v[_LAT]
    hists = _unpack_all(hists_of(side))
    if meta is None:  # not a scrape (PointLog used without one)
        return Scrape(ts, "", Sample(engines={"": EngineSample(vals, hists)}))
    sample = Sample(engines={meta.engine_key: EngineSample(vals, hists)}, generation=meta.generation,
                    engine=meta.engine, model_name=meta.model_name, cache_config=meta.cache_config,
                    process_cpu_seconds=None if math.isnan(cpu) else cpu, extra=_EMPTY)
    return Scrape(ts, meta.replica, sample, gpu=extra.gpu if extra else None, pod=meta.pod, group=meta.group,
                  latency_s=None if math.isnan(lat) else lat,
                  derived=_EMPTY)


_PACKED_AT = {n: i for i, n in enumerate(_PACKED)}


def _row_value(v: Sequence[float], side: Any, gauges: dict[str, float | None], name: str) -> float | None:
    """What `rebuild(ts, v, side, gauges).page.value(name)` gives, without the rebuild."""
    i = _PACKED_AT.get(name)
    if i is not None and v[i] == v[i]:  # NaN: not on the page
        return v[i]
    if isinstance(side, _Extra) and side.page and name in side.page:
        return side.page[name]
    return gauges.get(name)


class ScrapeView(Sequence[Any]):
    """`ReplicaHistory.scrapes`: the successful scrapes behind the points, oldest first; the
    newest is the scrape itself, older ones rebuilt from their packed rows on each read."""

    __slots__ = ("_log", "_last")

    def __init__(self, log: PointLog, last: Scrape | None) -> None:
        self._log = log
        self._last = last  # the newest scrape itself (the history's last_ok)

    def __len__(self) -> int:
        return len(self._log)

    def _get(self, i: int) -> Scrape:
        if i == len(self._log) - 1:
            last = self._last
            if last is not None:
                return last
        return rebuild(*self._log.row(i))

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("scrape index out of range")
        return self._get(i)

    def __iter__(self) -> Iterator[Scrape]:
        for i in range(len(self)):
            yield self._get(i)

    def __reversed__(self) -> Iterator[Scrape]:
        for i in range(len(self) - 1, -1, -1):
            yield self._get(i)

    def __bool__(self) -> bool:
        return len(self._log) > 0

    def _first_at(self, start: float) -> int:
        lo, hi = 0, len(self._log)
        while lo < hi:  # the first index with ts >= start (times ascend)
            mid = (lo + hi) // 2
            if self._log.ts(mid) < start:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def before(self, start: float) -> Iterator[Scrape]:
        """The scrapes with ts < start, newest first, each rebuilt only when reached."""
        for i in range(self._first_at(start) - 1, -1, -1):
            yield self._get(i)

    def values_since(self, start: float, end: float, names: tuple[str, ...]) -> list[tuple[float, tuple[float | None, ...]]]:
        """(ts, `page.value(name)` for each of `names`) of the scrapes `since(start, end)` gives,
        read from the packed rows without rebuilding a Scrape for each (the runbook's scale-out
        read four values of every scrape of two minutes of every replica on each opening)."""
        out: list[tuple[float, tuple[float | None, ...]]] = []
        n = len(self._log)
        for i in range(self._first_at(start), n):
            last = self._last if i == n - 1 else None
            if last is not None:
                if last.ts > end:
                    break
                page = last.page
                out.append((last.ts, tuple(page.value(k) for k in names)))
                continue
            ts, v, side, gauges = self._log.row(i)
            if ts > end:
                break
            out.append((ts, tuple(_row_value(v, side, gauges, k) for k in names)))
        return out

    def since(self, start: float, end: float = math.inf) -> list[Scrape]:
        """The scrapes with start <= ts <= end, rebuilding only those (a bisect on the times)."""
        out = []
        for i in range(self._first_at(start), len(self._log)):
            s = self._get(i)
            if s.ts > end:
                break
            out.append(s)
        return out

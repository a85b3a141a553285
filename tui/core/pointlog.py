"""A replica's derived points, (ts, ReplicaMetrics), oldest first, bounded like a deque.

An hour of points is most of a replica's history: as objects each costs ~800 bytes (a
ReplicaMetrics of boxed floats, its tuple, its timestamp). Only the newest `keep` points stay
objects (the diagnosis tracks its last point by identity); older ones are packed into one
fixed-stride array of doubles, exact, and rebuilt on demand for the few readers that iterate
old points (verdict replay, plots, the triage look-back).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import fields

from .model import ReplicaMetrics

Point = tuple[float, ReplicaMetrics]
_NAMES = tuple(f.name for f in fields(ReplicaMetrics))
_STRIDE = len(_NAMES)


class PointLog(Sequence):
    __slots__ = ("maxlen", "keep", "_recent", "_ts", "_vals", "_none", "_ints", "_odd", "_head", "_n")

    def __init__(self, maxlen: int, keep: int = 64) -> None:
        self.maxlen = maxlen
        self.keep = max(1, min(keep, maxlen))
        self._recent: deque[Point] = deque()
        # Packed old points: a ring of `maxlen - keep` rows, grown as points arrive. Per row its
        # timestamp, one double per field, and bit masks of the fields that were None / ints.
        self._ts = array("d")
        self._vals = array("d")
        self._none = array("Q")
        self._ints = array("Q")
        self._odd: dict[int, Point] = {}  # rows with a value that is no float or int, kept whole
        self._head = 0  # ring slot of the oldest packed row
        self._n = 0  # packed rows

    def append(self, point: Point) -> None:
        self._recent.append(point)
        if len(self._recent) > self.keep:
            self._pack(self._recent.popleft())

    def _pack(self, point: Point) -> None:
        cap = self.maxlen - self.keep
        if cap <= 0:
            return
        if self._n == cap:  # full: the oldest row makes way
            slot = self._head
            self._head = (self._head + 1) % cap
        else:
            slot = (self._head + self._n) % cap
            self._n += 1
        ts, m = point
        none = ints = 0
        row = [0.0] * _STRIDE
        odd = False
        for i, name in enumerate(_NAMES):
            v = getattr(m, name)
            if v is None:
                none |= 1 << i
            elif type(v) is float:
                row[i] = v
            elif type(v) is int and abs(v) < 1 << 53:
                row[i] = float(v)
                ints |= 1 << i
            else:
                odd = True
        self._odd.pop(slot, None)
        if odd:
            self._odd[slot] = point
        if slot == len(self._ts):  # still growing
            self._ts.append(ts)
            self._vals.extend(row)
            self._none.append(none)
            self._ints.append(ints)
        else:
            self._ts[slot] = ts
            self._vals[slot * _STRIDE:(slot + 1) * _STRIDE] = array("d", row)
            self._none[slot] = none
            self._ints[slot] = ints

    def frozen(self) -> PointLog:
        """An independent copy (the packed rows copied as memory, not rebuilt): a snapshot."""
        new = PointLog(self.maxlen, self.keep)
        new._recent = deque(self._recent)
        new._ts, new._vals = array("d", self._ts), array("d", self._vals)
        new._none, new._ints = array("Q", self._none), array("Q", self._ints)
        new._odd, new._head, new._n = dict(self._odd), self._head, self._n
        return new

    def _row(self, i: int) -> Point:
        slot = (self._head + i) % (self.maxlen - self.keep)
        odd = self._odd.get(slot)
        if odd is not None:
            return odd
        none, ints = self._none[slot], self._ints[slot]
        base = slot * _STRIDE
        vals = self._vals[base:base + _STRIDE]
        out = [None if none >> j & 1 else (int(v) if ints >> j & 1 else v) for j, v in enumerate(vals)]
        return (self._ts[slot], ReplicaMetrics(*out))

    def __len__(self) -> int:
        return self._n + len(self._recent)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("point index out of range")
        return self._row(i) if i < self._n else self._recent[i - self._n]

    def __iter__(self) -> Iterator[Point]:
        for i in range(self._n):
            yield self._row(i)
        yield from self._recent

    def __reversed__(self) -> Iterator[Point]:
        yield from reversed(self._recent)
        for i in range(self._n - 1, -1, -1):
            yield self._row(i)

    def __bool__(self) -> bool:
        return bool(self._recent)

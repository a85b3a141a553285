"""Replay a scrape log through the live pipeline: a Source whose clock is the recording's.

The log is cut into polls exactly as `kvwatch diagnose` cuts it (time order, a replica seen again
starts the next poll), and each poll goes through `Monitor.ingest` on its own, so the replayed
screens, the offline diagnosis and the live session that recorded the log all compute the same
verdicts. The verdict at time t uses only the scrapes up to t: stepping back or seeking rebuilds
a fresh Monitor from the first poll (`rebuild`), never reuses state from later.

Rebuilding from the start costs a fraction of a millisecond per scrape, which is seconds for an
hour of a large fleet, so the state after every `checkpoint_every` polls is kept (a copy of the
Monitor as rebuilt from the start) and a step back replays only from the nearest one.

Playback: recording time advances at `speed` recorded seconds per wall second while playing;
`poll()` hands out at most one due poll per call (the Source contract: one Scrape per replica per
poll), and `due()` says whether another is waiting. Long silences in a recording (kvwatch was
stopped for an hour) are skipped instead of waited out.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import re
import statistics
import time
from collections import deque
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable

from ..diagnosis import export_state, import_state
from ..model import Scrape
from ..monitor import Monitor
from ..offline import polls
from ..record.reader import LogProblem, read_log


class ReplaySource:
    def __init__(
        self,
        scrapes: Iterable[Scrape],
        speed: float = 1.0,
        *,
        description: str = "replay",
        clock: Callable[[], float] = time.monotonic,
        problems: Iterable[LogProblem] = (),
    ) -> None:
        if not speed > 0:
            raise ValueError("speed must be positive")
        ordered = sorted(scrapes, key=lambda s: s.ts)  # stable, as offline diagnosis sorts
        self.rounds: list[tuple[Scrape, ...]] = [tuple(b) for b in polls(ordered)]
        self.times: list[float] = [max(s.ts for s in r) for r in self.rounds]
        self.replicas = sorted({s.replica for r in self.rounds for s in r})
        self.problems = list(problems)
        self.description = description
        self.speed = speed
        self._clock = clock
        self.pos = 0  # polls handed out so far
        self.playing = True
        steps = [b - a for a, b in zip(self.times, self.times[1:]) if b > a]
        self.interval = statistics.median(steps) if steps else 1.0  # typical recorded refresh
        self.max_gap = max(30.0, 10 * self.interval)  # silences longer than this are skipped
        self._rec_anchor = self.times[0] if self.times else 0.0
        self._wall_anchor = clock()
        # At most ~200 checkpoints, each holding references to the history already in memory.
        self.checkpoint_every = max(20, len(self.rounds) // 200)
        self._checkpoints: dict[int, tuple[Monitor, dict[str, Any]]] = {}
        self._checkpoint_key: tuple | None = None

    @classmethod
    def open(cls, path: str | Path, speed: float = 1.0, **kw) -> "ReplaySource":
        """Read a scrape log (plain or gzip, cut last line tolerated). OSError if unreadable."""
        problems: list[LogProblem] = []
        scrapes = list(read_log(str(path), problems.append))
        desc = kw.pop("description", None)
        src = cls(scrapes, speed, problems=problems, description=desc or "", **kw)
        if not desc:
            src.description = f"replay {Path(path).name} · {len(src.replicas)} replicas"
        return src

    # -- Source protocol ---------------------------------------------------------------
    async def start(self) -> None:
        pass

    async def poll(self) -> list[Scrape]:
        """The next poll if it is due by the playback clock, else nothing."""
        if not self.due():
            return []
        return self.take()

    async def close(self) -> None:
        pass

    # -- playback clock ----------------------------------------------------------------
    @property
    def start_ts(self) -> float:
        return self.times[0] if self.times else 0.0

    @property
    def end_ts(self) -> float:
        return self.times[-1] if self.times else 0.0

    @property
    def position_ts(self) -> float:
        """Recording time of the last poll handed out (the start before any)."""
        return self.times[self.pos - 1] if self.pos else self.start_ts

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.rounds)

    def recording_now(self) -> float:
        if not self.playing:
            return self._rec_anchor
        return self._rec_anchor + (self._clock() - self._wall_anchor) * self.speed

    def _anchor(self, rec: float) -> None:
        self._rec_anchor, self._wall_anchor = rec, self._clock()

    def due(self) -> bool:
        if self.at_end or not self.playing:
            return False
        nxt, now = self.times[self.pos], self.recording_now()
        if nxt - now > self.max_gap:  # a silence in the recording: jump over it
            self._anchor(nxt - self.interval)
            now = self.recording_now()
        return nxt <= now

    def take(self) -> list[Scrape]:
        """Hand out the next poll regardless of the clock (stepping, seeking, headless)."""
        if self.at_end:
            return []
        batch = list(self.rounds[self.pos])
        self.pos += 1
        if not self.playing or self.recording_now() < self.position_ts:
            self._anchor(self.position_ts)
        return batch

    def pause(self) -> None:
        if self.playing:
            self._anchor(max(self.position_ts, min(self.recording_now(), self._next_ts())))
            self.playing = False

    def play(self) -> None:
        if not self.playing:
            self._anchor(self.position_ts)
            self.playing = True

    def set_speed(self, speed: float) -> None:
        if not speed > 0:
            raise ValueError("speed must be positive")
        self._anchor(self.recording_now())
        self.speed = speed

    def _next_ts(self) -> float:
        return self.times[self.pos] if not self.at_end else self.end_ts

    # -- seeking -------------------------------------------------------------------------
    def index_at(self, ts: float) -> int:
        """How many polls lie at or before recording time `ts`."""
        return bisect.bisect_right(self.times, ts)

    def seek_index(self, k: int) -> None:
        """Position after `k` polls (the caller rebuilds its Monitor: see `rebuild`)."""
        self.pos = max(0, min(len(self.rounds), k))
        self._anchor(self.position_ts)

    # -- checkpoints -----------------------------------------------------------------------
    def _key(self, mon: Monitor) -> tuple:
        return (mon.thresholds, mon.windows, mon.history_len)

    def remember(self, mon: Monitor) -> None:
        """Call after `mon` ingested the poll at `pos` (from the start, in order)."""
        if self.pos % self.checkpoint_every or self.pos in self._checkpoints:
            return
        key = self._key(mon)
        if key != self._checkpoint_key:
            self._checkpoints, self._checkpoint_key = {}, key
        self._checkpoints[self.pos] = (clone_monitor(mon), _trackers(mon))

    def restore(self, like: Monitor, k: int) -> tuple[int, Monitor]:
        """The Monitor after the nearest checkpoint at or before `k` (fresh at 0), and its index."""
        best = 0
        if self._key(like) == self._checkpoint_key:
            best = max((i for i in self._checkpoints if i <= k), default=0)
        if not best:
            return 0, fresh_monitor(like, self)
        saved, trackers = self._checkpoints[best]
        mon = clone_monitor(saved)
        _install(mon, trackers)
        return best, mon


def _frozen(obj: Any) -> bool:
    if obj is None or isinstance(obj, (str, bytes, int, float, bool, tuple, frozenset)):
        return True
    return dataclasses.is_dataclass(obj) and obj.__dataclass_params__.frozen


def _clone(obj: Any, depth: int) -> Any:
    """Copy mutable containers and objects `depth` levels down; immutable values are shared."""
    if _frozen(obj) or depth <= 0 or callable(obj):
        return obj
    if isinstance(obj, deque):
        return deque((_clone(x, depth - 1) for x in obj), obj.maxlen)
    if isinstance(obj, dict):
        return {k: _clone(v, depth - 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone(x, depth - 1) for x in obj]
    if isinstance(obj, set):
        return set(obj)
    new = copy.copy(obj)
    for name in _attrs(obj):
        setattr(new, name, _clone(getattr(obj, name), depth - 1))
    return new


def _attrs(obj: Any) -> list[str]:
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names += [n for n in getattr(cls, "__slots__", ()) if hasattr(obj, n) and n != "__weakref__"]
    return names


def _trackers(mon: Monitor) -> dict[str, Any]:
    """The diagnosis' per-history verdict state machines, so a restored copy carries on from
    them instead of re-deriving them from the retained window."""
    out = {}
    for name, h in mon.histories.items():
        state = export_state(h)
        if state is not None:
            out[name] = state
    return out


def _install(mon: Monitor, trackers: dict[str, Any]) -> None:
    for name, state in trackers.items():
        h = mon.histories.get(name)
        if h is not None:
            import_state(h, state)


def clone_monitor(mon: Monitor) -> Monitor:
    """An independent copy of `mon` (histories, verdict memory, latest scrapes), same source."""
    new = copy.copy(mon)
    for name in _attrs(mon):
        if name not in ("source", "on_scrapes"):
            setattr(new, name, _clone(getattr(mon, name), 5))
    return new


def fresh_monitor(like: Monitor, source: ReplaySource) -> Monitor:
    return Monitor(source, thresholds=like.thresholds, windows=like.windows, history_len=like.history_len)


def rebuild(like: Monitor, source: ReplaySource, k: int) -> Monitor:
    """A new Monitor that has seen exactly the first `k` polls, as if played from the start
    (resumed from the nearest checkpoint at or before k, itself built from the start)."""
    k = max(0, min(k, len(source.rounds)))
    start, mon = source.restore(like, k)
    mon.source = source
    source.seek_index(start)
    while source.pos < k:
        mon.ingest(source.take())
        source.remember(mon)
    source.seek_index(k)
    return mon


def verdicts(mon: Monitor) -> dict[str, str]:
    return {r.name: r.verdict for r in mon.state.replicas}


def next_change(mon: Monitor, source: ReplaySource) -> list[tuple[str, str, str]] | None:
    """Ingest polls into `mon` until some replica's verdict changes; the changes as
    (replica, before, after), or None (and `mon` untouched in effect) when none is left.

    The caller gets back the same Monitor advanced in place; on None it should rebuild to the
    position it started from (the polls were consumed)."""
    before = verdicts(mon)
    while not source.at_end:
        mon.ingest(source.take())
        source.remember(mon)
        now = verdicts(mon)
        changed = [(n, before[n], v) for n, v in now.items() if n in before and before[n] != v]
        if changed:
            return changed
        before.update(now)
    return None


# -- seek expressions ------------------------------------------------------------------------
_REL = re.compile(r"^([+-])\s*((?:\d+(?:\.\d+)?\s*[hms]?\s*)+)$")
_DUR = re.compile(r"(\d+(?:\.\d+)?)\s*([hms]?)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}

SEEK_HELP = ("HH:MM[:SS] (recording's clock), YYYY-MM-DD HH:MM[:SS], +30s / -2m / +1h5m "
             "(from here), 25% (of the recording), start, end")


def _duration(body: str) -> float:
    return sum(float(n) * _UNIT[u] for n, u in _DUR.findall(body))


def parse_seek(text: str, position: float, start: float, end: float) -> float:
    """Recording time for what the user typed in the seek prompt; ValueError explains a typo.

    Clock times are local, like the header; a bare HH:MM is looked for on the days the recording
    covers, nearest to the current position."""
    s = text.strip().lower()
    if not s:
        raise ValueError("nothing typed")
    if s in ("start", "begin", "^", "0%"):
        return start
    if s in ("end", "$", "100%"):
        return end
    m = _REL.match(s)
    if m:
        d = _duration(m.group(2))
        return position + d if m.group(1) == "+" else position - d
    if s.endswith("%"):
        try:
            f = float(s[:-1])
        except ValueError:
            raise ValueError(f"not a percentage: {text!r}") from None
        if not 0 <= f <= 100:
            raise ValueError("a percentage must be 0-100")
        return start + (end - start) * f / 100.0
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"):
        try:
            return datetime.strptime(s, fmt).timestamp()
        except ValueError:
            pass
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            t = datetime.strptime(s, fmt).time()
        except ValueError:
            continue
        here = datetime.fromtimestamp(position)
        first, last = datetime.fromtimestamp(start).date(), datetime.fromtimestamp(end).date()
        days = [first + timedelta(days=i) for i in range((last - first).days + 1)] or [here.date()]
        cands = [datetime.combine(d, t).timestamp() for d in days]
        inside = [c for c in cands if start <= c <= end] or cands
        return min(inside, key=lambda c: abs(c - position))
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"cannot read {text!r}; try {SEEK_HELP}") from None
    return v if v > 1e8 else start + v  # a unix time, or seconds from the start

"""Replay a scrape log: a Source whose clock is the recording's.

The log is cut into polls exactly as `kvwatch diagnose` cuts it (time order, a replica seen again
starts the next poll). This source only hands out the recorded polls and keeps the position in
them; stepping, seeking and "next verdict change" rebuild a Monitor from these polls in the
replay controller above the monitor (`tui.core.replay`), which also keeps its checkpoints here.

Playback: recording time advances at `speed` recorded seconds per wall second while playing;
`poll()` hands out at most one due poll per call (the Source contract: one Scrape per replica per
poll), and `due()` says whether another is waiting. Long silences in a recording (kvwatch was
stopped for an hour) are skipped instead of waited out.
"""

from __future__ import annotations

from itertools import pairwise
import bisect
import heapq
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..model import Scrape
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
        self.interval = median_interval(self.times)  # typical recorded refresh
        self.max_gap = max(30.0, 10 * self.interval)  # silences longer than this are skipped
        self._rec_anchor = self.times[0] if self.times else 0.0
        self._wall_anchor = clock()
        # At most ~200 checkpoints, each holding references to the history already in memory.
        self.checkpoint_every = max(20, len(self.rounds) // 200)
        self._checkpoints: dict[int, Any] = {}  # poll index -> the replay controller's saved state
        self._checkpoint_key: Any = None

    @classmethod
    def open(cls, path: str | Path, speed: float = 1.0, **kw: Any) -> "ReplaySource":
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
        """Position after `k` polls (the caller rebuilds its Monitor: see `replay.rebuild`)."""
        self.pos = max(0, min(len(self.rounds), k))
        self._anchor(self.position_ts)

    # -- checkpoints -----------------------------------------------------------------------
    # The replay controller (`tui.core.replay`) keeps its Monitor's state here by poll index;
    # to the source it is opaque, stored under a key (what the state depends on) and dropped
    # when the key changes.
    def wants_checkpoint(self) -> bool:
        """Whether the state after the current poll should be kept."""
        return not (self.pos % self.checkpoint_every or self.pos in self._checkpoints)

    def keep(self, key: Any, state: Any) -> None:
        """Keep `state` as the state after the current poll."""
        if key != self._checkpoint_key:
            self._checkpoints, self._checkpoint_key = {}, key
        self._checkpoints[self.pos] = state

    def nearest(self, key: Any, k: int) -> tuple[int, Any]:
        """The kept state at the nearest poll index at or before `k` under `key`; (0, None)
        when there is none."""
        best = 0
        if key == self._checkpoint_key:
            best = max((i for i in self._checkpoints if i <= k), default=0)
        return (best, self._checkpoints[best]) if best else (0, None)


def median_interval(times: list[float]) -> float:
    """The typical step between consecutive poll times (1 s when there is none)."""
    steps = [b - a for a, b in pairwise(times) if b > a]
    return statistics.median(steps) if steps else 1.0


REORDER_WINDOW = 4096  # scrapes held back to put a recording's local disorder in time order


def in_time_order(scrapes: Iterable[Scrape], window: int = REORDER_WINDOW) -> Iterator[Scrape]:
    """`scrapes` by time (stable), holding at most `window` of them: a recording is written in
    time order but for local disorder (a slow replica's scrape lands late), so a bounded
    reorder buffer gives what sorting the whole file gives, in memory that does not grow with
    the file. A scrape later than the window allows comes out where it is, late."""
    heap: list[tuple[float, int, Scrape]] = []
    for i, s in enumerate(scrapes):
        heapq.heappush(heap, (s.ts, i, s))
        if len(heap) > window:
            yield heapq.heappop(heap)[2]
    while heap:
        yield heapq.heappop(heap)[2]


def polls(scrapes: Iterable[Scrape]) -> Iterable[list[Scrape]]:
    """Group time-ordered scrapes into polls: a replica seen again starts the next poll."""
    batch: list[Scrape] = []
    seen: set[str] = set()
    for s in scrapes:
        if s.replica in seen:
            yield batch
            batch, seen = [], set()
        batch.append(s)
        seen.add(s.replica)
    if batch:
        yield batch

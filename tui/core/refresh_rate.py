"""The refresh rate collection actually keeps, against the configured one.

A refresh that takes longer than the interval (a slow source, a busy machine) lowers the rate
without any error: the header says so instead of falling behind silently (issue 14)."""

from __future__ import annotations

import time
from collections import deque
from typing import Callable


class RefreshMeter:
    """Completed refreshes per second over the last `window` seconds.

    `behind()` is the achieved rate only when it is below `slack` of the configured one, and
    only once the refreshes span half the window: a start-up or one slow refresh says nothing."""

    def __init__(self, interval: float, window: float = 10.0, slack: float = 0.9,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.window = window
        self.slack = slack
        self.clock = clock
        self._ticks: deque[float] = deque()

    def tick(self) -> None:
        now = self.clock()
        self._ticks.append(now)
        while len(self._ticks) > 2 and now - self._ticks[1] >= self.window:
            self._ticks.popleft()  # keeps one tick at or beyond the window's start

    def achieved(self) -> float | None:
        if len(self._ticks) < 3:
            return None
        span = self._ticks[-1] - self._ticks[0]
        if span < self.window / 2:
            return None
        return (len(self._ticks) - 1) / span

    def behind(self) -> float | None:
        rate = self.achieved()
        if rate is None or self.interval <= 0 or rate >= self.slack / self.interval:
            return None
        return rate

    def status(self) -> str:
        """'' while collection keeps up; else e.g. 'behind: 0.59/s of 1/s'."""
        rate = self.behind()
        return "" if rate is None else f"behind: {rate:.2g}/s of {1 / self.interval:.2g}/s"

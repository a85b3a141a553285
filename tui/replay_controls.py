"""Replay controls behind one object: the app reaches the recording only through `app.replay`.

It holds the replay's Monitor, because going back rebuilds it from the start of the recording
(a History only grows); the app reads `replay.monitor` after a move. Every call into the
replay source and its helpers is here, so rewiring replay is an edit to this module only.
"""

from __future__ import annotations

import asyncio

from tui.core.monitor import Monitor
from tui.core.replay import next_change, rebuild, remember
from tui.core.sources.replay import ReplaySource

Change = tuple[str, str, str]  # (replica, verdict before, verdict after)


class ReplayControls:
    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    @property
    def source(self) -> ReplaySource:
        source = self.monitor.source
        assert isinstance(source, ReplaySource)  # a replay's monitor reads a recording
        return source

    @property
    def position_ts(self) -> float:
        return self.source.position_ts

    def status(self) -> tuple[str, str]:
        """(mode, status) for the header: playing or paused, speed and position."""
        src = self.source
        return ("replay" if src.playing else "replay-paused", f"{src.speed:g}x {src.pos}/{len(src.rounds)}")

    async def advance(self) -> int:
        """Feed the polls now due to the Monitor, one at a time; how many were fed."""
        src, n = self.source, 0
        while src.due():
            await self.monitor.refresh()
            remember(self.monitor, src)
            n += 1
            if n % 50 == 0:
                await asyncio.sleep(0)  # a fast replay must not starve the keyboard
        return n

    def stop_at_end(self) -> bool:
        """Pause when playback reached the end; True when it just did."""
        if self.source.at_end and self.source.playing:
            self.source.pause()
            return True
        return False

    def toggle(self) -> None:
        src = self.source
        if src.playing:
            src.pause()
        else:
            if src.at_end:
                self.goto(1)
            src.play()

    def goto(self, k: int) -> None:
        """Show the recording after its first k polls (k >= 1), paused; going back rebuilds."""
        src = self.source
        src.pause()
        k = max(1, min(k, len(src.rounds)))
        if k > src.pos:
            while src.pos < k:
                self.monitor.ingest(src.take())
                remember(self.monitor, src)
        elif k < src.pos:
            self.monitor = rebuild(self.monitor, src, k)

    def step(self, delta: int) -> str | None:
        """Move `delta` polls; a notice when already at the end or the start."""
        src = self.source
        note = None
        if delta > 0 and src.at_end:
            note = "end of the recording"
        elif delta < 0 and src.pos <= 1:
            note = "start of the recording"
        self.goto(src.pos + delta)
        return note

    def next_change(self) -> list[Change] | None:
        """Play forward, paused, to the next verdict change; None (and stay put) when none."""
        src = self.source
        src.pause()
        k0 = src.pos
        changes = next_change(self.monitor, src)
        if changes is None:
            self.monitor = rebuild(self.monitor, src, k0)
        return changes

    def index_at(self, ts: float) -> int:
        return self.source.index_at(ts)

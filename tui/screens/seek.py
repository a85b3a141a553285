"""Replay: the seek prompt (a time, an offset or a percentage of the recording)."""

from __future__ import annotations

import time

from textual import on
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from widgets.tint import TintedOnce

from tui.core.replay import SEEK_HELP, parse_seek
from tui.core.sources.replay import ReplaySource


def _clock(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


class SeekScreen(TintedOnce, ModalScreen[float | None]):
    """Returns the recording time to go to, or None when cancelled."""

    BINDINGS = bindings("seek")
    DEFAULT_CSS = """
    SeekScreen { align: center middle; }
    SeekScreen > Vertical { width: 76; max-width: 98%; height: auto; border: round $primary;
        background: $surface; padding: 0 1; }
    SeekScreen #seek-error { color: $error; height: auto; }
    """

    def __init__(self, source: ReplaySource) -> None:
        super().__init__()
        self.source = source

    def compose(self) -> ComposeResult:
        s = self.source
        with Vertical():
            yield Static(f"[b]seek[/b]  recording {_clock(s.start_ts)} .. {_clock(s.end_ts)}\n"
                         f"now at {_clock(s.position_ts)}", markup=True)
            yield Input(placeholder="e.g. 14:05, +30s, -2m, 50%, end", id="seek-input")
            yield Static(SEEK_HELP, id="seek-help", classes="dim")
            yield Static("", id="seek-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        s = self.source
        try:
            ts = parse_seek(event.value, s.position_ts, s.start_ts, s.end_ts)
        except ValueError as e:
            self.query_one("#seek-error", Static).update(str(e))
            return
        if ts < s.start_ts - 1 or ts > s.end_ts + 1:
            self.query_one("#seek-error", Static).update(
                f"{_clock(ts)} is outside the recording ({_clock(s.start_ts)} .. {_clock(s.end_ts)})")
            return
        self.dismiss(ts)

    def action_cancel(self) -> None:
        self.dismiss(None)

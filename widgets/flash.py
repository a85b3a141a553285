"""The flash line (k9s): the latest message on the bottom row of the screen, cleared after its
timeout. It takes a row of its own (`split: bottom`), so a message never covers a button, the
evidence or the table the way stacked toasts did."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual.timer import Timer
from textual.widgets import Static

from .format import asciify

_MARK = {"warning": ("! ", "$warning"), "error": ("✗ ", "$error")}


@dataclass(frozen=True)
class Flash:
    text: Text
    severity: str  # "information", "warning", "error"
    until: float  # monotonic

    @classmethod
    def of(cls, message: str, title: str, severity: str, timeout: float, markup: bool) -> Flash:
        body = Text.from_markup(message) if markup else Text(message)
        body = Text(" · ").join(line for line in body.split("\n") if line.plain.strip()) or body
        t = Text(no_wrap=True, overflow="ellipsis")
        mark = _MARK.get(severity)
        if mark:
            t.append(mark[0], style="bold")
        if title:
            t.append(f"{title}: ", style="bold")
        t.append_text(body)
        return cls(t, severity, time.monotonic() + timeout)


class FlashBar(Static):
    DEFAULT_CSS = """
    FlashBar { split: bottom; height: 1; width: 100%; padding: 0 1; background: $panel;
        text-wrap: nowrap; text-overflow: ellipsis; }
    FlashBar.-warning { color: $warning; }
    FlashBar.-error { color: $error; text-style: bold; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("", **kw)
        self.flash: Flash | None = None
        self.ascii = False
        self._timer: Timer | None = None

    def show(self, flash: Flash | None) -> None:
        """Show `flash` until its time is up (None, or a flash already over: blank)."""
        if flash is not None and flash.until <= time.monotonic():
            flash = None
        self.flash = flash
        for sev in ("warning", "error"):
            self.set_class(flash is not None and flash.severity == sev, f"-{sev}")
        # one row whatever it says (height 1, width 100%): no new layout of the screen
        if flash is None:
            self.update("", layout=False)
            return
        self.update(asciify(flash.text) if self.ascii else flash.text, layout=False)
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(max(0.05, flash.until - time.monotonic()), self._expire)

    def _expire(self) -> None:
        if self.flash is not None and self.flash.until <= time.monotonic() + 0.01:
            self.show(None)

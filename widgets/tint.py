"""A modal screen's dimmed view of the screen under it, each style tinted once.

Textual draws a screen with a translucent background (kvwatch's modal screens: help, confirm,
prompt, seek) over the screen under it, tinting every segment of that screen anew on every
frame: a new Style blended from two colours per segment, ~1,300 segments at 160x45 with a
64-replica table, where the screen has a few dozen distinct styles. The tint of a style is
computed once here, by Textual's own code (`BackgroundScreen.process_segments` on that one
style), and looked up after: the same cells.
"""

from __future__ import annotations

from typing import Iterable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.renderables.background_screen import BackgroundScreen

MAX_TINTS = 4096  # styles remembered before starting again (a theme change makes new ones)
_tints: dict[tuple[Style | None, Color], Style | None] = {}


def tinted(segments: Iterable[Segment], color: Color) -> Iterable[Segment]:
    """`segments` as `BackgroundScreen.process_segments` tints them, each style's tint computed once."""
    process = BackgroundScreen.process_segments
    memo = _tints
    for segment in segments:
        text, style, control = segment
        if control:
            yield segment
            continue
        key = (style, color)
        done = memo.get(key)
        if done is None:
            done = next(iter(process([Segment(" ", style)], color))).style
            if len(memo) >= MAX_TINTS:
                memo.clear()
            memo[key] = done
        yield Segment(text, done)


class MemoTint(BackgroundScreen):
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        return tinted(console.render(self.screen._compositor, options), self.color)


class TintedOnce:
    """For a Screen with a translucent background: the screen under it drawn as Textual draws
    it (Screen.render), with each style's tint computed once."""

    def render(self):
        drawn = super().render()  # type: ignore[misc]
        if type(drawn) is BackgroundScreen:
            return MemoTint(drawn.screen, drawn.color)
        return drawn


"""A plotext plot painted straight from plotext's ANSI text: the same lines and styles as
textual-plotext's PlotextPlot (which parses the text into a Rich Text, converts that to Textual
content and renders it: ~3 ms a plot, as long as building the plot), in a quarter of the time.

plotext writes each run of characters after its own SGR escape, and a plot has a handful of
distinct ones: each is turned into the style Textual would give it once, then reused."""

from __future__ import annotations

import re
from functools import lru_cache

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.strip import Strip
from textual.style import Style
from textual.widget import _RenderCache
from textual_plotext import PlotextPlot

from widgets import plotext_fast

plotext_fast.install()  # the same plots, built in about half the time
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")


class FastPlot(PlotextPlot):
    drawn = False  # whether a series was ever set (a blank figure needs no clearing)

    def _render_content(self) -> None:
        width, height = self.size
        plot = self._plot
        plot.plotsize(width, height)  # as PlotextPlot.render sizes and themes it
        plot._set_size(width, height)
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        strips = ansi_strips(plot.build(), width, height, self.visual_style)
        self._render_cache = _RenderCache(self.size, strips)
        self._dirty_regions.clear()


def _run_style(sgr: str, base: Style, cache: dict[str, RichStyle]) -> RichStyle:
    """The style Textual gives text after the escapes `sgr` (Rich's parse of them, laid over
    the widget's style as Content lays its spans)."""
    found = cache.get(sgr)
    if found is None:
        spans = Text.from_ansi(sgr + "x").spans
        style = base + Style.from_rich_style(spans[0].style) if spans else base  # type: ignore[arg-type]
        found = cache[sgr] = style.rich_style
    return found


@lru_cache(maxsize=8192)
def _offset(x: int, y: int) -> RichStyle:
    return RichStyle.from_meta({"offset": (x, y)})


def ansi_strips(ansi: str, width: int, height: int, base: Style) -> list[Strip]:
    cache: dict[str, RichStyle] = {}
    plain = base.rich_style
    strips = []
    for y, line in enumerate(ansi.split("\n")[:height]):
        segments = []
        sgr = ""
        x = 0
        for part in _SGR.split(line):
            if not part:
                continue
            if part[0] == "\x1b":
                sgr = "" if part in ("\x1b[0m", "\x1b[m") else sgr + part
            else:
                # each run says where it starts (text selection reads it), as Content's do
                style = (_run_style(sgr, base, cache) if sgr else plain) + _offset(x, y)
                segments.append(Segment(part, style))
                x += cell_len(part)
        strips.append(Strip(segments).adjust_cell_length(width, plain))
    while len(strips) < height:
        strips.append(Strip.blank(width, plain))
    return strips

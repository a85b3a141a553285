"""The detail's plots are painted from plotext's text directly (widgets/fast_plot.py): line for
line, segment for segment, style for style what textual-plotext's own path paints, in each
theme and in ASCII."""

from __future__ import annotations

import pytest
from tests.ui.conftest import make_app, prime
from tests.waits import eventually
from tui.screens.detail import PLOTS, DetailScreen
from textual_plotext import PlotextPlot

from widgets.fast_plot import FastPlot


@pytest.mark.parametrize("theme,ascii", [("kvwatch-dark", False), ("kvwatch-light", False),
                                         ("kvwatch-high-contrast", True)])
async def test_fast_plots_paint_what_textual_plotext_paints(theme, ascii):
    app = make_app(ascii=ascii)
    async with app.run_test(size=(160, 45)) as pilot:
        app.theme = theme
        await prime(pilot, 6)
        await app.push_screen(DetailScreen("llama-8b-7d9f-abcde"))
        await eventually(lambda: isinstance(app.screen, DetailScreen) and app.screen._pts)
        await pilot.pause()
        plots = list(app.screen.query(FastPlot))
        assert len(plots) == len(PLOTS)
        for plot in plots:
            width, height = plot.size
            assert width and height, plot.id
            FastPlot._render_content(plot)
            fast = plot._render_cache.lines
            PlotextPlot._render_content(plot)  # textual-plotext's own: render(), then Textual's path
            ref = plot._render_cache.lines
            assert len(fast) == len(ref) == height, plot.id
            assert [list(s) for s in fast] == [list(s) for s in ref], plot.id
            assert "".join(s.text for s in fast).strip(), plot.id  # something drawn

"""At 120x30 the detail screen never draws plots too short to hold data (empty frames with
upside-down axis labels): each plot shown is tall enough, or the numbers are shown instead."""

from __future__ import annotations

import pytest

from tests.ui.conftest import prime
from tests.ui.test_80x24 import demo_like_app
from tui.screens.detail import DetailScreen


@pytest.mark.parametrize("size", [(120, 30), (160, 45), (100, 36)])
async def test_plots_are_readable_or_replaced_by_numbers(tmp_path, size):
    app = demo_like_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await prime(pilot, 4)
        await app.push_screen(DetailScreen("llama-8b-7d9f-abcde"))
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        if screen.query_one("#plots").display:
            heights = [p.size.height for p in screen.query("PlotextPlot")]
            assert min(heights) >= 6, (size, heights)
            bottoms = [p.region.bottom for p in screen.query("PlotextPlot")]
            assert max(bottoms) <= size[1] - 1, (size, bottoms)  # above the footer, not under it
        else:
            assert screen.query_one("#plot-numbers").display

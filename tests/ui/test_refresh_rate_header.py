"""Never fall behind silently (issue 14): when refreshes take longer than the interval, the
header shows the rate collection keeps; while it keeps up, the header is unchanged."""

from __future__ import annotations

import asyncio

from tests.ui.conftest import make_app
from tests.ui.kube_app import until
from tui.core.refresh_rate import RefreshMeter
from widgets.header import FleetHeader


def slow_refreshes(app, seconds: float) -> None:
    real = app.monitor.refresh

    async def refresh():
        await asyncio.sleep(seconds)
        return await real()

    app.monitor.refresh = refresh


async def header_after_polling(app, ready) -> str:
    """The header once `ready(header text)` holds or, for a header that must stay quiet, once
    enough refreshes went by for the meter to judge (a bounded wait on state, not a time)."""
    async with app.run_test(size=(160, 30)) as pilot:
        app.poll_loop()
        header = app.screen.query_one(FleetHeader)
        await until(pilot, lambda: ready(header.text.plain), what=lambda: f"{app.refreshes} refreshes: {header.text.plain}")
        await pilot.pause()
        return header.text.plain


async def test_header_shows_the_achieved_rate_when_refreshes_fall_behind():
    app = make_app()
    app.interval = 0.05
    app.rate = RefreshMeter(0.05, window=0.4)  # 20/s wanted
    slow_refreshes(app, 0.1)  # ~9/s kept (fewer on a busy machine)
    text = await header_after_polling(app, lambda t: "behind: " in t)
    assert "behind: " in text and "/s of 20/s" in text, text
    kept = float(text.split("behind: ", 1)[1].split("/s", 1)[0])
    assert 0 < kept < 18, text


class Steps:
    """A clock that moves `step` seconds each time it is read (once per completed refresh): the
    refreshes keep the configured rate exactly, however busy the machine is."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


async def test_header_says_nothing_while_refreshes_keep_up():
    app = make_app()
    app.interval = 0.1
    app.rate = RefreshMeter(0.1, window=0.4, clock=Steps(0.1))
    text = await header_after_polling(app, lambda t: app.refreshes >= 12 and app.rate.achieved() is not None)
    assert app.rate.achieved() is not None  # the meter had enough refreshes to judge
    assert "live" in text and "behind" not in text, text

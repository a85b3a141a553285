"""Never fall behind silently (issue 14): when refreshes take longer than the interval, the
header shows the rate collection keeps; while it keeps up, the header is unchanged."""

from __future__ import annotations

import asyncio

from tests.ui.conftest import make_app
from tui.core.refresh_rate import RefreshMeter
from widgets.header import FleetHeader


def slow_refreshes(app, seconds: float) -> None:
    real = app.monitor.refresh

    async def refresh():
        await asyncio.sleep(seconds)
        return await real()

    app.monitor.refresh = refresh


async def header_after_polling(app, wait: float) -> str:
    async with app.run_test(size=(160, 30)) as pilot:
        app.poll_loop()
        await asyncio.sleep(wait)
        await pilot.pause()
        return app.screen.query_one(FleetHeader).text.plain


async def test_header_shows_the_achieved_rate_when_refreshes_fall_behind():
    app = make_app()
    app.interval = 0.05
    app.rate = RefreshMeter(0.05, window=0.4)  # 20/s wanted
    slow_refreshes(app, 0.1)  # ~9/s kept
    text = await header_after_polling(app, 1.2)
    assert "behind: " in text and "/s of 20/s" in text, text
    kept = float(text.split("behind: ", 1)[1].split("/s", 1)[0])
    assert 0 < kept < 18, text


async def test_header_says_nothing_while_refreshes_keep_up():
    app = make_app()
    app.interval = 0.1
    app.rate = RefreshMeter(0.1, window=0.4)
    text = await header_after_polling(app, 1.2)
    assert "live" in text and "behind" not in text, text

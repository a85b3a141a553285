"""A replica whose scrapes start failing: its row never says healthy, says "stale" with the age
of its values however long its name, and once down shows no old values as if they were live."""

from __future__ import annotations

from tests.ui.conftest import prime
from tests.ui.scripted import ScriptedSource
from tui.app import KvwatchApp
from tui.core.monitor import Monitor
from widgets.fleet_table import FleetTable

LONG = "llama-3-1-8b-instruct-7d9f8b6c5d-abcde"  # a real Deployment pod name: longer than the column


def _row(app, name: str) -> str:
    table = app.screen.query_one(FleetTable)
    return "".join(t.plain for t in table.get_row(name))


async def _dying(size):
    src = ScriptedSource({LONG: "healthy", "vllm-1": "healthy"}, step=5.0)
    app = KvwatchApp(Monitor(src), 1.0, autostart=False)
    return app, src


async def test_a_dead_replica_row_is_stale_with_its_age_then_blank():
    for size in ((160, 45), (120, 30), (80, 24)):
        app, src = await _dying(size)
        async with app.run_test(size=size) as pilot:
            await prime(pilot, 4)
            assert "healthy" in _row(app, LONG)
            src.profiles[LONG] = "down"  # connection refused from now on
            await prime(pilot, 1)
            row = _row(app, LONG)
            assert "healthy" not in row, (size, row)
            assert "stale 5s" in row, (size, row)  # the tag survives a long name, with the values' age
            await prime(pilot, 1)
            assert "stale 10s" in _row(app, LONG), (size, _row(app, LONG))
            await prime(pilot, 2)  # past the stale window: down
            row = _row(app, LONG)
            assert "down" in row and "healthy" not in row, (size, row)
            assert "35%" not in row and " 40" not in row, (size, row)  # the last KV / running, no longer shown


async def test_the_detail_of_a_dead_replica_says_how_old_its_values_are():
    from tui.screens.detail import DetailScreen

    app, src = await _dying((160, 45))
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        src.profiles[LONG] = "down"
        await prime(pilot, 4)  # down
        await app.push_screen(DetailScreen(LONG))
        await pilot.pause()
        text = str(app.screen.query_one("#evidence").render())
        assert "down" in text and "values of the last good scrape, 20s ago" in text, text

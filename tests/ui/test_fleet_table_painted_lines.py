"""A fleet row on screen is its replica's latest view, whichever way its cells were brought up to
date. FleetTable builds only the rows it thinks are on screen at each refresh and rebuilds the
others when they are drawn or read (widgets/fleet_table.py); a row rebuilt that way must not be
handed back as the line Textual painted from its old cells (the widget's StylesCache), or a
pressured replica reads `✓ healthy` until its row changes again."""

from __future__ import annotations

import pytest

from tests.ui.conftest import make_app, prime
from tests.ui.vtframes import Terminal
from tui.screens.fleet import FleetScreen
from widgets.fleet_table import FleetTable

FIRST, SECOND = "llama-8b-a", "llama-8b-b"  # FIRST sorts first either way: rows never move


def table_rows(lines: list[str], name: str) -> list[str]:
    return [ln for ln in lines if ln.startswith(name)]


async def _turned_unseen(pilot, monkeypatch) -> FleetTable:
    """FIRST judged kv-pressure while every refresh misjudged which rows are on screen (as a
    size or scroll offset read at the wrong moment would), so its row was left to be rebuilt."""
    app = pilot.app
    await prime(pilot, 3)
    table = app.screen.query_one(FleetTable)
    assert "healthy" in "".join(c.plain for c in table.get_row(FIRST))
    with monkeypatch.context() as m:
        m.setattr(FleetTable, "_rows_between", lambda self, y0, y1: range(0))
        app.monitor.source.profiles[FIRST] = "pressure"
        for _ in range(40):
            await prime(pilot, 1)
            if app.monitor.state.replicas[0].verdict == "kv-pressure":
                break
        else:
            raise AssertionError(f"{FIRST} never judged kv-pressure")
    assert [v.name for v in app.monitor.state.replicas] == [FIRST, SECOND]
    assert FIRST in table._stale
    return table


@pytest.mark.parametrize("size", [(80, 24), (120, 30), (160, 45)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_row_rebuilt_as_it_is_drawn_is_painted_from_its_new_cells(monkeypatch, size):
    app = make_app({FIRST: "healthy", SECOND: "healthy"})
    async with app.run_test(size=size) as pilot:
        await _turned_unseen(pilot, monkeypatch)
        term = Terminal(app, *size)
        app.screen.refresh()  # a whole repaint, as when the screen comes back
        await pilot.pause()
        last = term.of(FleetScreen)[-1]
        row = table_rows(last, FIRST)
        assert row and "kv-pressure" in row[0] and "healthy" not in row[0], "\n".join(last)


async def test_a_row_rebuilt_as_it_is_read_is_painted_again(monkeypatch):
    app = make_app({FIRST: "healthy", SECOND: "healthy"})
    async with app.run_test(size=(80, 24)) as pilot:
        table = await _turned_unseen(pilot, monkeypatch)
        term = Terminal(app, 80, 24)
        assert "kv-pressure" in "".join(c.plain for c in table.get_row(FIRST))  # read: rebuilt
        await pilot.pause()
        app.screen.refresh()
        await pilot.pause()
        last = term.of(FleetScreen)[-1]
        row = table_rows(last, FIRST)
        assert row and "kv-pressure" in row[0], "\n".join(last)

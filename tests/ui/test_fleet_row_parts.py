"""FleetTable rebuilds a row from its cells' (text, style) parts and makes again only the cells
whose parts changed (FleetTable._row, Row.made): whatever a refresh changed, every row's cells,
as DataTable holds them and as get_row hands them out, must equal a row made afresh from its
latest view (Row.made of its parts, no Text kept). Verdicts change, replicas go down and stale
and come back, the theme changes, the sort and a filter move rows, ASCII mode."""

from __future__ import annotations

import pytest
from textual.widgets.data_table import RowKey

from tests.ui.conftest import make_app, prime
from widgets.fleet_table import FleetTable, Row

KINDS = ("healthy", "pressure", "compute", "fault", "capped", "stalled", "down")
FLEET = {f"replica-{i:02d}": KINDS[i % len(KINDS)] for i in range(14)}
STEPS = (("replica-00", "pressure"), ("replica-01", "down"), ("replica-02", "healthy"), ("replica-01", "healthy"),
         ("replica-06", "compute"), ("replica-03", "stalled"), ("replica-00", "healthy"), ("replica-05", "fault"))


def _cells(texts) -> list[tuple[str, str]]:
    return [(t.plain, str(t.style), t.no_wrap) for t in texts]


def _check(table: FleetTable) -> int:
    """Every row: the table's data and get_row against a full rebuild. Returns the rows checked."""
    for name in table._order:
        want = _cells(Row.made(table._row_parts(table.views[name])))  # afresh: no Text kept
        assert _cells(table.get_row(name)) == want, name
        data = table._data[RowKey(name)]
        assert _cells(data[c.key] for c in table.ordered_columns) == want, name
        assert _cells(table._cells[name]) == want, name
    return len(table._order)


@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
async def test_rows_rebuilt_by_their_changed_cells_equal_a_full_rebuild(ascii):
    app = make_app(dict(FLEET), ascii=ascii)
    async with app.run_test(size=(160, 12)) as pilot:  # most rows below the fold: rebuilt when read
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        assert _check(table) == len(FLEET)
        profiles = app.monitor.source.profiles
        for name, kind in STEPS:
            profiles[name] = kind
            await prime(pilot, 2)
            assert _check(table) == len(FLEET)
        app.action_cycle_theme()
        await prime(pilot, 1)
        _check(table)
        screen = app.screen
        for how in ("kv", "queue", "name", "group", "severity"):
            screen.action_sort(how)
            await prime(pilot, 1)
            _check(table)
        screen.filter = "replica-0"
        screen.show_state(screen.state)
        await pilot.pause()
        assert _check(table) == 10
        screen.filter = ""
        screen.show_state(screen.state)
        await prime(pilot, 1)
        assert _check(table) == len(FLEET)

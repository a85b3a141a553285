"""Names kvwatch defined over Textual's own API (found by mypy's override checks).

FleetScreen once defined `visible(state)` over DOMNode's `visible` property, so every widget
on the fleet screen answered `visible` with a bound method instead of a bool (its parent's
value is what a widget without its own rule reports). FleetTable once kept its sort state in
`sort`, over DataTable's `sort()` method, so the table's own sort could not be called.
"""

from __future__ import annotations

from tests.ui.conftest import make_app, prime
from tui.screens.fleet import FleetScreen
from widgets.fleet_table import FleetTable


async def test_widgets_on_the_fleet_screen_report_visibility_as_a_bool():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot)
        assert isinstance(app.screen, FleetScreen)
        table = app.screen.query_one(FleetTable)
        assert app.screen.visible is True
        assert table.visible is True


async def test_the_fleet_tables_datatable_sort_is_still_callable():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot)
        table = app.screen.query_one(FleetTable)
        assert callable(table.sort)
        assert table.sort_by == ("severity", False)  # kvwatch's own sort state, under its own name


def test_a_cut_replica_name_keeps_its_distinguishing_end():
    """Pods of one workload differ only at the end of their names: a name cut to fit the column
    keeps its end, so two rows never read the same."""
    from widgets.fleet_table import _tagged

    a, b = "qwen-sg-d217a2f136-00015", "qwen-sg-d217a2f136-0001a"
    for width in (10, 16, 22):
        ca, cb = _tagged(a, "", width), _tagged(b, "", width)
        assert len(ca) == len(cb) == width and ca != cb, (width, ca, cb)
        assert ca.endswith("15") and cb.endswith("1a")
    tagged = _tagged(a, " (stale 8s)", 22)
    assert tagged.endswith(" (stale 8s)") and len(tagged) == 22 and "…" in tagged

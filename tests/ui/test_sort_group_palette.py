"""Sort and group keys show what they did, and the palette describes actions in words."""

from __future__ import annotations

from tests.ui.conftest import make_app, prime
from tui.palette import KvwatchCommands
from widgets.fleet_table import FleetTable


def _titles(app) -> dict[str, str]:
    """Column titles as drawn: cut to the column's width."""
    table = app.screen.query_one(FleetTable)
    return {str(k.value): str(c.label)[:c.width] for k, c in table.columns.items()}


async def test_sort_by_queue_shows_its_arrow_on_wait():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        await pilot.press("Q")
        await pilot.pause()
        assert "↓" in _titles(app)["waiting"], _titles(app)


async def test_group_key_toggles_grouping_off_again():
    app = make_app()
    async with app.run_test(size=(160, 36)) as pilot:
        await prime(pilot, 2)
        await pilot.press("G")
        await pilot.pause()
        assert app.screen.sort == "group"
        await pilot.press("G")
        await pilot.pause()
        assert app.screen.sort == "severity"


async def test_palette_help_is_words_not_ids():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 1)
        provider = KvwatchCommands(app.screen)
        hits = [h async for h in provider.discover()]
        assert hits
        ids = {"cycle_theme", "sort_queue", "toggle_pause", "filter"}
        assert not [h.help for h in hits if h.help in ids or "_" in (h.help or "")], [h.help for h in hits]


async def test_columns_fit_beside_the_scrollbar_at_80x24():
    """30 replicas at 80x24: the table scrolls, and its last column (TTFT, with its unit) is not
    under the scrollbar ("156" for 156 s)."""
    profiles = {f"llama-8b-{i:02d}": ("pressure", "healthy", "compute")[i % 3] for i in range(30)}
    app = make_app(profiles)
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        assert table.show_vertical_scrollbar
        assert sum(c.width for c in table.columns.values()) <= table.scrollable_content_region.width


def test_node_outlives_the_sparklines_at_120_columns():
    from widgets.fleet_table import fit_columns

    keys = [c.key for c in fit_columns(120)]
    assert "node" in keys, keys  # before any sparkline but the KV one
    assert {"node", "s_kv", "s_queue", "s_preempt"} <= {c.key for c in fit_columns(160)}


async def test_down_reason_is_inline_in_the_table_when_there_is_room():
    app = make_app()  # PROFILES has a replica whose scrapes fail
    async with app.run_test(size=(160, 36)) as pilot:
        await prime(pilot, 4)
        table = app.screen.query_one(FleetTable)
        assert "reason" in [str(k.value) for k in table.columns], _titles(app)
        cells = {str(table.get_row_at(i)[0]).strip(): str(table.get_row_at(i)[-1]).strip()
                 for i in range(table.row_count)}
        down = next(v for v in app.monitor.state.replicas if v.verdict == "down")
        assert cells[down.name], cells  # says why (e.g. "conn refused"), not blank
        assert all(cells[v.name] == "" for v in app.monitor.state.replicas if v.verdict == "healthy"), cells

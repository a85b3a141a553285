"""Snapshot tests of the screens (pytest-textual-snapshot): 120x36 and 80x24."""

from __future__ import annotations

from tests.ui.conftest import make_app, prime


async def _primed(pilot):
    await prime(pilot, 4)


async def _detail(pilot):
    await prime(pilot, 4)
    table = pilot.app.screen.query_one("FleetTable")
    row = next(i for i in range(table.row_count) if table.get_row_at(i)[0].plain.strip() == "llama-8b-7d9f-abcde")
    table.move_cursor(row=row)
    await pilot.press("enter")
    await pilot.pause()


def test_fleet_screen_120x36(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=_primed)


def test_fleet_screen_80x24(snap_compare):
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=_primed)


def test_fleet_screen_200x50(snap_compare):
    assert snap_compare(make_app(), terminal_size=(200, 50), run_before=_primed)


def test_detail_screen_120x36(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=_detail)

"""k9s table habits on the fleet screen: NODE and AGE columns, a visible sort indicator that a
second press reverses, a visible mode line for faults-only (ctrl+z) and group-by-owner (G),
"invalid regex: ..." for a bad filter, and columns that stay when no row matches."""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import replace

from tests.ui.conftest import PROFILES, prime
from tests.ui.scripted import ScriptedSource
from tui.app import KvwatchApp
from tui.core.model import PodInfo
from tui.core.monitor import Monitor
from widgets.fleet_table import FleetTable


class PodSource(ScriptedSource):
    """The scripted fleet with pods on nodes, started 90 s .. 3 h before the first poll."""

    async def poll(self):
        out = []
        for i, s in enumerate(await super().poll()):
            started = 1_700_000_000.0 - (90, 600, 3 * 3600, 7200, 45)[i % 5]
            pod = PodInfo("inference", s.replica, node=f"gpu-node-{i % 2}", started_at=started,
                          owner_kind="Deployment", owner_name=s.group)
            out.append(replace(s, pod=pod))
        return out


@asynccontextmanager
async def _fleet():
    """(app, pilot, table) of the pod fleet at 160x40 after two refreshes."""
    app = KvwatchApp(Monitor(PodSource(dict(PROFILES))), 1.0, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await prime(pilot, 2)
        yield app, pilot, app.screen.query_one(FleetTable)


def _titles(table: FleetTable) -> list[str]:
    return [str(c.label).strip() for c in table.columns.values()]


def _cells(table: FleetTable, col: str) -> dict[str, str]:
    i = [c.key for c in table._cols].index(col)
    return {table.get_row_at(r)[0].plain.strip(): table.get_row_at(r)[i].plain.strip() for r in range(table.row_count)}


async def test_node_and_age_columns():
    async with _fleet() as (app, pilot, table):
        titles = _titles(table)
        assert any(t.startswith("NODE") for t in titles) and any(t.startswith("AGE") for t in titles), titles
        nodes = _cells(table, "node")
        assert nodes["llama-8b-7d9f-abcde"] == "gpu-node-0" and nodes["llama-8b-7d9f-xyz12"] == "gpu-node-1"
        ages = _cells(table, "age")  # two polls of 5 s after the first at t0 + 5
        assert ages["llama-8b-7d9f-abcde"] == "1m40s" and ages["llama-70b-0"] == "3h0m", ages


async def test_sort_indicator_and_reverse_sort():
    async with _fleet() as (app, pilot, table):
        assert "VERDICT ↓" in _titles(table)  # the default: most severe first
        await pilot.press("N")
        await pilot.pause()
        assert "REPLICA ↑" in _titles(table) and "VERDICT ↓" not in _titles(table)
        names = [table.get_row_at(r)[0].plain.strip() for r in range(table.row_count)]
        assert names == sorted(names)
        await pilot.press("N")  # again: reversed
        await pilot.pause()
        assert "REPLICA ↓" in _titles(table)
        assert [table.get_row_at(r)[0].plain.strip() for r in range(table.row_count)] == sorted(names, reverse=True)


async def test_mode_line_for_faults_only_and_group_by_owner():
    async with _fleet() as (app, pilot, table):
        line = app.screen.query_one("#view-modes")
        assert not line.display  # nothing out of the ordinary
        await pilot.press("ctrl+z")
        await pilot.pause()
        assert line.display and "faults only" in str(line.render())
        await pilot.press("G")
        await pilot.pause()
        text = str(line.render())
        assert "faults only" in text and "grouped by owner" in text
        await pilot.press("ctrl+z")
        await pilot.pause()
        assert "faults only" not in str(line.render())


async def test_bad_regex_says_so_and_an_empty_table_keeps_its_columns():
    async with _fleet() as (app, pilot, table):
        before = _titles(table)
        await pilot.press("slash", *"[ab")
        await pilot.pause()
        line = app.screen.query_one("#view-modes")
        assert line.display and "invalid regex:" in str(line.render())
        assert "no replica matches" not in str(app.screen.query_one("#strip").render())
        await pilot.press("backspace", "backspace", "backspace", "backspace", *"zzz-nothing")
        await pilot.pause()
        assert table.row_count == 0
        assert _titles(table) == before  # the header row stays, RESTART/NODE/AGE included
        assert "no replica matches" in str(app.screen.query_one("#strip").render())

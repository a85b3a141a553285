"""Pilot-driven tests of the fleet and detail screens (real Monitor, scripted source)."""

from __future__ import annotations

from textual.widgets import Input

from tests.ui.conftest import PROFILES, make_app, prime
from tui.screens.detail import DetailScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from widgets.fleet_table import FleetTable, fit_columns
from widgets.header import PressureBanner


async def test_rows_sorted_by_severity_and_banner_names_pressured_replica():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot)
        table = app.screen.query_one(FleetTable)
        order = [table.get_row_at(i)[0].plain.strip() for i in range(table.row_count)]
        assert order[0] == "llama-8b-gone"  # down first
        assert order[1] == "node-sick"  # node-fault next
        assert order[2] == "llama-8b-7d9f-abcde"  # then kv-pressure
        assert order[-1] == "llama-8b-7d9f-xyz12"
        banner = app.screen.query_one(PressureBanner)
        assert banner.has_class("-on")
        assert "llama-8b-7d9f-abcde" in str(banner.render())
        verdicts = {table.get_row_at(i)[0].plain.strip(): table.get_row_at(i)[1].plain for i in range(table.row_count)}
        assert "kv-pressure" in verdicts["llama-8b-7d9f-abcde"]
        assert "down" in verdicts["llama-8b-gone"]


async def test_filter_narrows_rows_and_escape_clears():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot)
        table = app.screen.query_one(FleetTable)
        assert table.row_count == 5
        await pilot.press("slash")
        assert app.screen.query_one("#filter", Input).has_focus
        await pilot.press(*"70b")
        await pilot.pause()
        assert table.row_count == 1
        assert table.get_row_at(0)[0].plain.strip() == "llama-70b-0"
        await pilot.press("enter", "escape")
        await pilot.pause()
        assert table.row_count == 5
        # inverted filter
        await pilot.press("slash", "!", *"llama")
        await pilot.pause()
        assert [table.get_row_at(i)[0].plain.strip() for i in range(table.row_count)] == ["node-sick"]


async def test_enter_opens_detail_with_evidence_and_escape_returns():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot)
        table = app.screen.query_one(FleetTable)
        row = next(i for i in range(table.row_count) if table.get_row_at(i)[0].plain.strip() == "llama-8b-7d9f-abcde")
        table.move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        text = str(app.screen.query_one("#evidence").render())
        assert "KV usage 0.97 >= 0.90" in text
        assert "preemptions/s" in text
        await app.refresh_once()  # the detail view follows live refreshes
        await pilot.pause()
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)


async def test_help_lists_keys_and_q_quits():
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await prime(pilot, 1)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_pause_stops_drawing_but_collection_continues():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        await pilot.press("p")
        screen = app.screen
        drawn_ts = screen.state.ts
        await app.refresh_once()
        await pilot.pause()
        assert screen.state.ts == drawn_ts  # not redrawn
        assert app.monitor.state.ts > drawn_ts  # but collected
        await pilot.press("p")
        await pilot.pause()
        assert screen.state.ts == app.monitor.state.ts


async def test_control_characters_from_network_never_reach_the_terminal():
    app = make_app({"e\x1b[2J\x07[b]x[/b]": "pressure"})
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        name_cell = table.get_row_at(0)[0].plain
        assert "\x1b" not in name_cell and "\x07" not in name_cell
        assert "\\x1b" in name_cell and "[b]x[/b]" in name_cell  # shown literally, not interpreted


def test_columns_collapse_by_priority_at_80_columns():
    keys80 = [c.key for c in fit_columns(80)]
    for essential in ("name", "verdict", "kv", "waiting", "running", "preempt", "mem", "util", "ttft"):
        assert essential in keys80
    assert sum(c.width for c in fit_columns(80)) <= 80
    keys200 = [c.key for c in fit_columns(200)]
    assert {"s_kv", "s_queue", "s_preempt", "s_mem", "s_gpu"} <= set(keys200)


def test_restarts_cell_shows_count_and_oom():
    from tui.core.model import Finding, PodInfo, ReplicaMetrics, ReplicaView
    from widgets.fleet_table import restarts_cell

    def view(pod):
        return ReplicaView("p", "ok", Finding("healthy"), ReplicaMetrics(), {}, pod=pod)

    assert restarts_cell(view(None)) == ("–", False)
    assert restarts_cell(view(PodInfo("ns", "p", restarts=0))) == ("0", False)
    assert restarts_cell(view(PodInfo("ns", "p", restarts=2, last_termination_reason="OOMKilled",
                                      last_exit_code=137))) == ("2 OOM", True)
    assert restarts_cell(view(PodInfo("ns", "p", restarts=1, last_termination_reason="Error",
                                      last_exit_code=137))) == ("1 137", True)
    assert restarts_cell(view(PodInfo("ns", "p", restarts=1, last_termination_reason="Error",
                                      last_exit_code=1))) == ("1 1", False)


async def test_group_sort_puts_owners_together():
    from tests.ui.conftest import make_app as _make

    app = _make({"b-1": "healthy", "a-1": "pressure", "b-2": "pressure"})
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot)
        screen = app.screen
        await pilot.press("G")
        await pilot.pause()
        assert screen.sort == "group"
        table = screen.query_one(FleetTable)
        assert table.row_count == 3


def test_spare_width_goes_to_names_even_with_the_group_column():
    cols = fit_columns(200, frozenset({"reason"}))  # no row down or stale: no REASON column
    assert cols[-1].key == "group"
    assert cols[0].width > 18


async def test_a_refresh_that_lands_before_a_screen_is_composed_is_drawn_once_it_is():
    # A source that answers at once (or a slow machine composing the first screen) can deliver
    # the first refresh before the fleet screen has its widgets; that must not end the app.
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 2)
        screen = FleetScreen()
        app.push_screen(screen)  # not awaited: the screen is in the stack, not yet composed
        app.draw(app.monitor.state)
        await pilot.pause()
        assert screen.query_one(FleetTable).row_count == len(PROFILES)


async def test_a_screen_covered_by_another_is_not_drawn_until_it_is_shown_again():
    # Each refresh drew every screen in the stack: the fleet table under a replica's detail
    # was rebuilt every second for nobody. A modal (help, a confirmation) leaves the screen
    # beneath in view, so that one is still drawn; a covered one is drawn with the state on
    # screen as soon as it is shown again.
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 2)
        fleet = app.screen
        drawn = []
        real = fleet.show_state
        fleet.show_state = lambda state: (drawn.append(state), real(state))[1]
        await app.push_screen(HelpScreen())
        await prime(pilot, 2)
        assert len(drawn) == 2  # under a modal: still in view, still drawn
        app.pop_screen()
        await pilot.pause()
        drawn.clear()
        await app.push_screen(DetailScreen(next(iter(PROFILES))))
        await prime(pilot, 3)
        assert drawn == []
        last = app.monitor.state
        app.pop_screen()
        await pilot.pause()
        assert drawn and drawn[-1] is last  # shown again: the state the other screen showed
        await prime(pilot, 1)
        assert drawn[-1] is app.monitor.state is not last

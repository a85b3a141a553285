"""Operator experience: key remapping, config problems, themes, contexts, bell, screenshots, 80x24."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from tests.ui.conftest import make_app, prime
from themes import DEFAULT_THEME, MONO_THEME, THEMES
from tui.core.config import Config, ContextProfile, load_config
from tui.screens.detail import DetailScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from widgets.fleet_table import FleetTable, fit_columns
from widgets.header import FleetHeader


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


def notes(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_remapped_keys_work_and_the_old_key_does_not(tmp_path):
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text('[keys]\npause = "ctrl+o"\nhelp = "f1"\nnot_a_binding = "x"\n')
    cfg = load_config(cfg_file)
    app = make_app(config=cfg)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        await pilot.press("p")
        assert app.paused is False  # p is no longer bound
        await pilot.press("ctrl+o")
        assert app.paused is True
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rows = {action: keys for keys, action, _ in app.screen.rows}
        assert rows["Pause"] == "ctrl+o" and rows["Help"] == "f1"
        assert "Step" not in rows  # replay keys are not offered live
        await pilot.press("escape")
        # an id no screen defines is reported with its line, not fatal
        assert any(f"{cfg_file}:4" in n and "not_a_binding" in n for n in notes(app))


async def test_bad_config_is_reported_with_line_and_the_app_runs_on_defaults(tmp_path):
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text('theme = "kvwatch-light"\nrefresh_interval = = 2\n')
    app = make_app(config=load_config(cfg_file))
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        assert any(f"{cfg_file}:2" in n and "TOML syntax" in n for n in notes(app))
        assert app.theme == DEFAULT_THEME  # the file's theme is not half-applied
        assert app.screen.query_one(FleetTable).row_count == 5  # and the dashboard works


async def test_unknown_theme_in_config_points_at_its_line(tmp_path):
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text('bell = true\ntheme = "solarized"\n')
    app = make_app(config=load_config(cfg_file))
    async with app.run_test(size=(100, 30)) as pilot:
        await prime(pilot, 1)
        assert app.theme == DEFAULT_THEME
        assert any(f"{cfg_file}:2" in n and "solarized" in n for n in notes(app))


async def test_ctrl_t_cycles_every_theme_and_the_rows_follow_it():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        table = app.screen.query_one(FleetTable)
        seen, colours = [app.theme], set()
        for _ in range(len(THEMES)):
            row = next(i for i in range(table.row_count) if "kv-pressure" in table.get_row_at(i)[1].plain)
            colours.add(str(table.get_row_at(row)[1].style))
            await pilot.press("ctrl+t")
            await app.refresh_once()
            await pilot.pause()
            seen.append(app.theme)
        assert seen[0] == seen[-1] == DEFAULT_THEME
        assert set(seen) == set(THEMES)
        assert len(colours) >= 4  # the verdict colour comes from the theme in force


async def test_production_context_gets_its_theme_badge_and_read_only():
    cfg = Config(contexts=(ContextProfile("prod-*", theme="kvwatch-high-contrast", readonly=True, production=True),))
    app = make_app(config=cfg, context="prod-eu-1")
    async with app.run_test(size=(160, 36)) as pilot:
        await prime(pilot, 2)
        assert app.theme == "kvwatch-high-contrast"
        assert app.readonly and app.production
        head = app.screen.query_one(FleetHeader).text.plain
        assert "PRODUCTION" in head and "READONLY" in head
        app.apply_context("staging")  # `:ctx staging`
        await pilot.pause()
        assert not app.readonly and not app.production
        assert app.theme == DEFAULT_THEME  # the production look does not follow you out
        assert "PRODUCTION" not in app.screen.query_one(FleetHeader).text.plain


async def test_cli_readonly_survives_a_context_without_it():
    app = make_app(readonly=True, config=Config(contexts=(ContextProfile("dev"),)), context="dev")
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 1)
        app.apply_context("dev")
        assert app.readonly


async def test_bell_fires_once_per_entry_into_kv_pressure_and_can_be_toggled():
    app = make_app({"a": "healthy", "b": "healthy"})
    rang = []
    app.bell = lambda: rang.append(1)
    src = app.monitor.source
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        assert rang == [] and app.alerts == []
        src.profiles["a"] = "pressure"
        await prime(pilot, 4)  # several refreshes in kv-pressure: one bell
        assert len(rang) == 1 and app.alerts[-1][1] == ("a",)
        assert any("a" in n for n in notes(app))
        src.profiles["a"] = "healthy"
        await prime(pilot, 4)
        assert not any(r.verdict == "kv-pressure" for r in app.monitor.state.replicas)
        src.profiles["a"] = "pressure"  # back after a short step out: the same episode, no bell
        await prime(pilot, 4)
        assert len(rang) == 1 and app.monitor.state.replicas[0].verdict == "kv-pressure"
        src.profiles["a"] = "healthy"
        await prime(pilot, 16)  # out for over a minute
        src.profiles["a"] = "pressure"  # a new entry rings again
        await prime(pilot, 4)
        assert len(rang) == 2
        await pilot.press("ctrl+b")
        assert app.bell_on is False
        src.profiles["b"] = "pressure"
        await prime(pilot, 4)
        assert len(rang) == 2  # muted
        assert app.alerts[-1][1] == ("b",)  # still noted


async def test_ctrl_s_writes_an_svg_to_the_configured_folder(tmp_path):
    shots = tmp_path / "shots" / "deep"
    app = make_app(screenshot_dir=shots)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        await pilot.press("ctrl+s")
        await pilot.pause()
    files = list(shots.glob("*.svg"))
    assert len(files) == 1
    svg = files[0].read_text()
    assert svg.startswith("<svg") and "llama" in svg.replace("&#160;", " ")


async def test_ctrl_s_into_an_unwritable_folder_says_so(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    app = make_app(screenshot_dir=blocker / "sub")
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 1)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert any("screenshot failed" in n for n in notes(app))


async def test_every_screen_is_usable_at_80x24_without_a_mouse():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 4)
        table = app.screen.query_one(FleetTable)
        keys = [str(c.key.value) for c in table.columns.values()]
        assert keys == [c.key for c in fit_columns(80)]
        assert table.region.right <= 80 and table.row_count == 5
        head = app.screen.query_one(FleetHeader)
        assert head.region.height == 2 and "5 replicas" in head.text.plain
        # keyboard only: move to the pressured row, open it, read the evidence, come back
        for _ in range(table.row_count):
            if "kv-pressure" in table.get_row_at(table.cursor_row)[1].plain:
                break
            await pilot.press("j")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        ev = app.screen.query_one("#evidence")
        assert ev.region.height >= 4 and "kv-pressure" in str(ev.render())
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("VerticalScroll")
        assert box.region.x >= 0 and box.region.right <= 80 and box.region.bottom <= 24
        await pilot.press("escape")
        assert isinstance(app.screen, FleetScreen)


async def test_no_color_uses_the_monochrome_theme_and_cannot_be_cycled_away():
    app = make_app(no_color=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await prime(pilot, 2)
        assert app.theme == MONO_THEME
        await pilot.press("ctrl+t")
        assert app.theme == MONO_THEME


async def test_replay_keys_are_hidden_in_a_live_session():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 1)
        for action in ("replay_step", "replay_next_change", "replay_seek"):
            assert app.check_action(action, ()) is False
        assert app.mode == "live"
        await pilot.press("n")  # nothing happens, nothing breaks
        assert isinstance(app.screen, FleetScreen)
        assert isinstance(app.screen.query_one(FleetTable), DataTable)


async def test_clicking_a_row_still_selects_it():
    # the table merges same-style cells into one run per row; row clicks must keep working
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        assert table.cursor_row == 0
        await pilot.click(FleetTable, offset=(60, 3))  # header line + rows 0, 1, 2
        await pilot.pause()
        assert table.cursor_row == 2

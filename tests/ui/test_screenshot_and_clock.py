"""ctrl+s writes into a stated folder (config `screenshot_dir`, default the XDG data dir), never
silently into the working directory; the demo's header says its clock is simulated, and how fast."""

from __future__ import annotations

from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import notes
from tui.cli import build_parser
from tui.launch import apply_config, make_app as launch_app, make_monitor
from widgets.header import FleetHeader


async def test_ctrl_s_defaults_to_the_xdg_data_dir_and_says_where(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        await pilot.press("ctrl+s")
        await pilot.pause()
        shots = list((tmp_path / "data" / "kvwatch" / "screenshots").glob("*.svg"))
        assert len(shots) == 1
        assert any(str(shots[0]) in n for n in notes(app)), notes(app)
    assert list(tmp_path.glob("*.svg")) == []  # nothing in the working directory


def test_the_cli_and_config_default_is_the_xdg_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("KVWATCH_CONFIG", str(tmp_path / "none.toml"))
    args = build_parser().parse_args(["--url", "http://127.0.0.1:9"])
    cfg = apply_config(args)
    app = launch_app(args, make_monitor(None, cfg, 1.0), cfg)
    assert app.screenshot_dir == tmp_path / "data" / "kvwatch" / "screenshots"


async def test_a_simulated_clock_is_labelled_sim_with_its_speed():
    app = make_app()
    app.monitor.source.sim_speed = 10.0
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        line = str(app.screen.query_one(FleetHeader).text).split("\n")[0]
        assert "sim " in line and "10x" in line, line


async def test_a_live_clock_is_not_labelled_sim():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        line = str(app.screen.query_one(FleetHeader).text).split("\n")[0]
        assert "sim" not in line, line

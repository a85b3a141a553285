"""Snapshots of the fleet screen in every theme, and of the replay views (120x36, 80x24)."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from tests.ui.conftest import make_app, prime
from tests.ui.recordings import phases, write_log
from themes import THEMES
from tui.app import KvwatchApp
from tui.core.monitor import Monitor
from tui.core.sources.replay import ReplaySource


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


async def _primed(pilot):
    await prime(pilot, 4)


@pytest.mark.parametrize("theme", sorted(THEMES))
def test_fleet_screen_theme(snap_compare, theme):
    app = make_app(theme=theme, no_color=theme == "kvwatch-mono")
    assert snap_compare(app, terminal_size=(120, 36), run_before=_primed)


def test_fleet_screen_ascii_80x24(snap_compare):
    assert snap_compare(make_app(ascii=True), terminal_size=(80, 24), run_before=_primed)


@pytest.fixture
def replay(tmp_path):
    path = tmp_path / "incident.jsonl"
    write_log(path, phases(40))
    src = ReplaySource.open(path)
    return KvwatchApp(Monitor(src), src.interval, autostart=False, mode="replay")


async def _stepped(pilot):
    for _ in range(16):
        await pilot.press("greater_than_sign")
    await pilot.pause()


async def _seek(pilot):
    await _stepped(pilot)
    await pilot.press("T")
    await pilot.pause()
    pilot.app.screen.query_one(Input).cursor_blink = False
    await pilot.press(*"+30s")
    await pilot.pause()


def test_replay_fleet_screen(snap_compare, replay):
    assert snap_compare(replay, terminal_size=(120, 36), run_before=_stepped)


def test_replay_fleet_screen_80x24(snap_compare, replay):
    assert snap_compare(replay, terminal_size=(80, 24), run_before=_stepped)


def test_replay_seek_prompt(snap_compare, replay):
    assert snap_compare(replay, terminal_size=(100, 30), run_before=_seek)

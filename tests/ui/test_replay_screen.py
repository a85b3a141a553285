"""Replay through the live screens: play, pause, step, seek, next verdict change, read-only."""

from __future__ import annotations

import pytest

from tests.ui.kube_app import until
from tests.ui.recordings import phases, write_log
from tui.app import KvwatchApp
from tui.core.export import fleet_json
from tui.core.monitor import Monitor
from tui.core.replay import rebuild
from tui.core.sources.replay import ReplaySource
from tui.screens.fleet import FleetScreen
from tui.screens.seek import SeekScreen
from widgets.fleet_table import FleetTable
from widgets.header import FleetHeader


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "incident.jsonl"
    write_log(path, phases(60))
    return path


class Clock:
    """The playback's wall clock, moved by the test (a busy machine must not change the replay)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def replay_app(path, speed=1.0, autostart=False, clock=None) -> KvwatchApp:
    src = ReplaySource.open(path, speed, **({"clock": clock} if clock else {}))
    return KvwatchApp(Monitor(src), src.interval, autostart=autostart, mode="replay")


def expected(path, k: int) -> dict:
    src = ReplaySource.open(path)
    out = fleet_json(rebuild(Monitor(src), src, k).state)
    return out


def shown(app) -> dict[str, str]:
    table = app.screen.query_one(FleetTable)
    return {table.get_row_at(i)[0].plain.strip(): table.get_row_at(i)[1].plain.split()[-1]
            for i in range(table.row_count)}


def header(app) -> str:
    return app.screen.query_one(FleetHeader).text.plain


async def test_step_forward_and_back_show_what_playing_from_the_start_shows(log):
    app = replay_app(log)
    src = app.monitor.source
    async with app.run_test(size=(120, 36)) as pilot:
        assert app.mode == "replay" and app.readonly  # mitigation keys check these
        for _ in range(12):
            await pilot.press("greater_than_sign")
        await pilot.pause()
        assert src.pos == 12 and not src.playing
        assert "12/60" in header(app) and "replay paused" in header(app)
        assert "READONLY" not in header(app)
        assert fleet_json(app.monitor.state) == expected(log, 12)
        for _ in range(5):
            await pilot.press("less_than_sign")
        await pilot.pause()
        assert src.pos == 7
        want = expected(log, 7)
        assert fleet_json(app.monitor.state) == want
        assert shown(app) == {r["name"]: r["verdict"] for r in want["replicas"]}
        assert app.screen.state.ts == src.times[6]


async def test_n_jumps_to_the_next_verdict_change(log):
    app = replay_app(log)
    src = app.monitor.source
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        before = shown(app)
        await pilot.press("n")
        await pilot.pause()
        k = src.pos
        after = shown(app)
        assert after != before
        # one poll earlier nothing had changed yet
        prev = {r["name"]: r["verdict"] for r in expected(log, k - 1)["replicas"]}
        assert prev == before
        assert any("->" in str(n.message) for n in app._notifications)


async def test_seek_prompt_goes_to_a_time_and_explains_a_typo(log):
    app = replay_app(log)
    src = app.monitor.source
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("greater_than_sign")
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, SeekScreen)
        await pilot.press(*"later", "enter")
        await pilot.pause()
        assert isinstance(app.screen, SeekScreen)
        assert "cannot read" in str(app.screen.query_one("#seek-error").render())
        await pilot.press(*("backspace",) * 5, *"50%", "enter")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        mid = src.start_ts + (src.end_ts - src.start_ts) / 2
        assert src.pos == src.index_at(mid) == 30
        assert fleet_json(app.monitor.state) == expected(log, 30)
        await pilot.press("T", *"-100s", "enter")  # relative to here: 20 polls of 5 s back
        await pilot.pause()
        assert src.pos == 10


async def test_playing_runs_to_the_end_at_speed_and_p_pauses(log):
    clock = Clock()
    app = replay_app(log, speed=200.0, autostart=True, clock=clock)
    src = app.monitor.source
    loops = [0]  # turns of the app's replay loop
    advance = app.replay.advance

    async def counted() -> int:
        loops[0] += 1
        return await advance()

    app.replay.advance = counted
    async with app.run_test(size=(120, 36)) as pilot:
        clock.t += 0.1  # 20 s of recording at 200x: four polls of 5 s
        await until(pilot, lambda: src.pos >= 2, what=lambda: f"pos {src.pos}")
        await pilot.press("p")
        assert not src.playing and "replay paused" in header(app)
        paused_at = src.pos
        assert not src.at_end
        clock.t += 10.0  # far past the end, had it kept playing
        turns = loops[0]
        await until(pilot, lambda: loops[0] >= turns + 2)  # the replay loop looked, twice
        assert src.pos == paused_at
        await pilot.press("p")
        clock.t += 10.0
        await until(pilot, lambda: src.at_end and not src.playing, what=lambda: f"pos {src.pos}, playing {src.playing}")
        await pilot.pause()
        assert fleet_json(app.screen.state) == expected(log, 60)
        assert any("end of the recording" in str(n.message) for n in app._notifications)
        offered = {ab.binding.id for ab in app.active_bindings.values() if ab.enabled}
        assert {"replay_back", "replay_forward", "replay_next", "replay_seek"} <= offered

"""Record -> replay round trip over the real pipeline.

A live session watches the simulated fleet over HTTP on 127.0.0.1 with --record's Recorder on;
then the recording is replayed through the same screens and run through `kvwatch diagnose` and
`kvwatch replay --json`. All of them must show what the live session showed, poll by poll; a
recording cut mid-line (kvwatch killed) replays up to the cut.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tui.app import KvwatchApp
from tui.cli import main
from tui.core.export import fleet_json
from tui.core.monitor import Monitor
from tui.core.record import Recorder
from tui.core.sim.fleet import SimFleet
from tui.core.sources.direct import DirectSource, Target
from tui.core.sources.replay import ReplaySource
from widgets.fleet_table import FleetTable

POLLS = 30


def shown(app) -> dict[str, str]:
    """Replica -> verdict word as painted in the fleet table."""
    table = app.screen.query_one(FleetTable)
    return {table.get_row_at(i)[0].plain.strip(): table.get_row_at(i)[1].plain.split()[-1]
            for i in range(table.row_count)}


def runs(seq: list[str]) -> list[str]:
    return [v for i, v in enumerate(seq) if i == 0 or seq[i - 1] != v]


@pytest.fixture(scope="module")
def live_session(tmp_path_factory):
    """One live session: per poll, the scrapes recorded, what the table showed, the fleet JSON."""
    path = tmp_path_factory.mktemp("rec") / "incident.jsonl.gz"
    fleet = SimFleet(scenario="long-prompts", replicas=3, speed=60.0, seed=5).start()
    try:
        targets = [Target(t.name, t.metrics_url, t.gpu_url, t.group) for t in fleet.targets()]
        src = DirectSource(targets, timeout=2.0, clock=fleet.clock, description="demo")
        recorder = Recorder(str(path))
        batches: list[list] = []

        def tee(scrapes):
            recorder.write(scrapes)
            batches.append(list(scrapes))

        app = KvwatchApp(Monitor(src, on_scrapes=tee), 1.0, autostart=False)
        screens, states = [], []

        async def drive():
            async with app.run_test(size=(140, 30)) as pilot:
                await src.start()
                for _ in range(POLLS):
                    t0 = time.monotonic()
                    await app.refresh_once()
                    await pilot.pause()
                    screens.append(shown(app))
                    states.append(fleet_json(app.screen.state))
                    await asyncio.sleep(max(0.0, 0.25 - (time.monotonic() - t0)))
                await src.close()

        asyncio.run(drive())
        recorder.close()
    finally:
        fleet.stop()
    assert recorder.error is None and recorder.lines == sum(len(b) for b in batches)
    return path, batches, screens, states


def test_the_live_session_saw_the_incident(live_session):
    _, _, screens, _ = live_session
    seen = {v for s in screens for v in s.values()}
    assert "kv-pressure" in seen and "healthy" in seen  # the round trip covers a transition


async def test_replayed_screens_show_what_the_live_session_showed(live_session):
    path, _, screens, states = live_session
    src = ReplaySource.open(path)
    assert not src.problems and len(src.rounds) == POLLS
    app = KvwatchApp(Monitor(src), src.interval, autostart=False, mode="replay")
    async with app.run_test(size=(140, 30)) as pilot:
        for i in range(POLLS):
            await pilot.press("greater_than_sign")
            await pilot.pause()
            assert shown(app) == screens[i], f"poll {i + 1}"
            got = fleet_json(app.screen.state)
            assert got["replicas"] == states[i]["replicas"] and got["ts"] == states[i]["ts"]
        # and back again: a step back rebuilds from the start and shows the same screen as then
        for i in (POLLS - 2, 10, 3):
            app.replay_goto(i + 1)
            await pilot.pause()
            assert shown(app) == screens[i]


def test_diagnose_of_the_recording_agrees_with_the_live_session(live_session, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KVWATCH_CONFIG", str(tmp_path / "none.toml"))
    path, batches, screens, _ = live_session
    assert main(["diagnose", "--input", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["replicas"]
    assert set(out) == set(screens[-1])
    for name, rep in out.items():
        assert rep["verdict"] == screens[-1][name]
        live_seq = [s[name] for s in screens if name in s]
        assert [t["verdict"] for t in rep["timeline"]] == runs(live_seq), name
        # each change is dated by the scrape that showed it live
        change_ts = [next(s.ts for s in b if s.replica == name) for i, b in enumerate(batches)
                     if name in screens[i] and (i == 0 or screens[i - 1].get(name) != screens[i][name])]
        assert [t["ts"] for t in rep["timeline"]] == pytest.approx(change_ts), name


def test_replay_json_matches_the_live_json(live_session, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("KVWATCH_CONFIG", str(tmp_path / "none.toml"))
    path, _, _, states = live_session
    assert main(["replay", str(path), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["replicas"] for x in lines] == [s["replicas"] for s in states]


@pytest.mark.parametrize("gz", [False, True])
def test_a_recording_cut_mid_line_replays_up_to_the_cut(live_session, tmp_path, gz):
    path, batches, _, states = live_session
    src_full = ReplaySource.open(path)
    cut = tmp_path / ("cut.jsonl.gz" if gz else "cut.jsonl")
    with Recorder(str(cut)) as rec:  # the same scrapes, as a live --record would write them
        for b in src_full.rounds:
            rec.write(b)
    raw = cut.read_bytes()
    if gz:
        raw = raw[:-30]  # trailer gone and the last flushed block cut: a killed writer
    else:
        last = raw.rstrip(b"\n").rfind(b"\n")
        raw = raw[: last + (len(raw) - last) // 2]
    cut.write_bytes(raw)
    src = ReplaySource.open(cut)
    n = sum(len(r) for r in src.rounds)
    total = sum(len(b) for b in batches)
    assert total - 3 <= n < total  # only what was cut is lost
    mon = Monitor(src)
    for i in range(n // 3):  # every complete poll replays exactly as it was shown live
        assert fleet_json(mon.ingest(src.take()))["replicas"] == states[i]["replicas"], i


def test_record_flag_of_a_live_mode_feeds_replay_and_diagnose(tmp_path, capsys, monkeypatch):
    """`kvwatch demo --json --record FILE`, then `kvwatch replay FILE --json` and `diagnose`."""
    monkeypatch.setenv("KVWATCH_CONFIG", str(tmp_path / "none.toml"))
    rec = tmp_path / "demo.jsonl"
    assert main(["demo", "--replicas", "2", "--speed", "20", "--interval", "0.3", "--json", "--duration", "2.5",
                 "--record", str(rec)]) == 0
    live = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(live) >= 5
    assert main(["replay", str(rec), "--json"]) == 0
    replayed = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["replicas"] for x in replayed] == [x["replicas"] for x in live]
    assert main(["diagnose", "--input", str(rec), "--json"]) == 0
    diag = json.loads(capsys.readouterr().out)["replicas"]
    assert {n: r["verdict"] for n, r in diag.items()} == {r["name"]: r["verdict"] for r in live[-1]["replicas"]}

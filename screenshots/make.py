"""Regenerate the SVG screenshots in this folder from seeded demo scenarios.

    .venv/bin/python screenshots/make.py            # all
    .venv/bin/python screenshots/make.py steady     # only sessions with a shot whose name contains "steady"

Each session runs the real pipeline: simulated replicas (fixed seed and start time) serve /metrics
over HTTP on 127.0.0.1, kvwatch scrapes, diagnoses and draws; once the scenario has developed,
one shot per screen/theme is taken from the same session. The long-prompts session is also
recorded, and the replay shots come from playing that recording back.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ["TZ"] = "UTC"  # the header clock must not depend on where the script runs
time.tzset()
os.environ.pop("NO_COLOR", None)

from textual.widgets import Input  # noqa: E402

from themes import DEFAULT_THEME, THEMES  # noqa: E402
from tui.app import KvwatchApp  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.record import Recorder  # noqa: E402
from tui.core.sim.fleet import SimFleet  # noqa: E402
from tui.core.cluster.audit import AuditLog  # noqa: E402
from tui.core.sources.demo import DemoSource  # noqa: E402
from tui.core.cluster.sim import SimCluster  # noqa: E402
from tui.core.sources.replay import ReplaySource  # noqa: E402

START = 1_735_732_800.0  # 2025-01-01 12:00:00 UTC, so every run shows the same clock
SEED = 7


@dataclass
class Shot:
    name: str
    keys: tuple[str, ...] = ()  # pressed before the shot
    theme: str = DEFAULT_THEME
    size: tuple[int, int] | None = None  # None: the session's size
    after: tuple[str, ...] = ()  # pressed after the shot (close a modal, go back)


@dataclass
class Session:
    scenario: str
    shots: list[Shot]
    size: tuple[int, int] = (160, 40)
    replicas: int = 6
    speed: float = 20.0
    sim_seconds: float = 240.0
    until: object = None
    record: bool = False
    ascii: bool = False
    replay_shots: list[Shot] = field(default_factory=list)


def _pressured(state) -> bool:
    return sum(r.verdict == "kv-pressure" for r in state.replicas) >= 2


async def _shoot(app: KvwatchApp, pilot, shot: Shot, size: tuple[int, int]) -> Path:
    want = shot.size or size
    if app.size != want:
        await pilot.resize_terminal(*want)
        await pilot.pause(0.2)
    if app.theme != shot.theme:
        app.theme = shot.theme
        app.draw(app.monitor.state)
    for k in shot.keys:
        await pilot.press(k)
        await pilot.pause()
    for box in app.screen.query(Input):
        box.cursor_blink = False
    app.clear_notifications()
    await pilot.pause(0.3)
    out = HERE / f"{shot.name}.svg"
    app.save_screenshot(filename=out.name, path=str(HERE))
    for k in shot.after:
        await pilot.press(k)
        await pilot.pause()
    return out


async def run_session(s: Session, want: list[str]) -> list[Path]:
    done: list[Path] = []
    fleet = SimFleet(scenario=s.scenario, replicas=s.replicas, speed=s.speed, seed=SEED, v0_replicas=1,
                     start_time=START)
    rec_path = Path(tempfile.mkdtemp()) / f"{s.scenario}.jsonl.gz"
    recorder = Recorder(str(rec_path)) if s.record else None
    fleet.start()
    try:
        # as `kvwatch demo` does: the simulated cluster behind the Kubernetes interface, so the
        # mitigation keys are live in the shots
        cluster = SimCluster(fleet, context="demo", audit=AuditLog(str(rec_path.with_suffix(".audit"))))
        src = DemoSource(cluster, timeout=2.0, label=f"{s.scenario} · {s.speed:g}x")
        mon = Monitor(src, on_scrapes=recorder.write if recorder else None)
        app = KvwatchApp(mon, 0.5, autostart=False, ascii=s.ascii, no_color=False)
        app.bell = lambda: None
        async with app.run_test(size=s.size) as pilot:
            await src.start()
            start = fleet.clock()
            while fleet.clock() - start < s.sim_seconds:
                await app.refresh_once()
                await pilot.pause()
                if s.until is not None and s.until(app.monitor.state):
                    break
                await asyncio.sleep(0.5)
            for shot in s.shots:
                if any(w in shot.name for w in want):
                    done.append(await _shoot(app, pilot, shot, s.size))
            await src.close()
    finally:
        fleet.stop()
        if recorder is not None:
            recorder.close()
    if s.replay_shots and any(w in shot.name for shot in s.replay_shots for w in want):
        rsrc = ReplaySource.open(rec_path)
        app = KvwatchApp(Monitor(rsrc), rsrc.interval, autostart=False, mode="replay", no_color=False)
        async with app.run_test(size=s.size) as pilot:
            app.replay_goto(len(rsrc.rounds) * 3 // 4)
            await pilot.pause()
            for shot in s.replay_shots:
                if any(w in shot.name for w in want):
                    done.append(await _shoot(app, pilot, shot, s.size))
    return done


SESSIONS = [
    Session("steady", sim_seconds=120.0, shots=[Shot("fleet-steady")]),
    Session(
        "long-prompts", sim_seconds=600.0, until=_pressured, record=True,
        shots=[
            Shot("fleet-long-prompts"),
            *[Shot(f"theme-{name.removeprefix('kvwatch-')}", theme=name) for name in THEMES],
            Shot("fleet-long-prompts-80x24", size=(80, 24)),
            Shot("fleet-long-prompts-200x50", size=(200, 50)),
            Shot("fleet-long-prompts-120x30", size=(120, 30)),
            Shot("fleet-long-prompts-160x45", size=(160, 45)),
            Shot("detail-long-prompts-120x30", size=(120, 30), keys=("enter",), after=("escape",)),
            Shot("runbook-80x24", size=(80, 24), keys=("g",), after=("escape",)),
            Shot("triage-120x30", size=(120, 30), keys=("t",), after=("escape",)),
            Shot("help-80x24", size=(80, 24), keys=("question_mark",), after=("escape",)),
            Shot("help", keys=("question_mark",), after=("escape",)),
            Shot("detail-long-prompts", keys=("enter",), after=("escape",)),
            Shot("detail-long-prompts-80x24", size=(80, 24), keys=("enter",), after=("escape",)),
            Shot("triage", keys=("t",), after=("escape",)),
            Shot("runbook", keys=("g",), after=("escape",)),
            Shot("capacity", keys=("c",), after=("escape",)),
            Shot("edit-args", keys=("e",), after=("escape",)),
            Shot("rollout", keys=("z",), after=("escape",)),
            Shot("filter", keys=("slash", "v", "0", "enter"), after=("escape",)),
        ],
        replay_shots=[
            Shot("replay"),
            Shot("replay-80x24", size=(80, 24)),
            Shot("replay-seek", keys=("T", *"-30s"), after=("escape",)),
        ],
    ),
    # the GPU panel (`u`) of the replica on the throttling node (the fault starts at 60 s)
    Session("throttled-node", sim_seconds=150.0, size=(120, 30),
            shots=[Shot("gpu-throttled-node-120x30", keys=("slash", *"llama-8b-1", "enter", "u"),
                        after=("escape", "escape")),
                   Shot("gpu-throttled-node-80x24", size=(80, 24), keys=("slash", *"llama-8b-1", "enter", "u"),
                        after=("escape", "escape"))]),
    Session("long-prompts", sim_seconds=600.0, until=_pressured, ascii=True, size=(80, 24),
            shots=[Shot("ascii-80x24")]),
]


def main(argv: list[str]) -> None:
    want = argv[1:] or [""]
    for s in SESSIONS:
        names = [sh.name for sh in s.shots + s.replay_shots]
        if any(w in n for n in names for w in want):
            for path in asyncio.run(run_session(s, want)):
                print(path.relative_to(HERE.parent))


if __name__ == "__main__":
    main(sys.argv)

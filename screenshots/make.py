"""Regenerate the SVG screenshots in this folder from seeded demo scenarios.

    .venv/bin/python screenshots/make.py            # all
    .venv/bin/python screenshots/make.py steady     # only names containing "steady"

Each shot runs the real pipeline: simulated replicas serve /metrics over HTTP on 127.0.0.1,
kvwatch scrapes, diagnoses and draws; the shot is taken once the scenario has developed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tui.app import KvwatchApp  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.sim.fleet import SimFleet  # noqa: E402
from tui.core.sources.direct import DirectSource, Target  # noqa: E402


async def shoot(name: str, scenario: str, *, size=(160, 40), replicas=6, speed=20.0, sim_seconds=240.0,
                keys: tuple[str, ...] = (), theme: str | None = None, until=None) -> Path:
    fleet = SimFleet(scenario=scenario, replicas=replicas, speed=speed, seed=7, v0_replicas=1)
    fleet.start()
    try:
        targets = [Target(t.name, t.metrics_url, t.gpu_url, t.group) for t in fleet.targets()]
        desc = f"demo: {len(targets)} simulated replicas · {scenario} · {speed:g}x"
        src = DirectSource(targets, timeout=2.0, clock=fleet.clock, description=desc)
        app = KvwatchApp(Monitor(src), 0.5, autostart=False, theme=theme)
        async with app.run_test(size=size) as pilot:
            await src.start()
            start = fleet.clock()
            while fleet.clock() - start < sim_seconds:
                await app.refresh_once()
                await pilot.pause()
                if until is not None and until(app.monitor.state):
                    break
                await asyncio.sleep(0.5)
            for k in keys:
                await pilot.press(k)
                await pilot.pause()
            await pilot.pause(0.3)
            out = HERE / f"{name}.svg"
            app.save_screenshot(filename=out.name, path=str(HERE))
            return out
    finally:
        fleet.stop()


def _pressured(state) -> bool:
    return sum(r.verdict == "kv-pressure" for r in state.replicas) >= 2


SHOTS = {
    "fleet-steady": dict(scenario="steady", sim_seconds=120.0),
    "fleet-long-prompts": dict(scenario="long-prompts", sim_seconds=600.0, until=_pressured),
    "fleet-long-prompts-80x24": dict(scenario="long-prompts", size=(80, 24), sim_seconds=600.0, until=_pressured),
    "detail-long-prompts": dict(scenario="long-prompts", sim_seconds=600.0, until=_pressured, keys=("enter",)),
}


def main(argv: list[str]) -> None:
    want = argv[1:] or [""]
    for name, kw in SHOTS.items():
        if any(w in name for w in want):
            print(asyncio.run(shoot(name, **kw)))


if __name__ == "__main__":
    main(sys.argv)

"""How long each screen takes to open at 64 replicas: key press to the screen drawn with data.

    .venv/bin/python bench/bench_screen_open.py [--replicas 64] [--reps 15] [--size 160x45]

Headless (Textual's test driver), the stepped simulated cluster behind the mitigation keys,
a fleet primed with 8 refreshes. Each screen is opened `reps` times from the fleet screen and
closed again; the time is from the key (or push) to the screen mounted, laid out and, for the
edit form, its Deployment read and the fields filled. Prints median and p95 per screen.
Target (issue 21): every screen within 150 ms on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.ui.scripted import ScriptedSource  # noqa: E402
from tui.app import KvwatchApp  # noqa: E402
from tui.core.cluster.audit import AuditLog  # noqa: E402
from tui.core.cluster.sim import SimCluster  # noqa: E402
from tui.core.config import Config  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.sim.fleet import SimFleet  # noqa: E402

KINDS = ("pressure", "healthy", "compute", "healthy", "fault", "healthy", "down", "healthy")


async def _settle(pilot, ready, limit_s: float = 10.0) -> None:
    end = time.perf_counter() + limit_s
    while not ready():
        if time.perf_counter() > end:
            raise TimeoutError("screen did not open")
        await pilot.pause()


async def measure(replicas: int, reps: int, size: tuple[int, int]) -> dict[str, list[float]]:
    from tui.screens.detail import DetailScreen
    from tui.screens.edit_args import EditArgsScreen
    from tui.screens.help import HelpScreen
    from tui.screens.triage import TriageScreen

    profiles = {f"llama-8b-7d9f-{i:05d}": KINDS[i % len(KINDS)] for i in range(replicas)}
    app = KvwatchApp(Monitor(ScriptedSource(profiles)), 1.0, autostart=False, config=Config(bell=False))
    fleet = SimFleet("long-prompts", replicas=2, seed=3, start_time=1.75e9)
    cluster = SimCluster(fleet, audit=AuditLog(Path(tempfile.mkdtemp()) / "audit.jsonl"), load_delay_s=60)
    app.cluster = cluster
    out: dict[str, list[float]] = {}
    async with app.run_test(size=size) as pilot:
        for _ in range(8):
            await app.refresh_once()
        await pilot.pause()
        fleet_screen = app.screen
        keyed = (("detail (enter)", "enter", DetailScreen), ("triage (t)", "t", TriageScreen),
                 ("runbook (g)", "g", TriageScreen), ("capacity (c)", "c", TriageScreen),
                 ("help (?)", "question_mark", HelpScreen))
        for label, key, cls in keyed:
            for _ in range(reps):
                t0 = time.perf_counter()
                await pilot.press(key)
                await _settle(pilot, lambda cls=cls: isinstance(app.screen, cls) and app.screen.is_mounted)
                await pilot.pause()  # its first layout and paint
                out.setdefault(label, []).append(time.perf_counter() - t0)
                await pilot.press("escape")
                await _settle(pilot, lambda: app.screen is fleet_screen)
        for _ in range(reps):
            t0 = time.perf_counter()
            form = EditArgsScreen(cluster, fleet.namespace, "llama-8b")
            await app.push_screen(form)
            await _settle(pilot, lambda form=form: form.cmd is not None or form.load_error is not None)
            await pilot.pause()
            out.setdefault("edit form (e)", []).append(time.perf_counter() - t0)
            app.pop_screen()
            await _settle(pilot, lambda: app.screen is fleet_screen)
    return out


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=64)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--size", default="160x45")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    res = asyncio.run(measure(a.replicas, a.reps, (w, h)))
    print(f"screen open, {a.replicas} replicas, {w}x{h}, {a.reps} opens each (ms)")
    print(f"{'screen':<18} {'median':>8} {'p95':>8}")
    for label, xs in res.items():
        print(f"{label:<18} {1000 * statistics.median(xs):8.0f} {1000 * p95(xs):8.0f}")


if __name__ == "__main__":
    main()

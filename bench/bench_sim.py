"""Cost of the simulated fleet: stepping CPU per configuration, and page render time.

    .venv/bin/python bench/bench_sim.py [--seconds 5] [--scenario steady]

CPU% is the process's CPU time over wall time while the fleet thread steps (nothing scrapes,
the main thread sleeps), i.e. the share of one core the simulation costs. Render times are per
page, with the engine state changed before each render (no cache hits).
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui.core.sim.exposition import PageRenderer, render_dcgm  # noqa: E402
from tui.core.sim.fleet import SimFleet  # noqa: E402


def stepping_cpu(scenario: str, replicas: int, speed: float, seconds: float) -> tuple[float, int]:
    f = SimFleet(scenario, replicas=replicas, speed=speed, seed=1).start()
    try:
        time.sleep(1.0)  # let the first requests arrive
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(seconds)
        cpu = (time.process_time() - c0) / (time.perf_counter() - w0)
        with f.lock:
            steps = sum(e.c.steps for n in f.replica_names() for e in f.replica(n).engines)
        return 100.0 * cpu, steps
    finally:
        f.stop()


def render_ms(v0: bool) -> tuple[float, float, int]:
    f = SimFleet("long-prompts", replicas=1, v0_replicas=1 if v0 else 0, seed=1)
    f.advance(200)
    r = f.replica(f.replica_names()[0])
    pr = PageRenderer(r)

    def one() -> None:
        r.version += 1  # defeat the cache: every scrape sees a new state
        pr.render()

    n = 300
    page = timeit.timeit(one, number=n) / n * 1000
    gpu = timeit.timeit(lambda: render_dcgm(r), number=n) / n * 1000
    return page, gpu, len(pr.render())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="wall seconds measured per configuration")
    ap.add_argument("--scenario", default="steady")
    a = ap.parse_args()
    print(f"stepping cost, scenario {a.scenario}, {a.seconds:g} s each (share of one core)")
    for replicas in (8, 64):
        for speed in (1.0, 10.0):
            cpu, steps = stepping_cpu(a.scenario, replicas, speed, a.seconds)
            print(f"  {replicas:3d} replicas  speed {speed:4g}x  CPU {cpu:5.1f}%  ({steps} engine steps simulated)")
    for v0 in (False, True):
        page, gpu, size = render_ms(v0)
        print(f"render {'V0' if v0 else 'V1'} /metrics page: {page:.3f} ms ({size / 1024:.1f} KiB); "
              f"DCGM page: {gpu:.3f} ms")


if __name__ == "__main__":
    main()

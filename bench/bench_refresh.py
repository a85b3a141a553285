"""A full refresh in direct mode: scrape + parse + history + diagnosis through the Monitor.

    .venv/bin/python bench/bench_refresh.py [--replicas 64 256 1024] [--refreshes 5] [--live]

N keep-alive endpoints in a separate process (bench/fleetserve.py) each serve their own
real-size vLLM V1 page (~42 KB, ~420 lines); DirectSource as `kvwatch --url` builds it (raw pages kept for
recording) feeds a Monitor. The CPU figure is kvwatch's process alone, per refresh; at the
default 1 s interval, CPU seconds per refresh = cores used. Budget (issue 4): 256 replicas in
under 1 s wall and under 0.25 CPU-s per refresh. Each figure is also given as a ratio to the floor
(bench/floor.py) measured on the same pages just before and after: the ratio is what carries
from a quiet machine to a busy one. `--live`: pages that grow at every request as a running
server's do (bench/fleetserve.py), the floor measured on the same live pages.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fleetserve import PageFleet  # noqa: E402
from bench.floor import measure_floor  # noqa: E402
from bench.machine import describe, load_average, peak_rss_mib, proc_cpu_s  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.perf import tune_gc  # noqa: E402
from tui.core.sources.direct import DirectSource, Target  # noqa: E402

BUDGET_WALL_S, BUDGET_CPU_S = 1.0, 0.25


async def run(ports: list[int], refreshes: int, server_pid: int) -> tuple[list[float], list[float], list[float], int]:
    src = DirectSource([Target(f"vllm-{i:04d}", f"http://127.0.0.1:{p}/metrics") for i, p in enumerate(ports)],
                       timeout=5.0)
    m = Monitor(src)
    await src.start()
    try:
        for _ in range(2):  # connect, warm the parser's series cache: steady state is what counts
            await m.refresh()
        walls, cpus, server = [], [], []
        for _ in range(refreshes):
            s0, w0, c0 = proc_cpu_s(server_pid), time.perf_counter(), time.process_time()
            state = await m.refresh()
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
            server.append(proc_cpu_s(server_pid) - s0)
        ok = sum(r.state == "ok" for r in state.replicas)
    finally:
        await src.close()
    return walls, cpus, server, ok


def main() -> int:
    tune_gc()  # as the kvwatch command does
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--refreshes", type=int, default=5)
    ap.add_argument("--live", action="store_true", help="pages that change at every request (a live server's)")
    args = ap.parse_args()
    print(describe() + "; " + load_average() + " at start; "
          + ("live pages (growing at every request)" if args.live else "static pages"))
    print("floor: a bare asyncio.Protocol keep-alive client fetching each page once + a stdlib regex tokenising its "
          "samples + float() (bench/floor.py), on the same pages, just before and after kvwatch's refreshes")
    for n in args.replicas:
        with PageFleet(n, live=args.live) as fleet:
            assert fleet.proc is not None
            before = measure_floor(fleet.ports)
            walls, cpus, server, ok = asyncio.run(run(fleet.ports, args.refreshes, fleet.proc.pid))
            after = measure_floor(fleet.ports)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        floor_s = statistics.mean([before.per_page_s, after.per_page_s]) * n
        verdict = ""
        if n == 256:
            verdict = "  meets" if wall < BUDGET_WALL_S and cpu < BUDGET_CPU_S else "  MISSES"
            verdict += f" the absolute budget (<{BUDGET_WALL_S:g} s wall, <{BUDGET_CPU_S:g} CPU-s)"
        print(f"direct refresh N={n:<5} kvwatch CPU {cpu:6.3f} s/refresh ({cpu / n * 1e3:.2f} ms/replica) against a "
              f"floor of {floor_s:.3f} s = {cpu / floor_s:.2f}x the floor; wall {wall:6.3f} s (max {max(walls):.3f}); "
              f"page server CPU {statistics.median(server):.3f} s; {ok}/{n} ok{verdict}")
        print(f"{'':>8}{before.describe()} before; {after.per_page_s * 1e6:.0f} us after; {load_average()}")
    print(f"peak RSS of kvwatch: {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

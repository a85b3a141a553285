"""A full refresh in direct mode: scrape + parse + history + diagnosis through the Monitor.

    .venv/bin/python bench/bench_refresh.py [--replicas 64 256 1024] [--refreshes 5]

N keep-alive servers in a separate process (bench_scrape.py's page server) each serve a
real-size vLLM V1 page (~42 KB); DirectSource as `kvwatch --url` builds it (raw pages kept for
recording) feeds a Monitor. The CPU figure is kvwatch's process alone, per refresh; at the
default 1 s interval, CPU seconds per refresh = cores used. Budget (issue 4): 256 replicas in
under 1 s wall and under 0.25 CPU-s per refresh.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe, peak_rss_mib, proc_cpu_s  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.perf import tune_gc  # noqa: E402
from tui.core.sources.direct import DirectSource, Target  # noqa: E402

BUDGET_WALL_S, BUDGET_CPU_S = 1.0, 0.25
SERVER = Path(__file__).resolve().parent / "bench_scrape.py"


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
    args = ap.parse_args()
    print(describe())
    for n in args.replicas:
        proc = subprocess.Popen([sys.executable, str(SERVER), "--serve", str(n)], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            ports = [int(p) for p in proc.stdout.readline().split()]
            walls, cpus, server, ok = asyncio.run(run(ports, args.refreshes, proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        verdict = ""
        if n == 256:
            verdict = "  meets" if wall < BUDGET_WALL_S and cpu < BUDGET_CPU_S else "  MISSES"
            verdict += f" the 256-replica budget (<{BUDGET_WALL_S:g} s wall, <{BUDGET_CPU_S:g} CPU-s)"
        print(f"direct refresh N={n:<5} wall {wall:6.3f} s (max {max(walls):.3f})  kvwatch CPU {cpu:6.3f} s/refresh "
              f"({cpu / n * 1e3:.2f} ms/replica)  page server CPU {statistics.median(server):.3f} s  "
              f"{ok}/{n} ok{verdict}")
    print(f"peak RSS of kvwatch: {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

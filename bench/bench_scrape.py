"""One refresh of N replicas through DirectSource: wall time and CPU seconds per poll.

    .venv/bin/python bench/bench_scrape.py [--replicas 64 256] [--polls 5] [--no-shared]

N tiny HTTP/1.1 servers (one port each, keep-alive) serve a real-size vLLM V1 page from a
separate process, so the CPU figures are the scraper's alone: fetch + parse + to_sample, as
kvwatch does each refresh. The same round is then timed with ONE shared httpx.AsyncClient,
the layout DirectSource avoids.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from realpage import render_v1_page  # noqa: E402

from tui.core.metrics.extract import parse_vllm, to_sample  # noqa: E402
from tui.core.sources.direct import ACCEPT, DirectSource, Target  # noqa: E402

BUDGET_WALL_S = 1.0
BUDGET_CPU_S = 0.25


# -- server side (child process) ------------------------------------------------------------------


class _PageServer(asyncio.Protocol):
    """Answers every GET on the connection with the same page; keeps the connection open."""

    response = b""

    def connection_made(self, transport):
        self.transport = transport
        self.buf = b""

    def data_received(self, data):
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            _, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.transport.write(self.response)


async def _serve(n: int) -> None:
    body = render_v1_page().encode()
    _PageServer.response = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    loop = asyncio.get_running_loop()
    servers = [await loop.create_server(_PageServer, "127.0.0.1", 0, backlog=64) for _ in range(n)]
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    print(" ".join(map(str, ports)), flush=True)
    await asyncio.Event().wait()


# -- client side ---------------------------------------------------------------------------------


async def _time_polls(poll, polls: int) -> tuple[list[float], list[float]]:
    await poll()  # connect and warm the series cache: the steady state is what matters at 1 Hz
    walls, cpus = [], []
    for _ in range(polls):
        w0, c0 = time.perf_counter(), time.process_time()
        await poll()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return walls, cpus


async def bench_direct(ports: list[int], polls: int) -> tuple[list[float], list[float], int]:
    src = DirectSource([Target(f"r{p}", f"http://127.0.0.1:{p}/metrics") for p in ports], timeout=5.0, keep_raw=False)
    await src.start()
    ok = 0

    async def poll():
        nonlocal ok
        scrapes = await src.poll()
        ok = sum(s.ok for s in scrapes)

    try:
        walls, cpus = await _time_polls(poll, polls)
    finally:
        await src.close()
    return walls, cpus, ok


async def bench_shared(ports: list[int], polls: int) -> tuple[list[float], list[float], int]:
    client = httpx.AsyncClient(
        headers={"Accept": ACCEPT},
        timeout=30.0,
        limits=httpx.Limits(max_connections=len(ports), max_keepalive_connections=len(ports)),
    )
    ok = 0

    async def one(port: int) -> bool:
        resp = await client.get(f"http://127.0.0.1:{port}/metrics")
        return bool(to_sample(parse_vllm(resp.text)).engines)

    async def poll():
        nonlocal ok
        ok = sum(await asyncio.gather(*(one(p) for p in ports)))

    try:
        walls, cpus = await _time_polls(poll, polls)
    finally:
        await client.aclose()
    return walls, cpus, ok


def _report(label: str, n: int, walls: list[float], cpus: list[float], ok: int) -> None:
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    verdict = "meets" if wall < BUDGET_WALL_S and cpu < BUDGET_CPU_S else "MISSES"
    print(
        f"{label:<28} N={n:<4} wall {wall:6.3f} s  cpu {cpu:6.3f} s/refresh  "
        f"({cpu / n * 1e3:5.2f} ms/replica, {ok}/{n} ok)  {verdict} <{BUDGET_WALL_S:g} s wall, <{BUDGET_CPU_S:g} cpu-s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--polls", type=int, default=5)
    ap.add_argument("--no-shared", action="store_true", help="skip the shared-client comparison")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return

    print(f"cpus: {os.cpu_count()}; servers run in a separate process; median of {args.polls} polls")
    for n in args.replicas:
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(n)], stdout=subprocess.PIPE, text=True
        )
        try:
            ports = [int(p) for p in child.stdout.readline().split()]
            assert len(ports) == n, "server process did not start"
            _report("DirectSource (client/target)", n, *asyncio.run(bench_direct(ports, args.polls)))
            page = render_v1_page()
            c0 = time.process_time()
            for _ in range(n):
                to_sample(parse_vllm(page))
            print(f"{'  of which parse+to_sample':<28} N={n:<4} cpu {time.process_time() - c0:6.3f} s")
            if not args.no_shared:
                _report("one shared AsyncClient", n, *asyncio.run(bench_shared(ports, args.polls)))
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=10)


if __name__ == "__main__":
    main()

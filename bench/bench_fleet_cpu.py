"""Whole-process CPU and refreshes kept at 1 Hz: kvwatch's TUI and its headless collector
against N static real-size vLLM pages, plus the HTTP client floor.

    .venv/bin/python bench/bench_fleet_cpu.py [--endpoints 3 64 256 [1024]] [--warmup 35] [--window 10]
                                              [--json-endpoints 256 1024] [--floor-endpoints 64] [--live]

Each endpoint serves its own ~42 KB, ~420-line vLLM V1 page from a separate process
(bench/fleetserve.py), which counts the /metrics requests it answers: refreshes kept =
requests / endpoints / seconds. kvwatch runs as a user runs it, from this tree:
  tui   `kvwatch --url ... ` in a 200x50 pty (drawing included; the pty is read and dropped)
  json  `kvwatch --url ... --json` with stdout piped (no drawing), by default only where the
        issue sets it a target (256, 1024)
CPU is the whole process tree's user+system time over a window after the warm-up, in % of one
core; RSS is read after the window. The warm-up fills the 30 s rate window (the 60 s quantile
window fills by ~65 s: `--warmup 70` for that; at 256 the CPU measured then is ~10% higher).
History is the product's default (600 s), so RSS keeps growing for ten minutes after that:
`--warmup 600` for the RSS a long session levels at.

`--loop-lag` also times every event-loop callback of the kvwatch process (bench/probe, put on
its PYTHONPATH): a key press waits for the callback running when it arrives, so the longest one
in the window, and how many took 50 / 100 ms or more, say how long the screen can keep a key
waiting. `--tree PATH` (repeatable) runs kvwatch from other checkouts too, alternating with this
one at each step, for a before/after in one run; with `--side-by-side` the trees' kvwatch run
at once against the same pages instead, so that every tree meets the same load (on a machine
shared with other work, alternating rows 20 s apart read 1.8x-2.7x the floor for the same tree;
side by side the two trees' ratio held within 1%), each still measured alone in its own process
tree (the refreshes kept are then the fleet's requests shared out: a tree that falls behind
shows only as the sum under the number of trees). `--mem-trace` samples the kvwatch process's
RSS (and glibc's heap, and once a minute its object counts by type) every 15 s from inside it and
prints the course of RSS over the whole run (for the hour: the steps, not only the end).

`--live`: every endpoint's page grows at every request as a running server's does (counters,
histogram buckets, _sum/_count; the gauges moving; bench/fleetserve.py), so that nothing kvwatch
caches on an unchanged page or histogram is reused between scrapes; the floor is then measured
on the same live pages.

Every row is read against the floor (bench/floor.py): a bare asyncio.Protocol keep-alive client
fetching each page once plus a stdlib regex tokenising its samples and float() of each value,
run as a process of its own beside kvwatch (and beside the other trees' kvwatch with
`--side-by-side`), paced at 1 Hz, on the same pages over the same window, so that the floor and
kvwatch meet the same load at the same moments; "floor %" is its CPU per page times the pages
kvwatch kept. "x floor" = kvwatch's CPU / that; the targets (256 pages at 1 Hz: --json <= 1.5x,
the TUI <= 2.0x) are met or MISSES on it; the absolute % stays beside it. "x tight" reads the
same CPU against the floor measured in a tight loop in this process just before and after the
row (how rows were read before the floor ran beside: on a shared machine that floor read
272-518 us a page from row to row, most of the spread in the ratios).

Client floor (`--floor-only`): the same pages fetched by the bare client vs kvwatch's own fetch
path (DirectSource's client, no parsing), CPU per page, alternating.
"""

from __future__ import annotations

from functools import partial
from itertools import pairwise
import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fleetserve import PageFleet  # noqa: E402
from bench.floor import BareGet, BesideFloor, measure_floor  # noqa: E402
from bench.floor import verdict as floor_verdict  # noqa: E402
from bench.machine import describe, load_average  # noqa: E402
from bench.procmeter import Window, measure, spawn_piped, spawn_pty, tree_cpu_s, tree_rss_mib  # noqa: E402

# absolute targets, % of one core at 1 Hz (the TUI at 64 has none); the floor targets: bench/floor.py
TARGETS = {("tui", 3): 2.0, ("json", 3): 2.0, ("tui", 256): 25.0, ("json", 256): 15.0,
           ("tui", 1024): 60.0, ("json", 1024): 60.0}
KVWATCH = "import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))"


def kvwatch_env(tree: Path = ROOT) -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color", KVWATCH_CONFIG=os.devnull + ".none",
               PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NO_COLOR", None)
    return env


def kvwatch_argv(urls: list[str], mode: str) -> list[str]:
    # -P: the working directory is not put first on sys.path, so the tree on PYTHONPATH is the
    # kvwatch that runs (without it, `--tree` would run the checkout the bench was started in)
    argv = [sys.executable, "-P", "-c", KVWATCH]
    for u in urls:
        argv += ["--url", u]
    argv += ["--interval", "1"]
    return argv + (["--json"] if mode == "json" else [])


def run_tool(argv: list[str], env: dict[str, str], mode: str, fleet, warmup: float, window: float):
    tool = spawn_pty(argv, env) if mode == "tui" else spawn_piped(argv, env)
    try:
        return measure(tool, fleet, warmup, window)
    finally:
        tool.stop()


def run_side_by_side(runs: list[tuple[list[str], dict[str, str]]], mode: str, fleet, warmup: float,
                     window: float, floor: BesideFloor | None = None) -> list[Window]:
    """Every run at once against `fleet`, each process tree's CPU over the same window; `floor`
    (running beside them) marked at the window's start and end, its requests left out of the
    refreshes the runs kept."""
    tools = [spawn_pty(argv, env) if mode == "tui" else spawn_piped(argv, env) for argv, env in runs]
    try:
        time.sleep(warmup)
        c0, r0, t0 = [tree_cpu_s(t.pid) for t in tools], fleet.metrics_requests(), time.monotonic()
        if floor is not None:
            floor.mark()
        time.sleep(window)
        c1, r1, t1 = [tree_cpu_s(t.pid) for t in tools], fleet.metrics_requests(), time.monotonic()
        if floor is not None:
            floor.mark()
            r1 -= floor.pages
        hz = (r1 - r0) / fleet.n / (t1 - t0) / len(tools)
        out = []
        for t, a, b in zip(tools, c0, c1, strict=True):
            rss = tree_rss_mib(t.pid)
            alive = os.path.exists(f"/proc/{t.pid}") and rss > 0
            out.append(Window(100.0 * (b - a) / (t1 - t0), hz, rss, alive, t0, t1))
        return out
    finally:
        for t in tools:
            t.stop()


def loop_lag(path: Path, w) -> str:
    """The window's long event-loop callbacks, from the file bench/probe writes."""
    long = []
    if path.exists():
        for line in path.read_text().splitlines():
            end, ms, cpu, what = line.split(" ", 3)
            if w.t0 <= float(end) <= w.t1:
                long.append((float(ms), what, float(cpu)))
    if not long:
        return f"no loop callback of 20 ms or more in {w.t1 - w.t0:.0f} s (bench/probe records those)"
    worst = max(long, default=(0.0, "-", 0.0))
    most_cpu = max(long, key=lambda c: c[2], default=(0.0, "-", 0.0))
    return (f"longest loop callback {worst[0]:.0f} ms ({worst[1]}, {worst[2]:.0f} ms of it on the CPU; the most CPU "
            f"in one callback: {most_cpu[2]:.0f} ms, {most_cpu[1]}); "
            f"{sum(c[0] >= 50 for c in long)} of 50 ms or more, {sum(c[0] >= 100 for c in long)} of 100 ms "
            f"or more in {w.t1 - w.t0:.0f} s")


def mem_trace(path: Path, started: float) -> str:
    """The course of RSS over the run, from the samples bench/probe writes every 15 s."""
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            t, rss = line.split()[:2]
            rows.append((float(t) - started, int(rss.split("=")[1]) / 1024))
    if not rows:
        return "no memory samples"
    top = max(rows, key=lambda r: r[1])
    rise = max(((b[1] - a[1], b[0]) for a, b in pairwise(rows)), default=(0.0, 0.0))
    return (f"RSS every 15 s ({len(rows)} samples, {path}): {rows[0][1]:.0f} MiB at {rows[0][0]:.0f} s, "
            f"highest {top[1]:.1f} MiB at {top[0]:.0f} s, last {rows[-1][1]:.1f} MiB at {rows[-1][0]:.0f} s; "
            f"largest rise between samples {rise[0]:+.1f} MiB at {rise[1]:.0f} s")


def verdict(mode: str, n: int, cpu: float) -> str:
    target = TARGETS.get((mode, n))
    if target is None:
        return ""
    return f"absolute target < {target:g}%: {'met' if cpu < target else 'MISSES'} ({cpu / target:4.2f}x)"


# -- the client floor --------------------------------------------------------------------------


async def _bare_rounds(ports: list[int], rounds: int) -> tuple[float, int]:
    loop = asyncio.get_running_loop()
    conns = []
    for p in ports:
        req = (f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nAccept: text/plain;version=0.0.4\r\n"
               f"User-Agent: kvwatch\r\n\r\n").encode()
        _, proto = await loop.create_connection(partial(BareGet, req), "127.0.0.1", p)
        conns.append(proto)
    await asyncio.gather(*(c.get() for c in conns))  # warm
    c0, size = time.process_time(), 0
    for _ in range(rounds):
        size = len((await asyncio.gather(*(c.get() for c in conns)))[0])
    cpu = time.process_time() - c0
    for c in conns:
        if c.transport is not None:
            c.transport.close()
    return cpu / (rounds * len(ports)), size


async def _kvwatch_rounds(urls: list[str], rounds: int, httpx: bool = False) -> tuple[float, int]:
    # DirectSource's own fetch path (client, size cap, decode), without the parse: whatever
    # client DirectSource uses is what this measures. httpx=True: the httpx path it keeps for
    # https and proxies (and used for every endpoint before the lean client).
    from tui.core.sources import direct
    from tui.core.sources.direct import DirectSource, Target

    if httpx:
        direct._wants_httpx = lambda url, trust_env: True
    src = DirectSource([Target(f"r{i}", u) for i, u in enumerate(urls)], timeout=5.0, keep_raw=False)
    await src.start()
    eps = [src._endpoint(t) for t in src.targets]

    async def round_() -> list[str]:
        return await asyncio.gather(*(src._fetch(e) for e in eps))

    await round_()
    c0, size = time.process_time(), 0
    for _ in range(rounds):
        size = len((await round_())[0])
    cpu = time.process_time() - c0
    await src.close()
    if httpx:
        direct._wants_httpx = _WANTS_HTTPX
    return cpu / (rounds * len(urls)), size


from tui.core.sources.direct import _wants_httpx as _WANTS_HTTPX  # noqa: E402


def client_floor(n: int, rounds: int, reps: int = 3, live: bool = False) -> None:
    with PageFleet(n, live=live) as fleet:
        bare, ours, via_httpx = [], [], []
        for _ in range(reps):  # alternating, so drift in the machine's load hits all three
            b, size_b = asyncio.run(_bare_rounds(fleet.ports, rounds))
            k, size_k = asyncio.run(_kvwatch_rounds(fleet.urls, rounds))
            h, size_h = asyncio.run(_kvwatch_rounds(fleet.urls, rounds, httpx=True))
            assert live or size_b == size_k == size_h, "the clients read different pages"
            bare.append(b)
            ours.append(k)
            via_httpx.append(h)
    b, k, h = statistics.median(bare), statistics.median(ours), statistics.median(via_httpx)
    print(f"client floor, {n} keep-alive endpoints x {rounds} rounds x {reps} alternating reps, {size_b:,}-char pages:")
    print(f"  bare asyncio.Protocol client  {b * 1e6:7.0f} us CPU per page (floor)")
    print(f"  kvwatch's fetch (DirectSource) {k * 1e6:7.0f} us CPU per page = {k / b:4.1f}x the floor (lean http1 client)")
    print(f"  the same through httpx         {h * 1e6:7.0f} us CPU per page = {h / b:4.1f}x the floor (https/proxy path)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoints", type=int, nargs="+", default=[3, 64, 256])
    ap.add_argument("--modes", nargs="+", default=["tui", "json"], choices=["tui", "json"])
    ap.add_argument("--json-endpoints", type=int, nargs="*", default=[256, 1024],
                    help="endpoint counts at which --json runs too (default: those with a headless target)")
    ap.add_argument("--warmup", type=float, default=35.0, help="seconds before the window (start-up, windows fill)")
    ap.add_argument("--window", type=float, default=10.0, help="seconds measured")
    ap.add_argument("--floor-endpoints", type=int, default=64)
    ap.add_argument("--floor-rounds", type=int, default=10)
    ap.add_argument("--history", type=float, default=None,
                    help="history_window in seconds, through a config file (default: the product's 600 s)")
    ap.add_argument("--no-floor", action="store_true")
    ap.add_argument("--live", action="store_true", help="pages that change at every request (a live server's)")
    ap.add_argument("--floor-only", action="store_true", help="only the HTTP client floor")
    ap.add_argument("--loop-lag", action="store_true", help="also time the event loop's callbacks")
    ap.add_argument("--mem-trace", action="store_true", help="also sample RSS every 15 s from inside kvwatch")
    ap.add_argument("--tree", type=Path, action="append", default=[],
                    help="another checkout to run kvwatch from, alternating with this one")
    ap.add_argument("--side-by-side", action="store_true",
                    help="with --tree: run the trees' kvwatch at once (the same load for each), not in turn")
    args = ap.parse_args()
    trees = [ROOT, *(t.resolve() for t in args.tree)]
    print(describe() + "; " + load_average() + " at start")
    hist = f"history_window {args.history:g} s" if args.history else "default history (600 s)"
    print(f"kvwatch from {ROOT}; 1 s interval; warm-up {args.warmup:g} s, window {args.window:g} s; "
          f"tui = 200x50 pty with drawing, json = --json, no drawing; {hist}; "
          + ("live pages (growing at every request)" if args.live else "static pages"))
    if not args.no_floor:
        client_floor(args.floor_endpoints, args.floor_rounds, live=args.live)
    if args.floor_only:
        return 0
    if len(trees) > 1:
        print("trees: " + "; ".join(f"{i}: {t}" for i, t in enumerate(trees)))
    print("floor = a bare asyncio.Protocol keep-alive client fetching each page once + a stdlib regex tokenising its "
          "samples + float() of each value (bench/floor.py), run as a process of its own beside kvwatch, paced at "
          "1 Hz, over the same window (floor %: its CPU per page x the pages kvwatch kept); x floor = CPU / that. "
          "x tight: against the same floor measured in a tight loop in this process just before and after the row")
    print(f"{'endpoints':>9} {'mode':<5} {'tree' if len(trees) > 1 else '':<4} {'CPU % core':>10} {'floor %':>8} "
          f"{'x floor':>8} {'x tight':>11} {'kept Hz':>8} {'RSS MiB':>8}  vs targets (RSS at {args.warmup + args.window:g} s)")
    scratch = Path(tempfile.mkdtemp(prefix="kvwatch-bench-"))
    config = os.devnull + ".none"  # the product's defaults
    if args.history:
        config = str(scratch / "config.toml")
        Path(config).write_text(f"history_window = {args.history:g}\n")
    for n in args.endpoints:
        with PageFleet(n, live=args.live) as fleet:
            for mode in args.modes:
                if mode == "json" and n not in args.json_endpoints:
                    continue
                envs, lags, mems = [], [], []
                for i, tree in enumerate(trees):
                    env = dict(kvwatch_env(tree), KVWATCH_CONFIG=config)
                    lags.append(scratch / f"looplag-{n}-{mode}-{i}.txt")
                    mems.append(scratch / f"memtrace-{n}-{mode}-{i}.txt")
                    if args.loop_lag:
                        env["KVWATCH_BENCH_LOOPLAG"] = str(lags[i])
                    if args.mem_trace:
                        env["KVWATCH_BENCH_MEMTRACE"] = str(mems[i])
                    if args.loop_lag or args.mem_trace:
                        env["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent / "probe")
                    envs.append(env)
                together = args.side_by_side and len(trees) > 1
                if together:
                    started = time.monotonic()
                    before = measure_floor(fleet.ports)
                    with BesideFloor(fleet.ports) as beside:
                        windows = run_side_by_side([(kvwatch_argv(fleet.urls, mode), e) for e in envs], mode, fleet,
                                                   args.warmup, args.window, beside)
                    after = measure_floor(fleet.ports)
                for i in range(len(trees)):
                    if not together:
                        started = time.monotonic()
                        before = measure_floor(fleet.ports)
                        with BesideFloor(fleet.ports) as beside:
                            w, = run_side_by_side([(kvwatch_argv(fleet.urls, mode), envs[i])], mode, fleet,
                                                  args.warmup, args.window, beside)
                        after = measure_floor(fleet.ports)
                    else:
                        w = windows[i]
                    # per page kept, so a run starved below 1 Hz is not flattered
                    beside_pct = beside.pct_core(n, w.hz)
                    ratio = w.cpu_pct / beside_pct
                    floor_pct = statistics.mean([before.pct_core(n, w.hz), after.pct_core(n, w.hz)])
                    tight = w.cpu_pct / floor_pct
                    note = "" if w.alive else "  (exited before the window ended)"
                    if together and i > 0:
                        note += f"  ({w.cpu_pct / windows[0].cpu_pct:.3f}x tree 0's CPU, side by side)"
                    judged = "; ".join(v for v in (floor_verdict(mode, n, ratio), verdict(mode, n, w.cpu_pct)) if v)
                    print(f"{n:>9} {mode:<5} {i if len(trees) > 1 else '':<4} {w.cpu_pct:>10.1f} {beside_pct:>8.1f} "
                          f"{ratio:>7.2f}x {tight:>10.2f}x {w.hz:>8.2f} {w.rss_mib:>8.0f}  {judged}{note}", flush=True)
                    if not together or i == len(trees) - 1:
                        print(f"{'':>16}{beside.describe()}; {before.describe()} before, "
                              f"{after.per_page_s * 1e6:.0f} us after; {load_average()}"
                              + ("; the trees ran side by side" if together else ""), flush=True)
                    if args.loop_lag:
                        print(f"{'':>16}{loop_lag(lags[i], w)}", flush=True)
                    if args.mem_trace:
                        print(f"{'':>16}{mem_trace(mems[i], started)}", flush=True)
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""1024 replicas at 1 Hz with busy loops running beside kvwatch: is every refresh on time, is
any replica that answered shown stale, and how long can the event loop be held?

    .venv/bin/python bench/bench_busy_fleet.py [--replicas 1024] [--busy 2] [--warmup 15] [--seconds 40] [--live]

N static real-size vLLM V1 pages on 127.0.0.1 (bench/fleetserve.py, its own process; it answers
every request the moment it reads it; `--live`: pages whose counters and histograms grow at
every request, as a running server's, the floor measured on them too), `--busy` Python processes spinning beside kvwatch (each
bounded: it stops by itself after the run's length, and is ended at exit), and
`kvwatch --url ... --interval 1 --json --duration D` from this tree (it stops by itself too).
Read from kvwatch's own output after the warm-up:
  refresh gaps: between consecutive frames' `ts` (target: none over 1.5 s): median, p95, max
  stale but answered: replica rows not "ok" in a frame although the page server answered every
      request it was sent (it never fails; its per-run count is printed beside)
  loop lag: the longest event-loop callback of the kvwatch process (bench/probe; wall, with the CPU
      it used: on a busy machine the rest is waiting for a core), and how many
      took 50 / 100 ms or more (target: under 50 ms)
  CPU: kvwatch's whole process over the window, in % of one core, and per page it kept as a
      ratio to the floor (bench/floor.py) measured on the same pages with the busy loops running,
      before kvwatch starts and after it stops; and the share of a core 1 Hz would need at that
      cost (above the share kvwatch got: the CPU, not the pipeline's schedule, is what is short).
Loopback only; everything it starts is ended when it returns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_fleet_cpu import kvwatch_argv, kvwatch_env, loop_lag  # noqa: E402
from bench.fleetserve import PageFleet  # noqa: E402
from bench.floor import measure_floor  # noqa: E402
from bench.machine import describe, load_average  # noqa: E402
from bench.procmeter import Window, spawn_piped, tree_cpu_s  # noqa: E402

BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
GAP_TARGET_S, LAG_TARGET_MS = 1.5, 50.0


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=1024)
    ap.add_argument("--busy", type=int, default=2, help="busy Python loops beside kvwatch")
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--seconds", type=float, default=40.0, help="the window judged, after the warm-up")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run kvwatch from")
    ap.add_argument("--live", action="store_true", help="pages that change at every request (a live server's)")
    args = ap.parse_args()
    run_s = args.warmup + args.seconds
    print(describe() + "; " + load_average() + " at start (the machine may be shared: the load says by how much)")
    print(f"{args.replicas} replicas, kvwatch --json at 1 s from {args.tree.resolve()}, {args.busy} busy loops "
          f"beside it; warm-up {args.warmup:g} s, window {args.seconds:g} s; " + ("live pages" if args.live else "static pages"))
    scratch = Path(tempfile.mkdtemp(prefix="kvwatch-busy-"))
    lag = scratch / "looplag.txt"
    busy: list[subprocess.Popen] = []
    with PageFleet(args.replicas, live=args.live) as fleet:
        try:
            busy = [subprocess.Popen([sys.executable, "-c", BUSY.format(s=run_s + 30)]) for _ in range(args.busy)]
            before = measure_floor(fleet.ports)
            env = dict(kvwatch_env(args.tree.resolve()), KVWATCH_BENCH_LOOPLAG=str(lag))
            env["PYTHONPATH"] += os.pathsep + str(Path(__file__).resolve().parent / "probe")
            argv = kvwatch_argv(fleet.urls, "json") + ["--duration", f"{run_s + 5:g}"]
            tool = spawn_piped(argv, env, keep_output=True)
            try:
                time.sleep(args.warmup)
                c0, r0, t0, wall0 = tree_cpu_s(tool.pid), fleet.metrics_requests(), time.monotonic(), time.time()
                time.sleep(args.seconds)
                c1, r1, t1, wall1 = tree_cpu_s(tool.pid), fleet.metrics_requests(), time.monotonic(), time.time()
            finally:
                tool.stop()
            after = measure_floor(fleet.ports)
        finally:
            for b in busy:
                b.terminate()
            for b in busy:
                b.wait(10)
    frames = []
    for line in tool.output.decode("utf-8", "replace").splitlines():
        try:
            frame = json.loads(line)
        except ValueError:
            continue
        if isinstance(frame, dict) and wall0 <= frame.get("ts", 0) <= wall1:
            frames.append(frame)
    ts = [f["ts"] for f in frames]
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    states: dict[str, int] = {}
    for f in frames:
        for r in f.get("replicas", []):
            states[r.get("state")] = states.get(r.get("state"), 0) + 1
    not_ok = sum(v for k, v in states.items() if k != "ok")
    cpu = 100.0 * (c1 - c0) / (t1 - t0)
    floor_pct = statistics.mean([before.pct_core(args.replicas), after.pct_core(args.replicas)])
    answered = (r1 - r0) / args.replicas / (t1 - t0)
    print(f"frames in the window: {len(frames)} ({len(frames) / (t1 - t0):.2f}/s); requests answered by the page "
          f"server: {r1 - r0} = {answered:.2f} per replica per second, none refused")
    if gaps:
        late = sum(g > GAP_TARGET_S for g in gaps)
        print(f"refresh gaps: median {statistics.median(gaps):.3f} s, p95 {pct(gaps, 0.95):.3f} s, max {max(gaps):.3f} s; "
              f"{late} over {GAP_TARGET_S:g} s: {'met' if late == 0 else 'MISSES'}")
    else:
        print("refresh gaps: no frames in the window: MISSES")
    print(f"replica rows: {sum(states.values())}, by state {dict(sorted(states.items(), key=str))}; stale but answered: "
          f"{not_ok}: {'met' if not_ok == 0 and frames else 'MISSES'}")
    w = Window(cpu, answered, 0.0, True, t0, t1)
    longest = max((float(line.split(" ", 2)[1]) for line in lag.read_text().splitlines()
                   if t0 <= float(line.split(" ", 1)[0]) <= t1), default=0.0) if lag.exists() else 0.0
    print(f"loop: {loop_lag(lag, w)}: {'met' if longest < LAG_TARGET_MS else 'MISSES'} (< {LAG_TARGET_MS:g} ms)")
    kept_pct = floor_pct * answered  # the floor's cost for the pages kvwatch did read
    print(f"kvwatch CPU {cpu:.1f}% of one core; per page kept {cpu / kept_pct:.2f}x the floor (the floor: "
          f"{floor_pct:.1f}% of a core for {args.replicas} pages/s, {kept_pct:.1f}% for the {answered:.2f} Hz kept; "
          f"{before.describe()} before, {after.per_page_s * 1e6:.0f} us after, busy loops running). 1 Hz needs "
          f"{cpu / answered if answered else float('nan'):.0f}% of a core at this cost; kvwatch got {cpu:.0f}%")
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Process start to the first screen WITH DATA, 3 replicas: kvwatch vs a bare Textual app.

    .venv/bin/python bench/bench_first_paint.py [--reps 5] [--no-importtime] [--top 15]

Both run in a 200x50 pty from a clock started before the interpreter is exec'd, alternating
(floor, kvwatch, floor, ...) so the machine's load hits both alike. kvwatch is
`kvwatch --url ... x3` against static real-size vLLM pages (bench/fleetserve.py); "with
data" is the first frame showing a replica's KV usage ("42%" from the page). The floor is a
Textual app with one Static showing the same text, the least any Textual screen can cost.
Target (issue 14): kvwatch within 0.15 s of the floor.

Then `python -X importtime` of the same kvwatch run: the top-level imports by cumulative
time, and the modules imported that `--url` mode does not use.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_fleet_cpu import kvwatch_argv, kvwatch_env  # noqa: E402
from bench.fleetserve import PageFleet  # noqa: E402
from bench.machine import describe, load_average  # noqa: E402
from bench.procmeter import spawn_pty  # noqa: E402

NEEDLE = b"42%"  # kv_cache_usage_perc 0.4213 on every page
TARGET_S = 0.15
FLOOR = ("from textual.app import App\nfrom textual.widgets import Static\n"
         "class Floor(App):\n    def compose(self):\n        yield Static('replica 42%')\n"
         "Floor().run()\n")
# Imported by kvwatch at start but used by other modes (Kubernetes, Prometheus, replay, demo,
# GPU sampling, plots) or only once a screen asks for it.
NOT_FOR_URL = ("kubernetes", "plotext", "textual_plotext", "yaml", "pynvml", "amdsmi", "tui.kube_launch",
               "tui.core.cluster", "tui.core.sim", "tui.core.sources.prometheus", "tui.core.sources.promclient",
               "tui.core.sources.promql", "tui.core.sources.replay", "tui.core.sources.gpu", "tui.core.audit",
               "tui.core.record", "tui.core.offline", "tui.screens.mitigation", "tui.screens.replay",
               "tui.commands", "widgets.plot")


def time_to(argv: list[str], env: dict[str, str], needle: bytes, limit_s: float = 15.0) -> float | None:
    tool = spawn_pty(argv, env, keep_output=True)
    try:
        while time.monotonic() - tool.started < limit_s:
            if needle in tool.output:
                return time.monotonic() - tool.started
            time.sleep(0.002)
        return None
    finally:
        tool.stop()


def importtime(argv: list[str], env: dict[str, str], seconds: float = 4.0) -> list[tuple[int, int, int, str]]:
    """(depth, self us, cumulative us, module) for every import of a kvwatch run in a pty."""
    with tempfile.NamedTemporaryFile("r", suffix=".importtime") as log:
        # the shell sends only stderr (importtime's output) to the file; the pty stays the terminal
        cmd = " ".join(_q(a) for a in [argv[0], "-X", "importtime", *argv[1:]]) + f" 2>{_q(log.name)}"
        tool = spawn_pty(["/bin/sh", "-c", "exec " + cmd], env)
        time.sleep(seconds)
        tool.stop()
        rows = []
        for line in log.read().splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)", line)
            if m:
                rows.append((len(m.group(3)) // 2, int(m.group(1)), int(m.group(2)), m.group(4)))
        return rows


def compile_tree(env: dict[str, str]) -> None:
    """Byte-compile kvwatch's packages first, as an install does (Textual, the floor's only code,
    comes compiled from site-packages): with PYTHONDONTWRITEBYTECODE set, each run would
    otherwise compile ~40 modules from source, ~35 ms that no installed kvwatch pays."""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", "tui", "widgets", "themes"],
                   cwd=root, env=env, stdout=subprocess.DEVNULL, check=True)


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--no-importtime", action="store_true")
    args = ap.parse_args()
    print(describe() + "; " + load_average() + " at start")
    env = kvwatch_env()
    compile_tree(env)
    floor_argv = [sys.executable, "-c", FLOOR]
    with PageFleet(3) as fleet:
        ours_argv = kvwatch_argv(fleet.urls, "tui")
        floor, ours = [], []
        for _ in range(args.reps):
            f, k = time_to(floor_argv, env, NEEDLE), time_to(ours_argv, env, NEEDLE)
            if f is not None:
                floor.append(f)
            if k is not None:
                ours.append(k)
        print(f"first screen with data, 3 replicas, 200x50 pty, {args.reps} alternating reps "
              f"(process start -> first frame showing KV usage):")
        if not floor or not ours:
            print(f"  no data on screen within 15 s (floor {len(floor)}/{args.reps}, kvwatch {len(ours)}/{args.reps})")
            return 1
        f, k = statistics.median(floor), statistics.median(ours)
        print(f"  floor (bare Textual app, one Static) median {f:.3f} s  [{min(floor):.3f}-{max(floor):.3f}]")
        print(f"  kvwatch --url x3                     median {k:.3f} s  [{min(ours):.3f}-{max(ours):.3f}]")
        d = k - f
        print(f"  difference {d:+.3f} s = {k / f:.2f}x the floor; target within {TARGET_S:g} s: "
              f"{'meets' if d <= TARGET_S else 'MISSES'} ({d / TARGET_S:.1f}x the allowed difference)")
        if not args.no_importtime:
            rows = importtime(ours_argv, env)
            total = sum(r[1] for r in rows)
            print(f"\n-X importtime of the same run: {len(rows)} modules, {total / 1e3:.0f} ms of import (self, summed)")
            print("  top-level imports by cumulative time:")
            for _depth, _, cum, name in sorted((r for r in rows if r[0] == 0), key=lambda r: -r[2])[:args.top]:
                print(f"    {cum / 1e3:7.1f} ms  {name}")
            unused = [r for r in rows if any(r[3] == p or r[3].startswith(p + ".") for p in NOT_FOR_URL)]
            tops: dict[str, list[int]] = {}  # root -> [own self time, largest cumulative]
            for _, own, cum, name in unused:
                root = next(p for p in NOT_FOR_URL if name == p or name.startswith(p + "."))
                t = tops.setdefault(root, [0, 0])
                t[0] += own
                t[1] = max(t[1], cum)
            print("  imported although --url mode does not use it: own modules' time (cumulative, which also")
            print("  counts shared dependencies such as httpx when they are first imported through it):")
            for root, (own, cum) in sorted(tops.items(), key=lambda kv: -kv[1][0]):
                print(f"    {own / 1e3:7.1f} ms ({cum / 1e3:6.1f} ms)  {root}")
            absent = [p for p in NOT_FOR_URL if p not in tops and "." not in p]
            print("  not imported: " + (", ".join(absent) or "none of the third-party ones"))
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

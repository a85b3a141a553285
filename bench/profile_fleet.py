"""Where kvwatch's CPU goes at N endpoints: py-spy samples of the TUI (200x50 pty) or the
headless collector (`--json`) against static real-size pages, summarised by function.

    .venv/bin/python bench/profile_fleet.py --py-spy PATH [--endpoints 256] [--modes tui json]
                                            [--warmup 8] [--seconds 30] [--rate 100]

py-spy is not a kvwatch dependency: install it into a separate venv
(`python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install py-spy`). Only samples where the
process is running count (idle waits are left out, py-spy's default), so the percentages are
shares of kvwatch's CPU. "incl" counts a sample once for every function on its stack
(cumulative); "self" only for the innermost one. Areas group the samples by pipeline stage.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_fleet_cpu import kvwatch_argv, kvwatch_env  # noqa: E402
from bench.fleetserve import PageFleet  # noqa: E402
from bench.machine import describe, load_average  # noqa: E402
from bench.procmeter import spawn_piped, spawn_pty  # noqa: E402

# (area, substrings of a frame's "function (file)"). A sample goes to the innermost frame that
# belongs to an area; frames of shared data classes and of the event loop are skipped, so that
# `Sample.value` counts for its caller (history, diagnosis) and a socket write for the client.
AREAS = (
    ("HTTP client (httpx/httpcore/h11/anyio)", ("httpx/", "httpcore/", "h11/", "anyio/")),
    ("parse + to_sample (metrics/)", ("core/metrics/",)),
    ("history windows (history.py)", ("core/history.py",)),
    ("diagnosis", ("core/diagnosis/",)),
    ("monitor: fleet view, sort", ("core/monitor.py",)),
    ("headless JSON", ("core/headless.py", "core/export.py")),
    ("drawing (textual/rich/widgets/screens)", ("textual/", "rich/", "widgets/", "tui/screens/", "tui/app.py")),
    ("scrape orchestration (direct.py)", ("core/sources/direct.py",)),
)
LOOP = "event loop, select, gc, other"
# entry points and the loop's own frames, on nearly every stack: left out of the function table
ROOTS = ("(asyncio/runners.py)", "(asyncio/base_events.py)", "(asyncio/events.py)", "<module> (<string>)",
         "(tui/cli.py)", "(tui/launch.py)", "App.run (textual/app.py)", "(threading.py)")
_LINE = re.compile(r":\d+\)$")


def _frames(stack: str) -> list[str]:
    """The stack outermost first, line numbers dropped so a function is one entry."""
    return [_LINE.sub(")", f) for f in stack.split(";") if not f.startswith(("process ", "thread "))]


def _area(frames: list[str]) -> str:
    for f in reversed(frames):
        if any(r in f for r in ROOTS):  # `App.run (textual/app.py)` is under every stack: not drawing
            continue
        for area, keys in AREAS:
            if any(k in f for k in keys):
                return area
    return LOOP


def summarise(raw: str, top: int) -> str:
    incl, self_, areas, total = Counter(), Counter(), Counter(), 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        n = int(n)
        frames = _frames(stack)
        if not frames:
            continue
        total += n
        for f in set(frames):
            incl[f] += n
        self_[frames[-1]] += n
        areas[_area(frames)] += n
    if not total:
        return "no samples (the process was idle or py-spy could not attach)\n"
    out = [f"{total} samples", "", "| area | % of samples |", "|---|---|"]
    out += [f"| {a} | {100 * c / total:.1f} |" for a, c in areas.most_common()]
    inner = [(f, c) for f, c in incl.most_common() if not any(r in f for r in ROOTS)]
    out += ["", "| function (cumulative; entry points and the loop left out) | % |", "|---|---|"]
    out += [f"| `{f}` | {100 * c / total:.1f} |" for f, c in inner[:top]]
    out += ["", "| function (self) | % |", "|---|---|"]
    out += [f"| `{f}` | {100 * c / total:.1f} |" for f, c in self_.most_common(top)]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--py-spy", required=True, help="path to the py-spy executable")
    ap.add_argument("--endpoints", type=int, default=256)
    ap.add_argument("--modes", nargs="+", default=["tui", "json"], choices=["tui", "json"])
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--live", action="store_true", help="live pages: counters grow at every request")
    ap.add_argument("--raw", metavar="PREFIX", help="also keep py-spy's raw stacks in PREFIX-MODE.raw")
    args = ap.parse_args()
    print(describe() + "; " + load_average() + " at start")
    env = kvwatch_env()
    with PageFleet(args.endpoints, live=args.live) as fleet:
        for mode in args.modes:
            argv = kvwatch_argv(fleet.urls, mode)
            tool = spawn_pty(argv, env) if mode == "tui" else spawn_piped(argv, env)
            try:
                time.sleep(args.warmup)
                with tempfile.NamedTemporaryFile("r", suffix=".raw") as out:
                    r = subprocess.run([args.py_spy, "record", "-p", str(tool.pid), "-d", str(args.seconds),
                                        "-r", str(args.rate), "-f", "raw", "-o", out.name, "--nonblocking"],
                                       check=False, capture_output=True, text=True)
                    raw = out.read()
                if args.raw:
                    Path(f"{args.raw}-{mode}.raw").write_text(raw)
                if not raw:
                    print(r.stderr.strip()[-400:])
            finally:
                tool.stop()
            what = "TUI, 200x50 pty, drawing" if mode == "tui" else "--json, no drawing"
            print(f"\n### {args.endpoints} endpoints, {what}: {args.seconds} s after {args.warmup:g} s warm-up, "
                  f"{args.rate} Hz\n")
            print(summarise(raw, args.top), flush=True)
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

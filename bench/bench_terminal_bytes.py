"""Bytes kvwatch writes to the terminal per second, at a 1 s refresh with 16 replicas.

    .venv/bin/python bench/bench_terminal_bytes.py                 # simulated fleet, 200x50 and 80x24
    .venv/bin/python bench/bench_terminal_bytes.py --source scripted --seconds 20

The app runs under a real pseudo-terminal (Textual's Linux driver, as over SSH), everything it
writes is counted, and the figure is the mean over the steady state (after a warm-up that covers
the first paint and the history filling the sparklines). Over a slow SSH link or a bastion, this
is the bandwidth a dashboard left open all day costs.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.ui.ptyrun import run_in_pty, scripted_app  # noqa: E402

DEMO_APP = """
import sys
from tui.cli import main
sys.exit(main(["demo", "--replicas", "{n}", "--scenario", "{scenario}", "--interval", "{interval}",
               "--speed", "{speed}"] + {extra!r}))
"""


def measure(code: str, cols: int, rows: int, seconds: float, warmup: float, env: dict) -> tuple[float, float, int]:
    run = run_in_pty(code, cols, rows, warmup + seconds, env)
    steady = run.bytes_between(warmup, warmup + seconds)
    first = run.bytes_between(0, warmup)
    return steady / seconds, first, run.exit_status or 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", choices=("sim", "scripted"), default="sim")
    ap.add_argument("--scenario", default="steady")
    ap.add_argument("--replicas", type=int, default=16)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=30.0, help="steady-state seconds measured per size")
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--size", action="append", default=[], help="COLSxROWS (default 200x50 and 80x24)")
    ap.add_argument("--term", default="xterm-256color")
    ap.add_argument("--ascii", action="store_true")
    args = ap.parse_args()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.size] or [(200, 50), (80, 24)]
    env = dict(os.environ, TERM=args.term, KVWATCH_CONFIG=os.devnull + ".none")
    env.pop("NO_COLOR", None)
    if args.source == "sim":
        code = DEMO_APP.format(n=args.replicas, scenario=args.scenario, interval=args.interval, speed=1,
                               extra=["--ascii"] if args.ascii else [])
    else:
        code = scripted_app(args.replicas, args.interval, ascii=args.ascii)
    print(f"kvwatch terminal output: {args.replicas} replicas, {args.source}"
          f"{' ' + args.scenario if args.source == 'sim' else ''}, refresh {args.interval:g}s, TERM={args.term}")
    for cols, rows in sizes:
        rate, first, rc = measure(code, cols, rows, args.seconds, args.warmup, env)
        print(f"  {cols}x{rows}: {rate / 1024:6.2f} KiB/s steady ({rate:8.0f} B/s over {args.seconds:g}s); "
              f"first {args.warmup:g}s {first / 1024:.1f} KiB; exit {rc}")


if __name__ == "__main__":
    main()

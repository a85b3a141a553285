"""Time from process start to the first painted fleet screen, and to the first data row.

    .venv/bin/python bench/bench_startup.py [--runs 5]

kvwatch runs in a real pseudo-terminal (tests/ui/ptyrun.py) as `kvwatch demo`; the clock starts
before the Python interpreter is exec'd, so imports, the simulated fleet's start, Textual's
start-up and the first scrape all count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.machine import describe  # noqa: E402
from tests.ui.ptyrun import run_in_pty  # noqa: E402

APP = """
import sys
from tui.cli import main
sys.exit(main(["demo", "--replicas", "{n}"]))
"""


def first_time(run, needle: bytes) -> float | None:
    at = run.output.find(needle)
    if at < 0:
        return None
    seen = 0
    for t, n in run.chunks:
        seen += n
        if seen > at:
            return t
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--replicas", type=int, default=8)
    args = ap.parse_args()
    env = dict(os.environ, TERM="xterm-256color", KVWATCH_CONFIG=os.devnull + ".none")
    env.pop("NO_COLOR", None)
    screen, row = [], []
    for _ in range(args.runs):
        run = run_in_pty(APP.format(n=args.replicas), 120, 36, 6.0, env)
        s, r = first_time(run, b"REPLICA"), first_time(run, b"llama-8b-0")
        if s is not None:
            screen.append(s)
        if r is not None:
            row.append(r)
    print(describe())
    print(f"kvwatch demo --replicas {args.replicas}, 120x36 pty, {args.runs} runs")
    if screen:
        print(f"first painted screen (table header): median {statistics.median(screen):.2f} s, max {max(screen):.2f} s")
    if row:
        print(f"first replica row (after the first scrape): median {statistics.median(row):.2f} s, max {max(row):.2f} s")
    if not screen:
        print("the fleet screen never appeared")
        sys.exit(1)


if __name__ == "__main__":
    main()

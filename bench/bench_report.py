"""Peak memory and time of `kvwatch report` next to `kvwatch diagnose` as a recording grows.

    .venv/bin/python bench/bench_report.py RECORDING[.gz] [--copies 2,10] [--audit FILE]

The recording (e.g. the game day's, `python -m tests.gameday_record DIR`) is written COPIES
times end to end, each copy shifted in time past the one before, into one gzip file; both
commands then read that file in a child process each, and the child's peak RSS is printed.
Memory that stays flat while the file grows is what "streamed in bounded memory" means.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lines(path: str):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rt") if gz else open(path)) as f:
        yield from f


def stretch(src: str, copies: int, out: str) -> int:
    """`copies` shifted copies of `src` in `out`; the number of records written."""
    first = last = None
    for raw in _lines(src):
        if raw.strip():
            ts = json.loads(raw)["ts"]
            first = ts if first is None else min(first, ts)
            last = ts if last is None else max(last, ts)
    span = (last - first) + 10.0
    n = 0
    with gzip.open(out, "wt", compresslevel=1) as f:
        for k in range(copies):
            for raw in _lines(src):
                if not raw.strip():
                    continue
                rec = json.loads(raw)
                rec["ts"] += k * span
                f.write(json.dumps(rec) + "\n")
                n += 1
    return n


def child(argv: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of `kvwatch ARGV` run in a child process."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"kvwatch {' '.join(argv)} failed: {proc.stderr[-500:]}")
    peak = next(int(ln.split()[1]) for ln in proc.stderr.splitlines() if ln.startswith("PEAK_RSS_KIB "))
    return took, peak / 1024


# a fresh interpreter per run that says its own peak RSS (ru_maxrss, KiB on Linux) when done
_CHILD = ("import resource, sys\nfrom tui.cli import main\nrc = main(sys.argv[1:])\n"
          "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
          "sys.exit(rc)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recording")
    ap.add_argument("--copies", default="2,10")
    ap.add_argument("--audit", default=None)
    args = ap.parse_args()
    print(f"{'copies':>6} {'records':>8} {'file MiB':>9} {'diagnose s':>10} {'MiB':>6} {'report s':>9} {'MiB':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for copies in (int(c) for c in args.copies.split(",")):
            big = os.path.join(tmp, f"x{copies}.jsonl.gz")
            n = stretch(args.recording, copies, big)
            size = os.path.getsize(big) / 2**20
            ds, dm = child(["diagnose", big, "--json"])
            audit = ["--audit", args.audit] if args.audit else []
            rs, rm = child(["report", big, *audit, "-o", os.path.join(tmp, "r.html")])
            print(f"{copies:>6} {n:>8} {size:>9.1f} {ds:>10.1f} {dm:>6.0f} {rs:>9.1f} {rm:>6.0f}", flush=True)
            os.unlink(big)
    return 0


if __name__ == "__main__":
    sys.exit(main())

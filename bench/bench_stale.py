"""How many live replicas a `--json` run shows "stale", per refresh, at N replicas and 1 Hz.

    python bench/bench_stale.py [--replicas 1024] [--seconds 12] [--reps 2] [--tree OLD_CHECKOUT]

Every replica is an endpoint of one loopback fault server (tests/faultserver.py, the small
1.3 KB page) that answers at once, so a replica shown stale is one whose answer came in but
was not taken in time: the refresh ran late, not the replica. Prints, per run, the refreshes per
second and the stale count on each line after the first; `--tree` runs another checkout (e.g. an
`git archive` of an older commit) beside this one, alternating, under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.faultserver import ThreadedFaultServer, clean_env  # noqa: E402


def run(tree: str, urls: list[str], seconds: float) -> tuple[list[int], float | None]:
    env = clean_env(tempfile.mkdtemp(prefix="kvwatch-stale-"))
    env["PYTHONPATH"] = tree
    argv = [sys.executable, "-P", "-m", "tui.cli", "--json", "--duration", str(seconds), "--interval", "1",
            "--timeout", "3"]
    for u in urls:
        argv += ["--url", u]
    p = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=seconds + 120)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    stale = [sum(r["state"] == "stale" for r in line.get("replicas", [])) for line in lines]
    ts = [line["ts"] for line in lines if "ts" in line]
    rate = (len(ts) - 1) / (ts[-1] - ts[0]) if len(ts) > 2 and ts[-1] > ts[0] else None
    return stale[1:], rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--tree", help="another checkout to run beside this one")
    args = ap.parse_args()
    trees = [("this tree", ROOT)] + ([(f"tree {args.tree}", args.tree)] if args.tree else [])
    print(f"{args.replicas} replicas, --json --interval 1, {args.seconds:g} s a run")
    with ThreadedFaultServer(lifetime=args.reps * len(trees) * (args.seconds + 130)) as srv:
        base = srv.add("small")
        urls = [f"{base}/r{i}/metrics" for i in range(args.replicas)]
        for rep in range(args.reps):
            for name, tree in trees:
                stale, rate = run(tree, urls, args.seconds)
                hit = sum(1 for s in stale if s)
                print(f"{name:<24} rep {rep}: {rate or 0:.2f} refreshes/s; lines with a stale replica "
                      f"{hit}/{len(stale)}; stale per line {stale}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

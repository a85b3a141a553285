"""kvwatch beside its peers (vllm-htop, vllmstat) at 3 / 64 / 256 endpoints, one run.

    .venv/bin/python bench/peers.py [--endpoints 3 64 256] [--warmup 10] [--window 10] [--venv DIR]

The peers are installed from the package index into a temporary virtual environment (or
into --venv DIR, kept for the next run). A peer that does not exist under that name, fails to
install or fails to start is reported and skipped; the run goes on. Each tool runs in a 200x50
pty (drawing included) at a 1 s interval against the same static real-size pages
(bench/fleetserve.py), in turn, per endpoint count; the table gives each tool's whole-process
CPU (% of one core), refreshes kept (/metrics requests per endpoint per second, counted by
the page server) and RSS after the window, kvwatch's CPU as a ratio to each peer's, and each
tool's CPU per page kept as a ratio to the floor (bench/floor.py) measured on the same pages
before and after the tools ran: the figure that carries from one machine to another.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_fleet_cpu import kvwatch_argv, kvwatch_env, run_tool  # noqa: E402
from bench.fleetserve import PageFleet  # noqa: E402
from bench.floor import measure_floor  # noqa: E402
from bench.machine import describe, load_average  # noqa: E402

PEERS = ("vllm-htop", "vllmstat")


def _base(url: str) -> str:
    return url.rsplit("/metrics", 1)[0]


def peer_argv(venv: Path, name: str, urls: list[str]) -> list[str]:
    exe = str(venv / "bin" / name)
    bases = [_base(u) for u in urls]
    if name == "vllm-htop":
        return [exe, "--url", *bases, "--interval", "1", "--no-gpu-detect"]
    argv = [exe, "--interval", "1", "--no-gpu"]
    for b in bases:
        argv += ["--url", b]
    return argv


def install(venv: Path) -> dict[str, str]:
    """name -> version for the peers that installed; prints why the others did not."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    got = {}
    for name in PEERS:
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", name], capture_output=True, text=True)
        exe = venv / "bin" / name
        if r.returncode != 0 or not exe.exists():
            last = (r.stderr.strip().splitlines() or ["no console script"])[-1]
            print(f"{name}: not installed, skipped ({last[:160]})")
            continue
        show = subprocess.run([str(venv / "bin" / "pip"), "show", name], capture_output=True, text=True).stdout
        got[name] = next((ln.split(":", 1)[1].strip() for ln in show.splitlines() if ln.startswith("Version:")), "?")
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoints", type=int, nargs="+", default=[3, 64, 256])
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--venv", help="install the peers here and keep it (default: a temporary one)")
    args = ap.parse_args()
    print(describe() + "; " + load_average() + " at start")
    venv = Path(args.venv) if args.venv else Path(tempfile.mkdtemp(prefix="kvwatch-peers-"))
    try:
        versions = install(venv)
        print("peers: " + (", ".join(f"{k} {v}" for k, v in versions.items()) or "none installed"))
        print(f"each tool in a 200x50 pty (drawing included, each with its default history), 1 s interval, "
              f"warm-up {args.warmup:g} s, window {args.window:g} s, in turn")
        print("floor: a bare asyncio.Protocol keep-alive client fetching each page once + a stdlib regex tokenising "
              "its samples + float() (bench/floor.py), on the same pages before and after the tools; x floor = the "
              "tool's CPU per page kept / the floor's CPU per page")
        print(f"{'endpoints':>9} {'tool':<12} {'CPU % core':>10} {'kept Hz':>8} {'RSS MiB':>8} {'CPU ms/page':>11} "
              f"{'x floor':>8}  kvwatch/this: CPU, CPU per page kept")
        env = kvwatch_env()
        peer_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
        for n in args.endpoints:
            with PageFleet(n) as fleet:
                before = measure_floor(fleet.ports)
                rows = [("kvwatch", run_tool(kvwatch_argv(fleet.urls, "tui"), env, "tui", fleet,
                                             args.warmup, args.window))]
                for name in versions:
                    try:
                        rows.append((name, run_tool(peer_argv(venv, name, fleet.urls), peer_env, "tui", fleet,
                                                    args.warmup, args.window)))
                    except OSError as e:
                        print(f"{n:>9} {name:<12} failed to start: {e}")
                after = measure_floor(fleet.ports)
                floor_ms = (before.per_page_s + after.per_page_s) / 2 * 1e3
                print(f"{n:>9} {'floor':<12} {floor_ms * n / 10:>10.1f} {1.0:>8.2f} {'':>8} {floor_ms:>11.2f} "
                      f"{1.0:>7.2f}x  ({before.describe()} before; {after.per_page_s * 1e6:.0f} us after; "
                      f"{load_average()})", flush=True)
                # a tool that keeps fewer refreshes does less work: compare CPU per page it kept too
                per_page = {name: w.cpu_pct * 10 / (w.hz * n) if w.hz else float("nan") for name, w in rows}
                ours, ours_pp = rows[0][1].cpu_pct, per_page["kvwatch"]
                for name, w in rows:
                    ratio = "" if name == "kvwatch" or not w.cpu_pct else \
                        f"{ours / w.cpu_pct:5.2f}x, {ours_pp / per_page[name]:5.2f}x"
                    note = "" if w.alive else "  (exited before the window ended)"
                    print(f"{n:>9} {name:<12} {w.cpu_pct:>10.1f} {w.hz:>8.2f} {w.rss_mib:>8.0f} {per_page[name]:>11.2f} "
                          f"{per_page[name] / floor_ms:>7.2f}x  {ratio}{note}", flush=True)
    finally:
        if not args.venv:
            shutil.rmtree(venv, ignore_errors=True)
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

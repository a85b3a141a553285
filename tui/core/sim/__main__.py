"""Serve a simulated fleet until interrupted: `python -m tui.core.sim --scenario long-prompts`.

Prints one line per replica (name, group, metrics URL, DCGM URL) and, with --file-sd, writes
Prometheus file_sd target lists, so Prometheus and other tools can scrape the fleet.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from .fleet import SimFleet
from .scenarios import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tui.core.sim", description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="steady", choices=sorted(SCENARIOS))
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--v0-replicas", type=int, default=0, help="how many of the replicas speak V0 metric names")
    ap.add_argument("--speed", type=float, default=1.0, help="simulated seconds per wall second")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="first port (consecutive ports); 0 = ephemeral")
    ap.add_argument("--file-sd", metavar="PATH", help="write Prometheus file_sd JSON for the /metrics targets")
    ap.add_argument("--dcgm-file-sd", metavar="PATH", help="write Prometheus file_sd JSON for the DCGM pages")
    ap.add_argument("--describe", action="store_true", help="print the scenario's description and exit")
    a = ap.parse_args(argv)
    try:
        fleet = SimFleet(a.scenario, replicas=a.replicas, speed=a.speed, seed=a.seed, v0_replicas=a.v0_replicas,
                         host=a.host, base_port=a.port)
    except ValueError as e:
        ap.error(str(e))
    if a.describe:
        print(f"{fleet.scenario.name}: {fleet.scenario.doc}")
        return 0
    try:
        fleet.start()
    except (RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    targets = fleet.targets()
    for t in targets:
        print(f"{t.name}\t{t.group}\t{t.metrics_url}\t{t.gpu_url}", flush=True)
    for path, kind in ((a.file_sd, "metrics"), (a.dcgm_file_sd, "dcgm")):
        if path:
            entries = [{"targets": [t.url.split("//", 1)[1]],
                        "labels": {"pod": t.name, "group": t.group, "namespace": fleet.namespace,
                                   "__metrics_path__": "/metrics" if kind == "metrics" else "/dcgm"}}
                       for t in targets]
            with open(path, "w") as fh:
                json.dump(entries, fh, indent=1)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    print(f"serving {fleet.description}; Ctrl-C to stop", file=sys.stderr, flush=True)
    done.wait()
    fleet.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

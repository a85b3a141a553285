"""Where a replica's refresh goes beyond the floor: each stage of kvwatch's direct pipeline, in
CPU per page, against the floor (bench/floor.py) measured in the same run on the same pages.

    .venv/bin/python bench/bench_stages.py [--replicas 256] [--rounds 8] [--tree PATH] [--live]

N static real-size vLLM V1 pages (bench/fleetserve.py, its own process); with `--live`, pages
that grow at every request as a running server's do (every counter and histogram bucket, the
gauges moving), so that nothing cached on an unchanged page or histogram is reused; the floor
is then measured on the same live pages. Stages, each timed on
its own over the same pages, alternating with the floor so that a change in the machine's load
reaches both:
  fetch      DirectSource's fetch path (lean HTTP/1.1 client, size cap, decode, page check)
  parse      parse() of the families kvwatch reads
  to_sample  the parsed page into canonical signals (parse + to_sample, less parse alone)
  ingest     Monitor.ingest: finite check, history, windows, diagnosis, the replica's view
  refresh    a whole Monitor.refresh through DirectSource (the stages + the asyncio glue)
The floor's fetch and tokenise parts are printed beside kvwatch's fetch and parse+to_sample.
`--tree PATH` times another checkout's kvwatch (run this script once per tree for a
before/after: each run prints its own floor, so the ratios compare).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose kvwatch is timed")
    ap.add_argument("--live", action="store_true", help="pages that change at every request (a live server's)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also cProfile the ingest stage and print its N costliest functions (own time)")
    args = ap.parse_args()
    # the bench's own modules (pages, floor) from this checkout, kvwatch from the tree timed
    sys.path.insert(0, str(ROOT))
    from bench.fleetserve import PageFleet
    from bench.floor import measure_floor
    from bench.machine import describe, load_average
    sys.path.insert(0, str(args.tree.resolve()))
    from tui.core import engines
    from tui.core.metrics.extract import parse_vllm, to_sample
    from tui.core.model import Scrape
    from tui.core.monitor import Monitor
    from tui.core.perf import tune_gc
    from tui.core.sources.direct import DirectSource, Target

    tune_gc()
    prof = cProfile.Profile() if args.profile else None
    n = args.replicas
    print(describe() + "; " + load_average() + " at start (a shared machine: the load says how busy)")
    kind = "live (growing at every request)" if args.live else "static"
    print(f"kvwatch from {Path(sys.modules['tui'].__file__).parents[1]}; {n} {kind} pages, {args.rounds} rounds, medians")
    stages: dict[str, list[float]] = {k: [] for k in ("floor", "floor fetch", "fetch", "parse", "to_sample",
                                                       "ingest", "refresh")}

    async def fetch_all(src: DirectSource) -> list[str]:
        return await asyncio.gather(*(src._fetch(src._endpoint(t)) for t in src.targets))

    async def run(fleet) -> None:
        src = DirectSource([Target(f"vllm-{i:04d}", u) for i, u in enumerate(fleet.urls)], timeout=5.0,
                           keep_raw=False)
        await src.start()
        pages = await fetch_all(src)
        mon = Monitor(None)
        live = Monitor(src)
        for _ in range(3):  # connections, the parser's series cache, the windows' first rows
            await live.refresh()
        t0 = 1_000_000.0
        for k in range(3):
            mon.ingest([Scrape(ts=t0 + k, replica=f"r{i}", sample=engines.read_page(p)[0], latency_s=0.01)
                        for i, p in enumerate(pages)], now=t0 + k)
        for r in range(args.rounds):
            c = time.process_time()
            pages = await fetch_all(src)
            stages["fetch"].append((time.process_time() - c) / n)
            c = time.process_time()
            for p in pages:  # parse alone, each page dropped at once as the pipeline does
                parse_vllm(p)
            stages["parse"].append((time.process_time() - c) / n)
            c = time.process_time()
            samples = [to_sample(parse_vllm(p)) for p in pages]
            stages["to_sample"].append((time.process_time() - c) / n - stages["parse"][-1])
            batch = [Scrape(ts=t0 + 3 + r, replica=f"r{i}", sample=s, latency_s=0.01) for i, s in enumerate(samples)]
            if prof is not None:
                prof.enable()
            c = time.process_time()
            mon.ingest(batch, now=t0 + 3 + r)
            stages["ingest"].append((time.process_time() - c) / n)
            if prof is not None:
                prof.disable()
            c = time.process_time()
            await live.refresh()
            stages["refresh"].append((time.process_time() - c) / n)
        await src.close()

    with PageFleet(n, live=args.live) as fleet:
        for _ in range(2):  # floor, stages, floor, stages: alternating
            f = measure_floor(fleet.ports, reps=max(3, args.rounds // 2))
            stages["floor"].append(f.per_page_s)
            stages["floor fetch"].append(f.fetch_s)
            asyncio.run(run(fleet))
    med = {k: statistics.median(v) for k, v in stages.items()}
    floor = med["floor"]
    print(f"floor: {floor * 1e6:.0f} us per page (fetch {med['floor fetch'] * 1e6:.0f} us + tokenise "
          f"{(floor - med['floor fetch']) * 1e6:.0f} us)")
    print(f"{'stage':<10} {'us/page':>8} {'x floor':>8}")
    for k in ("fetch", "parse", "to_sample", "ingest", "refresh"):
        print(f"{k:<10} {med[k] * 1e6:>8.0f} {med[k] / floor:>7.2f}x")
    parts = med["fetch"] + med["parse"] + med["to_sample"] + med["ingest"]
    print(f"{'stages':<10} {parts * 1e6:>8.0f} {parts / floor:>7.2f}x  (fetch + parse + to_sample + ingest; "
          f"refresh - stages = the asyncio glue: {(med['refresh'] - parts) * 1e6:.0f} us)")
    if prof is not None:
        print(f"ingest under cProfile (its timings above are inflated by the profiler), "
              f"{args.profile} costliest functions by own time:")
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(args.profile)
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

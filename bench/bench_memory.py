"""RSS after an hour of history: N replicas x 3600 one-second scrapes fed to the Monitor.

    .venv/bin/python bench/bench_memory.py [--replicas 256] [--seconds 3600] [--window 3600] [--raw] [--tui 120]

The Monitor is built as `kvwatch` builds it, from a Config whose `history_window` is set
explicitly (default 3600 s: one hour at the 1 s interval keeps 3,600 points; the product's
default window is 600 s, which would keep only ten minutes whatever `--seconds` says).

Each replica's scrapes come from a parsed real-size vLLM V1 page (bench/realpage.py) whose
counters and histogram buckets grow every second, so every scrape holds its own Sample, as
live scraping produces. `--raw` also gives each scrape its page text (DirectSource's default,
for the recorder; the history drops it) to show that only the batch in flight pays for it.
The default (the target's setting) feeds 921,600 scrapes: ~8 min on the 2-core machine while
ingest costs ~0.4 ms a scrape; `--replicas 32` gives the per-point figure in about a minute.
Scrapes are handed to the Monitor one refresh at a time (`--batch-s 1`), as live polling does:
a larger batch runs faster, but holds that many whole parsed pages at once (a minute of 256
replicas is ~150 MB of pages), which the RSS then counts.

`--tui N`: the whole TUI process instead of history and diagnosis alone. The first
`--seconds` minus N seconds are fed to the Monitor as above; then kvwatch's own app (Textual,
the fleet screen at 200x50, headless) runs over that Monitor for the last N refreshes, fed by
a source whose clock goes on from there, and the RSS is the process's: interpreter, Textual,
the table and its caches, every replica's last whole scrape, the history.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe, load_average, peak_rss_mib, rss_mib  # noqa: E402
from tui.core.config import Config  # noqa: E402
from bench.realpage import render_v1_page  # noqa: E402
from tui.core.metrics.extract import parse_vllm, to_sample  # noqa: E402
from tui.core.model import EngineSample, Histogram, Sample, Scrape  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.perf import tune_gc  # noqa: E402

TARGET_RSS_MIB = 150e6 / 2**20  # issue 14: 150 MB (10^6 bytes) = 143 MiB

_COUNTERS = {"preemptions": 0.2, "prompt_tokens": 4000.0, "generation_tokens": 1000.0, "prefix_queries": 4000.0,
             "prefix_hits": 1500.0, "requests_success": 2.0}


def advance(s: Sample, k: int) -> Sample:
    """The sample k seconds later: counters and buckets grown, gauges wobbling; new objects."""
    engines = {}
    for eng, e in s.engines.items():
        vals = dict(e.values)
        for c, rate in _COUNTERS.items():
            if c in vals:
                vals[c] = vals[c] + rate * k
        vals["kv_usage"] = 0.5 + 0.4 * ((k % 97) / 97)
        vals["running"] = float(20 + k % 13)
        hists = {
            name: Histogram(h.bounds, tuple(c + 2.0 * k for c in h.counts), h.sum + 3.0 * k, h.count + 2.0 * k)
            for name, h in e.hists.items()
        }
        engines[eng] = EngineSample(values=vals, hists=hists)
    return Sample(engines=engines, generation=s.generation, model_name=s.model_name, cache_config=s.cache_config,
                  process_cpu_seconds=(s.process_cpu_seconds or 0.0) + 0.3 * k, extra=s.extra)


def run_tui(m: Monitor, cfg: Config, bases: list[Sample], first: int, steps: int, t_start: float,
            interval: float) -> None:
    """kvwatch's app over `m` for refreshes first..steps-1, as fast as it draws them."""
    import asyncio

    from tui.app import KvwatchApp

    class Clocked:
        description = "bench"
        pending = ()

        def __init__(self) -> None:
            self.k, self.polled_at = first, None

        async def start(self) -> None:
            pass

        async def close(self) -> None:
            pass

        async def poll(self) -> list[Scrape]:
            k = self.k = min(self.k, steps - 1)
            self.k += 1
            ts = self.polled_at = t_start + k * interval
            return [Scrape(ts=ts, replica=f"vllm-{i:04d}", sample=advance(s, k)) for i, s in enumerate(bases)]

    m.source = Clocked()
    app = KvwatchApp(m, 0.0, config=cfg)  # interval 0: the poll loop's own 50 ms floor paces it

    async def drive() -> None:
        async with app.run_test(size=(200, 50)) as pilot:
            while app.refreshes < steps - first:
                await pilot.pause(0.2)
            app.workers.cancel_group(app, "poll")
            await pilot.pause(0.3)
            gc.collect()
            print(f"TUI: {app.refreshes} refreshes drawn; RSS with the app running {rss_mib():.0f} MiB")

    asyncio.run(drive())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--window", type=float, default=3600.0,
                    help="history_window in seconds (the config key; kvwatch's default is 600)")
    ap.add_argument("--interval", type=float, default=1.0, help="refresh interval the points are spaced by")
    ap.add_argument("--batch-s", type=float, default=1.0,
                    help="seconds of scrapes handed to the Monitor at once (1: as live polling does; a larger "
                         "batch is faster to run but its whole pages count in the RSS)")
    ap.add_argument("--raw", action="store_true", help="keep each scrape's page text, as DirectSource does")
    ap.add_argument("--tui", type=int, default=0, metavar="N",
                    help="run kvwatch's app (headless, 200x50) over the Monitor for the last N refreshes")
    ap.add_argument("--no-hists", action="store_true",
                    help="samples without histograms: how much of the history is bucket counts")
    args = ap.parse_args()
    tune_gc()  # as the kvwatch command does (it holds more short-lived garbage between collections)
    print(describe() + "; " + load_average())
    pages = [render_v1_page(seed=i) for i in range(args.replicas)]
    bases = [to_sample(parse_vllm(p)) for p in pages]
    if args.no_hists:
        bases = [Sample(engines={k: EngineSample(e.values, {}) for k, e in s.engines.items()},
                        generation=s.generation, model_name=s.model_name, cache_config=s.cache_config,
                        process_cpu_seconds=s.process_cpu_seconds, extra=s.extra) for s in bases]
    if not args.raw:
        del pages[:]  # the page text is the parser's input only: a live process does not keep it
    if args.tui:
        import tui.app  # noqa: F401  (the floor includes what the TUI imports)
    cfg = Config(history_window=args.window)
    m = Monitor(thresholds=cfg.thresholds, windows=cfg.windows, history_len=cfg.history_len(args.interval))
    gc.collect()
    base_rss = rss_mib()
    covers = (f"the whole TUI process (app headless at 200x50 for the last {args.tui} refreshes; no HTTP)"
              if args.tui else "history and diagnosis only (no drawing, no HTTP)")
    print(f"covers: {covers}; history_window {args.window:g} s at "
          f"{args.interval:g} s -> {m.history_len} points kept per replica; "
          f"{args.seconds} simulated seconds fed at 1/{args.interval:g} Hz")
    print(f"RSS before feeding (interpreter + parsed pages: the floor) {base_rss:.0f} MiB")
    t0, c0 = time.perf_counter(), time.process_time()
    batch: list[Scrape] = []
    t_start = 1_700_000_000.0
    steps = int(args.seconds / args.interval)
    fed = steps - (args.tui if args.tui else 0)
    per_batch = max(1, round(args.batch_s / args.interval))
    for k in range(fed):
        ts = t_start + k * args.interval
        for i, s in enumerate(bases):
            raw = (pages[i] + f"# {k}\n") if args.raw else None  # a distinct string, as each scrape is
            batch.append(Scrape(ts=ts, replica=f"vllm-{i:04d}", sample=advance(s, k), raw=raw))
        if (k + 1) % per_batch == 0 or k == fed - 1:
            m.ingest(batch)
            batch = []
    if args.tui:
        run_tui(m, cfg, bases, fed, steps, t_start, args.interval)
    gc.collect()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = args.replicas * steps
    print(f"fed {n:,} scrapes ({args.replicas} replicas x {steps} points) in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({cpu / n * 1e6:.0f} us per scrape incl. building it)")
    rss, peak = rss_mib(), peak_rss_mib()
    kept = min(len(h.points) for h in m.histories.values())
    per_point = (rss - base_rss) * 2**20 / (args.replicas * kept)
    what = " with raw pages kept" if args.raw else " without histograms" if args.no_hists else ""
    print(f"after {args.seconds / 60:.1f} simulated min{what}: RSS {rss:.0f} MiB (peak {peak:.0f} MiB), "
          f"{kept} points retained per replica")
    print(f"{'history and app' if args.tui else 'history'}: {rss - base_rss:.0f} MiB over the floor = {(rss - base_rss) / args.replicas:.2f} MiB per replica "
          f"= {per_point:,.0f} B per replica per retained point "
          f"= {(rss - base_rss) * 2**20 / (args.replicas * min(steps, m.history_len)):,.0f} B per replica per second "
          f"of history")
    verdict = "meets" if rss < TARGET_RSS_MIB else "MISSES"
    if args.replicas != 256 or args.seconds < 3600 or m.history_len < 3600:
        verdict = "not the target's setting: 256 replicas, 3,600 points"
    print(f"target: RSS < 150 MB ({TARGET_RSS_MIB:.0f} MiB) after one hour at 256 replicas: {rss:.0f} MiB "
          f"= {rss / TARGET_RSS_MIB:.2f}x the target, {rss / base_rss:.1f}x the floor ({verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

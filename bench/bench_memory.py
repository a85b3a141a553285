"""Peak RSS after an hour of history: N replicas x 3600 one-second scrapes fed to the Monitor.

    .venv/bin/python bench/bench_memory.py [--replicas 256] [--seconds 3600] [--raw]

Each replica's scrapes come from a parsed real-size vLLM V1 page (bench/realpage.py) whose
counters and histogram buckets grow every second, so every scrape holds its own Sample, as
live scraping produces. `--raw` also gives each scrape its page text (DirectSource's default,
for the recorder; the history drops it) to show that only the batch in flight pays for it.
Scrapes are ingested a minute at a time, so the history and diagnosis run for every scrape but
the fleet view is built 60x less often.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe, peak_rss_mib  # noqa: E402
from bench.realpage import render_v1_page  # noqa: E402
from tui.core.metrics.extract import parse_vllm, to_sample  # noqa: E402
from tui.core.model import EngineSample, Histogram, Sample, Scrape  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--raw", action="store_true", help="keep each scrape's page text, as DirectSource does")
    ap.add_argument("--no-hists", action="store_true",
                    help="samples without histograms: how much of the history is bucket counts")
    args = ap.parse_args()
    print(describe())
    pages = [render_v1_page(seed=i) for i in range(args.replicas)]
    bases = [to_sample(parse_vllm(p)) for p in pages]
    if args.no_hists:
        bases = [Sample(engines={k: EngineSample(e.values, {}) for k, e in s.engines.items()},
                        generation=s.generation, model_name=s.model_name, cache_config=s.cache_config,
                        process_cpu_seconds=s.process_cpu_seconds, extra=s.extra) for s in bases]
    m = Monitor()
    base_rss = peak_rss_mib()
    print(f"history kept per replica: {m.history_len} scrapes; RSS before feeding {base_rss:.0f} MiB")
    t0, c0 = time.perf_counter(), time.process_time()
    batch: list[Scrape] = []
    t_start = 1_700_000_000.0
    for k in range(args.seconds):
        for i, s in enumerate(bases):
            raw = (pages[i] + f"# {k}\n") if args.raw else None  # a distinct string, as each scrape is
            batch.append(Scrape(ts=t_start + k, replica=f"vllm-{i:04d}", sample=advance(s, k), raw=raw))
        if (k + 1) % 60 == 0 or k == args.seconds - 1:
            m.ingest(batch)
            batch = []
    gc.collect()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = args.replicas * args.seconds
    print(f"fed {n:,} scrapes ({args.replicas} replicas x {args.seconds} s) in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({cpu / n * 1e6:.0f} us per scrape incl. building it)")
    peak = peak_rss_mib()
    per = (peak - base_rss) / args.replicas
    what = " with raw pages kept" if args.raw else " without histograms" if args.no_hists else ""
    print(f"peak RSS {peak:.0f} MiB{what}: "
          f"{per:.2f} MiB per replica of history ({m.history_len} scrapes each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

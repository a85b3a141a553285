"""One refresh of a large fleet through a real Prometheus: wall time, kvwatch CPU, Prometheus CPU.

    .venv/bin/python bench/bench_prometheus.py [--replicas 1024] [--points 11]

The fleet's history is written as OpenMetrics and loaded with `promtool tsdb create-blocks-from
openmetrics` (no scraping while measuring): per replica one V1 engine with every series the
queries touch (gauges, counters, 7 histograms with vLLM's bucket layouts, cache config) and one
GPU's DCGM fields, sampled every 15 s. Each measured refresh moves the clock one scrape interval
forward, so every replica has a new sample, as in steady state. Needs Debian's prometheus.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import describe, peak_rss_mib, proc_cpu_s  # noqa: E402
from tests.promharness import MISSING, Prometheus, create_blocks, have_prometheus  # noqa: E402
from tui.core.monitor import Monitor  # noqa: E402
from tui.core.sources.prometheus import PrometheusSource  # noqa: E402
from tui.core.perf import tune_gc  # noqa: E402

SCRAPE_S = 15
HISTS = {
    "vllm:time_to_first_token_seconds": (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                         2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    "vllm:inter_token_latency_seconds": (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
                                         5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
    "vllm:e2e_request_latency_seconds": (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                                         50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
    "vllm:request_prompt_tokens": (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000),
}
HISTS["vllm:request_queue_time_seconds"] = HISTS["vllm:e2e_request_latency_seconds"]
HISTS["vllm:request_generation_tokens"] = HISTS["vllm:request_prompt_tokens"]
HISTS["vllm:request_params_max_tokens"] = HISTS["vllm:request_prompt_tokens"]


def write_history(path: Path, replicas: int, times: list[int]) -> int:
    """OpenMetrics text for the fleet; returns the number of samples."""
    n = 0
    with path.open("w") as f:
        w = f.write
        for i in range(replicas):
            pod = f"vllm-{i:04d}"
            base = f'namespace="inference",pod="{pod}",instance="10.{i // 250}.{i % 250}.1:8000",job="vllm"'
            eng = base + ',engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
            gpu = (f'gpu="0",UUID="GPU-{i:08d}",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
                   f'Hostname="node-{i // 8}",namespace="inference",pod="{pod}",job="dcgm"')
            series = [
                ("vllm:kv_cache_usage_perc", eng, lambda k, i=i: 0.5 + 0.4 * ((i + k) % 10) / 10),
                ("vllm:num_requests_running", eng, lambda k, i=i: 20.0 + i % 7),
                ("vllm:num_requests_waiting", eng, lambda k, i=i: float((i + k) % 3)),
                ("vllm:num_requests_waiting_by_reason", eng + ',reason="capacity"', lambda k, i=i: float((i + k) % 3)),
                ("vllm:num_requests_waiting_by_reason", eng + ',reason="deferred"', lambda k: 0.0),
                ("vllm:num_preemptions_total", eng, lambda k, i=i: float(k * (i % 4))),
                ("vllm:prompt_tokens_total", eng, lambda k: 60000.0 * k),
                ("vllm:generation_tokens_total", eng, lambda k: 15000.0 * k),
                ("vllm:prefix_cache_queries_total", eng, lambda k: 60000.0 * k),
                ("vllm:prefix_cache_hits_total", eng, lambda k: 20000.0 * k),
                ("vllm:request_success_total", eng + ',finished_reason="stop"', lambda k: 25.0 * k),
                ("vllm:request_success_total", eng + ',finished_reason="length"', lambda k: 5.0 * k),
                ("vllm:request_success_total", eng + ',finished_reason="abort"', lambda k: 0.0),
                ("process_cpu_seconds_total", base, lambda k: 6.0 * k),
                ("vllm:cache_config_info", eng + ',block_size="16",cache_dtype="auto",num_gpu_blocks="27915"',
                 lambda k: 1.0),
                ("DCGM_FI_DEV_FB_USED", gpu, lambda k: 73812.0),
                ("DCGM_FI_DEV_FB_FREE", gpu, lambda k: 7747.0),
                ("DCGM_FI_DEV_GPU_UTIL", gpu, lambda k: 97.0),
                ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu, lambda k: 0.55),
                ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", gpu, lambda k: 0.0),
                ("DCGM_FI_DEV_XID_ERRORS", gpu, lambda k: 0.0),
                ("DCGM_FI_DEV_GPU_TEMP", gpu, lambda k: 61.0),
            ]
            for base_name, bounds in HISTS.items():
                for j, b in enumerate((*bounds, "+Inf")):
                    le = b if isinstance(b, str) else repr(float(b))
                    frac = min(1.0, (j + 1) / (len(bounds) * 0.6))
                    series.append((base_name + "_bucket", eng + f',le="{le}"', lambda k, fr=frac: 30.0 * k * fr))
            for name, labels, val in series:
                for k, t in enumerate(times):
                    w(f"{name}{{{labels}}} {val(k)!r} {t}\n")
                    n += 1
        w("# EOF\n")
    return n


class GcClock:
    """Seconds spent in the cyclic garbage collector (the history makes the heap large)."""

    def __init__(self) -> None:
        self.total, self._t0 = 0.0, 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t0


async def measure(url: str, pid: int, times: list[int], replicas: int, freeze: bool = False) -> None:
    gcc = GcClock()
    clock = [float(times[4]) + 1]
    src = PrometheusSource(url, '{namespace="inference"}', rate_window_s=60, clock=lambda: clock[0],
                           quantiles_every_s=1e9)  # measured on their own below
    m = Monitor(src)
    await src.start()
    first = await m.refresh()  # includes the cache-config query
    assert len(first.replicas) == replicas, (len(first.replicas), src.warnings)
    await src._quantile_task
    walls, cpus, poll_walls, prom_cpus = [], [], [], []
    gc0 = gcc.total
    for t in times[5:]:
        clock[0] = float(t) + 1
        p0, w0, c0 = proc_cpu_s(pid), time.perf_counter(), time.process_time()
        scrapes = await src.poll()
        w1 = time.perf_counter()
        m.ingest(scrapes)
        if freeze:
            gc.freeze()  # what survived a refresh is long-lived: stop rescanning it
        w2, c1, p1 = time.perf_counter(), time.process_time(), proc_cpu_s(pid)
        assert len(scrapes) == replicas, (len(scrapes), src.warnings)
        walls.append(w2 - w0)
        poll_walls.append(w1 - w0)
        cpus.append(c1 - c0)
        prom_cpus.append(p1 - p0)
    gc_per_refresh = (gcc.total - gc0) / len(walls)
    # the background quantile refresh (every 15 s by default), alone and overlapping a refresh
    p0, w0, c0 = proc_cpu_s(pid), time.perf_counter(), time.process_time()
    await src._fetch_quantiles(clock[0])
    qwall, qcpu, qprom = time.perf_counter() - w0, time.process_time() - c0, proc_cpu_s(pid) - p0
    assert len(src._quantiles) == replicas, src.warnings
    clock[0] = float(times[-1]) + 1
    src._emitted.clear()
    src.quantiles_every_s, src._quantiles_at = 0.0, -1e18
    w0 = time.perf_counter()
    m.ingest(await src.poll())
    overlap = time.perf_counter() - w0
    await src._quantile_task
    bf0, bc0 = time.perf_counter(), time.process_time()
    window = (len(times) - 1) * SCRAPE_S
    back = await src.backfill(window_s=window)  # default step: window / sparkline points
    bf1, bc1 = time.perf_counter(), time.process_time()
    await src.close()
    med = statistics.median
    print(f"refresh through Prometheus, {replicas} replicas ({len(walls)} refreshes, median):")
    print(f"  wall {med(walls):.3f} s (queries+mapping {med(poll_walls):.3f} s, history+diagnosis "
          f"{med(walls) - med(poll_walls):.3f} s); max {max(walls):.3f} s")
    print(f"  kvwatch CPU {med(cpus):.3f} s per refresh (of which garbage collection {gc_per_refresh:.3f} s on "
          f"average); Prometheus CPU {med(prom_cpus):.3f} s per refresh")
    print(f"latency quantiles (background, every 15 s): {qwall:.3f} s wall, kvwatch CPU {qcpu:.3f} s, "
          f"Prometheus CPU {qprom:.3f} s; a refresh overlapping one: {overlap:.3f} s wall")
    mi0 = time.perf_counter()
    Monitor(src).ingest(back)
    mi1 = time.perf_counter()
    print(f"back-fill of {window // 60:.0f} min x {replicas} replicas: {len(back)} scrapes in {bf1 - bf0:.3f} s wall, "
          f"{bc1 - bc0:.3f} s kvwatch CPU; Monitor.ingest of them {mi1 - mi0:.3f} s")
    print(f"peak RSS of kvwatch: {peak_rss_mib():.0f} MiB")


def main() -> int:
    tune_gc()  # as the kvwatch command does
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=1024)
    ap.add_argument("--points", type=int, default=41, help="15 s samples per series (>= 7; 41 = 10 minutes)")
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after each refresh (an app-level option)")
    args = ap.parse_args()
    if not have_prometheus():
        print(MISSING)
        return 1
    print(describe())
    with tempfile.TemporaryDirectory(prefix="kvw-bench-") as tmp:
        tmpd = Path(tmp)
        end = int(time.time()) - 60
        times = [end - SCRAPE_S * (args.points - 1 - k) for k in range(args.points)]
        t0 = time.perf_counter()
        n = write_history(tmpd / "history.om", args.replicas, times)
        t1 = time.perf_counter()
        create_blocks(tmpd / "history.om", tmpd / "data", tmpd)
        (tmpd / "history.om").unlink()
        t2 = time.perf_counter()
        print(f"history: {n:,} samples ({n // args.points // args.replicas} series per replica), written in "
              f"{t1 - t0:.1f} s, promtool blocks in {t2 - t1:.1f} s")
        with Prometheus(tmpd, [], data_dir=tmpd / "data") as prom:
            assert prom.proc is not None
            asyncio.run(measure(prom.url, prom.proc.pid, times, args.replicas, args.gc_freeze))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Small builders for diagnosis tests: scrapes with exactly the signals a test sets."""

from __future__ import annotations

from tui.core.history import ReplicaHistory
from tui.core.model import EngineSample, GpuDevice, GpuSample, Histogram, Sample, Scrape

GiB = 1024**3
TOK_B = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, float("inf"))
LAT_B = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))


def hist(bounds, values) -> Histogram:
    counts = []
    for b in bounds:
        counts.append(float(sum(1 for v in values if v <= b)))
    return Histogram(tuple(bounds), tuple(counts), float(sum(values)), float(len(values)))


def scrape(ts: float, *, name: str = "r0", kv=0.4, running=10.0, waiting=0.0, wcap=None, wdef=None,
           preempt=0.0, gen=None, prompt=None, cpu=None, util=50.0, mem_pct=90.0, gpu=True,
           throttle=(), ecc=0.0, xid=0.0, cache=None, hists=None, pod=None, swapped=None,
           error=None, lora=None) -> Scrape:
    if error is not None:
        return Scrape(ts=ts, replica=name, error=error, pod=pod)
    values = {"running": running, "waiting": waiting, "preemptions": preempt,
              "generation_tokens": gen if gen is not None else ts * 100.0,
              "prompt_tokens": prompt if prompt is not None else ts * 50.0}
    if kv is not None:
        values["kv_usage"] = kv
    if wcap is not None:
        values["waiting_capacity"] = wcap
    if wdef is not None:
        values["waiting_deferred"] = wdef
    if swapped is not None:
        values["swapped"] = swapped
    sample = Sample(engines={"0": EngineSample(values=values, hists=hists or {})}, generation="v1",
                    cache_config=cache or {}, process_cpu_seconds=cpu, lora=lora)
    g = None
    if gpu:
        g = GpuSample(devices=(GpuDevice(index="0", memory_used_bytes=80 * GiB * mem_pct / 100,
                                         memory_total_bytes=80 * GiB, util_pct=util,
                                         throttle_reasons=tuple(throttle), ecc_uncorrected=ecc,
                                         xid_errors=xid),), source="test")
    return Scrape(ts=ts, replica=name, sample=sample, gpu=g, pod=pod)


def history_of(scrapes, name: str = "r0") -> ReplicaHistory:
    h = ReplicaHistory(name)
    for s in scrapes:
        h.add(s)
    return h


def series(n: int, interval: float = 5.0, t0: float = 1000.0, **per_point):
    """n scrapes; each keyword is a constant or a function of the index i."""
    out = []
    for i in range(n):
        kw = {k: (v(i) if callable(v) else v) for k, v in per_point.items()}
        out.append(scrape(t0 + i * interval, **kw))
    return out

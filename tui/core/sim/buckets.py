"""vLLM's histogram bucket boundaries (V1 and V0) and a cheap accumulator that can render either.

Observations go into buckets at the union of both generations' bounds, so one record renders
exactly as a V1 or a V0 server would expose it (every exposed bound is a union bound).
"""

from __future__ import annotations

from bisect import bisect_left

# V1 (vllm/v1/metrics/buckets.py, see shared/reference/vllm-metrics.md §2.3-2.4)
TTFT_V1 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
           20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_V1 = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
          40.0, 80.0)
LATENCY_V1 = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
              240.0, 480.0, 960.0, 1920.0, 7680.0)
ITERATION_V1 = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N = (1, 2, 5, 10, 20)
PREEMPTIONS = (1, 2, 3, 4, 5, 10, 20)

# prometheus_fastapi_instrumentator's http_request_duration_highr_seconds
HTTP_HIGHR = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
              7.5, 10.0, 30.0, 60.0)

# V0 (vllm/engine/metrics.py, ~0.7)
TTFT_V0 = TTFT_V1[:16]
TPOT_V0 = ITL_V1[:13]
LATENCY_V0 = LATENCY_V1[:15]
ITERATION_V0 = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8096)


def buckets_1_2_5(max_value: int) -> tuple[int, ...]:
    """vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max_value."""
    out: list[int] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > max_value:
                return tuple(out)
            out.append(v)
        exp += 1


def union(*bounds: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(sorted({float(b) for bs in bounds for b in bs}))


class SimHist:
    """Per-bucket (non-cumulative) counts at fixed finite bounds, plus sum and count."""

    __slots__ = ("bounds", "counts", "sum", "count", "_views")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # last slot: above every bound (+Inf)
        self.sum = 0.0
        self.count = 0
        self._views: dict[tuple[float, ...], tuple[int, ...]] = {}

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self, bounds: tuple[float, ...]) -> list[int]:
        """Cumulative counts at `bounds` (each must be one of ours) followed by +Inf."""
        cut = self._views.get(bounds)
        if cut is None:
            idx = {b: i for i, b in enumerate(self.bounds)}
            cut = self._views[bounds] = tuple(idx[float(b)] for b in bounds)
        out, run, j = [], 0, 0
        counts = self.counts
        for i in cut:
            while j <= i:
                run += counts[j]
                j += 1
            out.append(run)
        out.append(self.count)
        return out

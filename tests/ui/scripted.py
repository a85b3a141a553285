"""A deterministic Source for screen tests: hand-made Samples per replica per poll.

Only the edge is faked (no HTTP); history, diagnosis and the screens run for real.
"""

from __future__ import annotations

from tui.core.model import EngineSample, GpuDevice, GpuSample, Histogram, Sample, Scrape

TTFT_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, float("inf"))


def page(kv, running, waiting, preempt_total, gen_total, ttft_counts=(10, 40, 80, 95, 100, 100, 100, 100)):
    h = Histogram(TTFT_BOUNDS, tuple(float(c) for c in ttft_counts), 30.0, float(ttft_counts[-1]))
    vals = {"kv_usage": kv, "running": running, "waiting": waiting, "preemptions": preempt_total,
            "generation_tokens": gen_total, "requests_success": gen_total / 100}
    return Sample(engines={"0": EngineSample(vals, {"ttft": h})}, generation="v1", model_name="llama-8b")


def gpu(mem_pct, util, throttle=()):
    total = 80e9
    return GpuSample((GpuDevice("0", "GPU-0", "H100", total * mem_pct / 100, total, util, None, tuple(throttle)),),
                     source="sim")


class ScriptedSource:
    """Replicas follow fixed profiles; `tick` advances a fake clock by `step` seconds per poll."""

    def __init__(self, profiles: dict[str, str], step: float = 5.0, t0: float = 1_700_000_000.0):
        self.profiles = profiles
        self.step = step
        self.t = t0
        self.n = 0
        self.description = f"scripted: {len(profiles)} replicas"

    async def start(self):
        pass

    async def close(self):
        pass

    async def poll(self):
        self.n += 1
        self.t += self.step
        out = []
        for name, prof in self.profiles.items():
            n = self.n
            if prof == "down":
                out.append(Scrape(self.t, name, error="connection refused", group="grp"))
            elif prof == "pressure":
                out.append(Scrape(self.t, name, page(0.97, 3, 12, 4.0 * n, 300.0 * n), gpu=gpu(92, 35), group="grp"))
            elif prof == "compute":
                out.append(Scrape(self.t, name, page(0.55, 120, 0, 0, 9000.0 * n), gpu=gpu(70, 95), group="grp"))
            elif prof == "fault":
                out.append(Scrape(self.t, name, page(0.4, 40, 0, 0, 2000.0 * n), gpu=gpu(90, 70, ["hw_thermal_slowdown"]),
                                  group="grp"))
            elif prof == "capped":  # queue behind max-num-seqs with KV and GPU headroom
                out.append(Scrape(self.t, name, page(0.45, 18, 20 + 4 * n, 0, 3000.0 * n), gpu=gpu(91, 40), group="grp"))
            elif prof == "stalled":  # requests in flight, no token moves
                out.append(Scrape(self.t, name, page(0.6, 20, 5, 0, 5000.0), gpu=gpu(90, 3), group="grp"))
            else:
                out.append(Scrape(self.t, name, page(0.35, 40, 0, 0, 4000.0 * n), gpu=gpu(90, 70), group="grp"))
        return out

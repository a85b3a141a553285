"""Each named scenario produces the signature its docstring promises (stepped offline, seeded)."""

from __future__ import annotations

from itertools import pairwise
import pytest

from tui.core.sim.exposition import PageRenderer, gpu_values
from tui.core.sim.fleet import SimFleet
from tui.core.sim.scenarios import SCENARIOS, get

T0 = 1.75e9


def run(scenario: str, seconds: float, replicas: int = 2, every: float = 10.0, seed: int = 1) -> dict[str, list[dict]]:
    """Per replica, one dict of observed values every `every` simulated seconds."""
    f = SimFleet(scenario, replicas=replicas, seed=seed, start_time=T0)
    out: dict[str, list[dict]] = {n: [] for n in f.replica_names()}
    prev_cpu = {n: 0.0 for n in out}
    for i in range(int(seconds // every)):
        f.advance(every)
        for n in out:
            r = f.replica(n)
            e = r.engines[0]
            g = gpu_values(r, 0)
            cpu = r.cpu_seconds()
            out[n].append({
                "t": (i + 1) * every, "kv": e.kv_usage, "waiting": e.num_waiting, "running": e.num_running,
                "preemptions": e.c.preemptions, "util": g["DCGM_FI_DEV_GPU_UTIL"],
                "mem_pct": 100 * g["DCGM_FI_DEV_FB_USED"] / (r.gpu_spec.fb_total_mib - r.gpu_spec.reserved_mib),
                "cpu_cores": (cpu - prev_cpu[n]) / every, "itl_sum": e.h["itl"].sum, "itl_n": e.h["itl"].count,
                "throttle": g["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"], "backlog": r.frontend_backlog_s(),
            })
            prev_cpu[n] = cpu
    return out


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def test_every_scenario_is_documented_and_known():
    for name in SCENARIOS:
        sc = get(name)
        assert sc.name == name and len(sc.doc) > 80 and "Game day" in sc.doc
    with pytest.raises(ValueError, match="unknown scenario"):
        get("nope")


def test_steady_stays_healthy():
    obs = run("steady", 300)
    for pts in obs.values():
        assert max(p["kv"] for p in pts) < 0.9
        assert pts[-1]["preemptions"] == 0
        assert max(p["waiting"] for p in pts) <= 2
        assert 20 < mean(p["util"] for p in pts) < 75  # busy, not compute-bound
        assert mean(p["mem_pct"] for p in pts) == pytest.approx(92, abs=2)


def test_long_prompts_reaches_kv_pressure_within_minutes():
    obs = run("long-prompts", 240)
    for pts in obs.values():
        early = [p for p in pts if p["t"] <= 40]
        assert max(p["kv"] for p in early) < 0.9 and early[-1]["preemptions"] == 0  # the healthy warm-up
        hit = [p for p in pts if p["kv"] >= 0.9 and p["waiting"] > 0]
        assert hit and hit[0]["t"] <= 180
        late = [p["preemptions"] for p in pts if p["t"] >= hit[0]["t"]]
        assert late[-1] > late[0] and all(b >= a for a, b in pairwise(late))
        rises = sum(b > a for a, b in pairwise(late))
        assert rises >= len(late) - 2  # climbing, not a one-off
        assert pts[-1]["waiting"] > pts[len(pts) // 2]["waiting"]  # the queue keeps growing


def test_compute_bound_keeps_gpu_busy_without_preemption():
    obs = run("compute-bound", 240)
    for pts in obs.values():
        window = [p for p in pts if p["t"] >= 30]
        assert mean(p["util"] for p in window) > 85
        assert pts[-1]["preemptions"] == 0
        assert max(p["kv"] for p in window) < 0.9
        assert mean(p["mem_pct"] for p in window) < 80  # --gpu-memory-utilization 0.7
        assert mean(p["running"] for p in window) > 2  # batching still effective


def test_host_bound_saturates_one_cpu_core_while_gpu_idles():
    obs = run("host-bound", 180)
    for pts in obs.values():
        window = [p for p in pts if p["t"] >= 30]
        assert mean(p["util"] for p in window) < 60
        assert mean(p["cpu_cores"] for p in window) == pytest.approx(1.0, abs=0.12)
        assert max(p["cpu_cores"] for p in window) <= 1.1
        assert max(p["waiting"] for p in window) <= 1  # nothing waits in the engine...
        assert max(p["backlog"] for p in window) > 0.5  # ...requests wait in the API server
        assert max(p["kv"] for p in window) < 0.2


def test_throttled_node_slows_one_replica_without_kv_pressure():
    obs = run("throttled-node", 180)
    good, bad = obs["llama-8b-0"], obs["llama-8b-1"]
    assert all(p["throttle"] & 0x40 == 0 for p in good)
    assert all(p["throttle"] & 0x40 for p in bad if p["t"] > 60)
    assert all(p["throttle"] & 0x40 == 0 for p in bad if p["t"] < 60)

    def itl(pts):  # mean inter-token latency after the fault
        a, b = pts[7], pts[-1]
        return (b["itl_sum"] - a["itl_sum"]) / (b["itl_n"] - a["itl_n"])

    assert itl(bad) > 1.4 * itl(good)
    assert max(p["kv"] for p in bad) < 0.9 and bad[-1]["preemptions"] == 0


def test_burst_builds_a_queue_then_recovers():
    obs = run("burst", 240, every=5.0)
    for pts in obs.values():
        before = [p for p in pts if 60 <= p["t"] <= 90]
        during = [p for p in pts if 95 <= p["t"] <= 110]
        after = [p for p in pts if 170 <= p["t"] <= 210]
        assert max(p["waiting"] for p in before) <= 2
        assert max(p["waiting"] for p in during) > 10
        assert max(p["waiting"] for p in after) <= 2


def test_same_seed_same_incident_other_seed_other_incident():
    def pages(seed: int) -> list[str]:
        f = SimFleet("long-prompts", replicas=2, seed=seed, start_time=T0)
        f.advance(150)
        return [PageRenderer(f.replica(n)).render() for n in f.replica_names()]

    a, b, c = pages(4), pages(4), pages(5)
    assert a == b
    assert a != c

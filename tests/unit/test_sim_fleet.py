"""SimFleet's cluster-facing side (what the simulated Kubernetes drives), stepped offline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tui.core.sim.args import EngineArgs
from tui.core.sim.exposition import gpu_values
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9


def fleet(scenario="steady", replicas=3, **kw) -> SimFleet:
    return SimFleet(scenario, replicas=replicas, seed=2, start_time=T0, **kw)


def finished(f: SimFleet, name: str) -> int:
    return sum(sum(e.c.success.values()) for e in f.replica(name).engines)


@pytest.mark.parametrize("kw, msg", [
    (dict(replicas=0), "replicas"),
    (dict(replicas=2, v0_replicas=3), "v0_replicas"),
    (dict(replicas=2, speed=0), "speed"),
    (dict(replicas=2, scenario="nope"), "unknown scenario"),
])
def test_bad_construction_is_a_clear_error(kw, msg):
    with pytest.raises(ValueError, match=msg):
        SimFleet(**kw)


def test_groups_targets_and_v0_replicas():
    f = fleet(replicas=4, v0_replicas=1)
    names = f.replica_names()
    assert names == ["llama-8b-0", "llama-8b-1", "llama-8b-2", "llama-8b-v0-0"]
    assert [t.group for t in f.targets()] == ["llama-8b"] * 3 + ["llama-8b-v0"]
    assert f.replica("llama-8b-v0-0").v0 and not f.replica("llama-8b-0").v0
    assert all(t.url == "" for t in f.targets())  # not serving until start()
    assert f.engine_args("llama-8b-0") == EngineArgs(max_model_len=8192, max_num_seqs=64)
    assert f.clock() == T0
    f.advance(30)
    assert f.clock() == pytest.approx(T0 + 30)
    assert all(finished(f, n) > 0 for n in names)  # every group gets traffic


def test_router_spreads_load_and_draining_moves_it():
    f = fleet()
    f.advance(60)
    counts = {n: finished(f, n) for n in f.replica_names()}
    assert min(counts.values()) > 0.6 * max(counts.values())
    f.set_in_rotation("llama-8b-1", False)
    before = {n: finished(f, n) for n in counts}
    f.advance(60)
    after = {n: finished(f, n) for n in counts}
    assert f.load("llama-8b-1") == (0, 0)  # drained: nothing running or waiting
    assert f.replica("llama-8b-1").in_flight() == 0
    gained = {n: after[n] - before[n] for n in counts}
    assert gained["llama-8b-1"] < 0.2 * gained["llama-8b-0"]  # only its in-flight requests finished
    assert gained["llama-8b-0"] > 1.2 * (before["llama-8b-0"])  # the others took its share
    assert f.status("llama-8b-1").in_rotation is False


def test_added_replica_loads_for_minutes_then_takes_traffic():
    f = fleet()
    t = f.add_replica("llama-8b-spare", EngineArgs(max_model_len=8192, max_num_seqs=64), "llama-8b",
                      load_delay_s=120)
    assert t.group == "llama-8b" and t.name == "llama-8b-spare"
    f.advance(60)
    st = f.status("llama-8b-spare")
    assert st.state == "loading" and st.running == 0
    assert 0 < f.replica("llama-8b-spare").gpu_memory_used_bytes()
    f.advance(90)
    st = f.status("llama-8b-spare")
    assert st.state == "ready" and st.ready_at == pytest.approx(T0 + 120, abs=1)
    assert finished(f, "llama-8b-spare") > 0
    assert any("Application startup complete." in line for line in f.logs("llama-8b-spare"))


def test_replica_with_impossible_args_fails_like_vllm():
    f = fleet()
    bad = EngineArgs(max_model_len=32768, gpu_memory_utilization=0.45)
    plan = f.kv_plan(bad, "llama-8b")
    assert plan.error and "larger than the available KV cache memory" in plan.error
    assert f.kv_plan(EngineArgs(max_model_len=8192), "llama-8b").error is None
    with pytest.raises(ValueError):
        f.kv_plan(EngineArgs(gpu_memory_utilization=0))
    f.add_replica("llama-8b-bad", bad, "llama-8b", load_delay_s=90)
    f.advance(100)
    st = f.status("llama-8b-bad")
    assert st.state == "failed" and "KV cache is needed" in st.error
    assert any("EngineCore failed to start" in line for line in f.logs("llama-8b-bad"))
    assert finished(f, "llama-8b-bad") == 0


def test_replace_replica_rolls_one_pod():
    f = fleet()
    f.advance(30)
    new_args = EngineArgs(max_model_len=8192, max_num_seqs=32)
    f.replace_replica("llama-8b-0", "llama-8b-0-v2", new_args, load_delay_s=60, grace_s=30)
    f.advance(50)
    assert "llama-8b-0" in f.replica_names() and f.status("llama-8b-0").in_rotation  # still serving
    assert f.status("llama-8b-0-v2").state == "loading"
    f.advance(20)
    assert f.status("llama-8b-0-v2").state == "ready"
    f.advance(40)
    assert "llama-8b-0" not in f.replica_names()  # drained (or grace over) and deleted
    assert f.engine_args("llama-8b-0-v2").max_num_seqs == 32
    with pytest.raises(KeyError):
        f.load("llama-8b-0")


def test_rollout_to_a_failing_config_leaves_the_old_pod_serving():
    f = fleet()
    f.replace_replica("llama-8b-0", "llama-8b-0-v2", EngineArgs(max_model_len=32768, gpu_memory_utilization=0.45),
                      load_delay_s=30)
    f.advance(120)
    assert f.status("llama-8b-0-v2").state == "failed"
    assert f.status("llama-8b-0").in_rotation and "llama-8b-0" in f.replica_names()


def test_remove_replica_and_unknown_names():
    f = fleet()
    f.remove_replica("llama-8b-2")
    assert f.replica_names() == ["llama-8b-0", "llama-8b-1"]
    with pytest.raises(KeyError):
        f.remove_replica("llama-8b-2")
    with pytest.raises(KeyError):
        f.status("nope")
    with pytest.raises(ValueError, match="already exists"):
        f.add_replica("llama-8b-0", EngineArgs(), "llama-8b")


def test_node_faults_stay_with_the_node():
    f = fleet()
    node = f.status("llama-8b-1").node
    f.set_node_fault(node, throttle_mask=0x40, slowdown=2.0)
    f.advance(10)
    assert gpu_values(f.replica("llama-8b-1"), 0)["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"] & 0x40
    f.remove_replica("llama-8b-1")
    f.add_replica("llama-8b-1b", EngineArgs(max_model_len=8192, max_num_seqs=64), "llama-8b", load_delay_s=0)
    assert f.status("llama-8b-1b").node != node  # rescheduled on a healthy node
    f.advance(10)
    assert gpu_values(f.replica("llama-8b-1b"), 0)["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"] & 0x40 == 0


def test_game_day_capping_max_num_seqs_stops_the_preemptions():
    """long-prompts -> pressure -> roll every replica to --max-num-seqs 32 -> preemptions stop, KV leaves the ceiling."""
    f = SimFleet("long-prompts", replicas=2, seed=3, start_time=T0)
    f.advance(200)
    for n in f.replica_names():
        assert f.replica(n).engines[0].kv_usage >= 0.9
    names = f.replica_names()
    for n in names:
        f.replace_replica(n, n + "-capped", replace(f.engine_args(n), max_num_seqs=32), load_delay_s=60, grace_s=60)
    f.advance(180)
    assert sorted(f.replica_names()) == sorted(n + "-capped" for n in names)
    before = {n: f.replica(n).engines[0].c.preemptions for n in f.replica_names()}
    kv = []
    for _ in range(12):
        f.advance(10)
        kv += [f.replica(n).engines[0].kv_usage for n in f.replica_names()]
    after = {n: f.replica(n).engines[0].c.preemptions for n in f.replica_names()}
    assert sum(after.values()) - sum(before.values()) <= 2  # ~0 per second over two minutes
    assert max(kv) < 0.9

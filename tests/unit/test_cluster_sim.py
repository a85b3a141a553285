"""SimCluster: the demo's cluster behind the same interface, driving the stepped simulator.

Every action really changes the simulation: an args edit rolls replicas one at a time and the
preemptions fall, a drain moves load to the spare, roll back restores the previous args."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core.cluster.audit import AuditLog
from tui.core.cluster.base import EditArgsRequest
from tui.core.cluster.sim import SimCluster
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9
DEP = "llama-8b"


def make(tmp_path: Path, scenario: str = "steady", replicas: int = 3, **kw) -> tuple[SimFleet, SimCluster]:
    f = SimFleet(scenario, replicas=replicas, seed=3, start_time=T0)
    c = SimCluster(f, audit=AuditLog(tmp_path / "audit.jsonl"), load_delay_s=60, **kw)
    return f, c


def counters(f: SimFleet) -> tuple[int, float, int]:
    """(preemptions so far, worst KV usage now, finished requests) over the fleet."""
    with f.lock:
        engines = [e for n in f.replica_names() for e in f.replica(n).engines]
        return (
            sum(e.c.preemptions for e in engines),
            max((e.kv_usage for e in engines), default=0.0),
            sum(sum(e.c.success.values()) for e in engines),
        )


async def rate(c: SimCluster, f: SimFleet, seconds: float = 60.0) -> tuple[float, float]:
    p0 = counters(f)[0]
    await c.sleep(seconds)
    p1, kv, _ = counters(f)
    return (p1 - p0) / seconds, kv


async def until_done(c: SimCluster, ns: str, name: str = DEP, limit: int = 120):
    for _ in range(limit):
        st = await c.rollout_status(ns, name)
        if st.finished:
            return st
        await c.sleep(5)
    raise AssertionError(f"rollout not finished: {st}")


async def test_game_day_long_prompts_edit_max_num_seqs_preemptions_fall(tmp_path: Path) -> None:
    f, c = make(tmp_path, "long-prompts")
    ns = f.namespace
    await c.sleep(150)  # healthy chat, then long prompts from t=45 s
    before, kv_before = await rate(c, f)
    assert before > 1.0 and kv_before > 0.95  # pressure: KV pinned, preemptions climbing
    plan = await c.plan_edit_args(EditArgsRequest(ns, DEP, {}, preset="seqs-50"))
    assert plan.ok and plan.data["changes"] == {"max-num-seqs": 32}
    assert [ln for ln in plan.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")] == ["-- 64", "+- 32"]
    assert plan.preflight.status == "ok" and "KV pool" in plan.preflight.messages[0]
    res = await c.apply(plan)
    assert res.ok and res.details["revision"] == 2
    states = []
    for _ in range(120):
        st = await c.rollout_status(ns, DEP)
        states.append(st.state)
        if st.state == "done":
            break
        # one replica at a time: never more than one new replica loading
        assert sum(1 for p in st.new_rs.pods if not p.ready) <= 1
        await c.sleep(5)
    assert states[0] == "progressing" and states[-1] == "done"
    assert all(f.engine_args(n).max_num_seqs == 32 for n in f.replica_names())
    assert len(f.replica_names()) == 3
    await c.sleep(60)
    after, kv_after = await rate(c, f)
    assert after < 0.05 * before and after < 0.1  # preemption rate falls to ~0
    assert kv_after < 0.9  # KV usage leaves the ceiling
    assert [x["action"] for x in c.audit.read()] == ["edit"]


async def test_drain_moves_load_to_the_spare(tmp_path: Path) -> None:
    f, c = make(tmp_path)
    ns = f.namespace
    await c.sleep(30)
    target = "llama-8b-0"
    plan = await c.plan_drain(ns, target)
    assert plan.ok and plan.data["replicas"] == 3
    steps = [s async for s in c.drain(plan, lambda: f.load(target), poll_s=1.0)]
    seq = [(s.step, s.status) for s in steps if s.status != "warn"]
    assert seq[0] == ("scale-up", "running") and ("wait-spare", "ok") in seq
    assert seq[-3:] == [("wait-idle", "ok"), ("delete", "ok"), ("done", "ok")]
    waited = [s for s in steps if s.step == "wait-spare" and s.status == "running"]
    assert waited and steps[-1].elapsed_s >= 60  # the spare loaded its model (simulated time)
    assert target not in f.replica_names()
    spare = [n for n in f.replica_names() if n.startswith("llama-8b-r1-")]
    assert len(spare) == 2  # the spare, and the replacement for the deleted pod (desired is 4)
    await c.sleep(60)
    done = {n: sum(sum(e.c.success.values()) for e in f.replica(n).engines) for n in spare}
    assert max(done.values()) > 0  # the spare serves the drained replica's share
    assert f.dropped() == 0
    res = await c.apply(await c.plan_restore(ns, DEP, steps[-1].data["restore_replicas"]))
    assert res.ok and len(f.replica_names()) == 3
    assert [x["action"] for x in c.audit.read()] == ["drain", "scale", "cordon", "delete-pod", "drain", "scale"]


async def test_roll_back_restores_previous_args(tmp_path: Path) -> None:
    f, c = make(tmp_path, replicas=2)
    ns = f.namespace
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(ns, DEP, {"max-num-seqs": 16})))).ok
    await until_done(c, ns)
    assert {f.engine_args(n).max_num_seqs for n in f.replica_names()} == {16}
    plan = await c.plan_rollback(ns, DEP)
    assert plan.summary.endswith("revision 2 -> 1")
    assert [ln for ln in plan.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")] == ["-- 16", "+- 64"]
    assert (await c.apply(plan)).ok
    st = await until_done(c, ns)
    assert st.state == "done" and st.new_rs.revision == 3
    assert {f.engine_args(n).max_num_seqs for n in f.replica_names()} == {64}
    info = await c.get_deployment(ns, DEP)
    assert "--max-num-seqs 16" not in " ".join(info.containers[0].args)
    assert c.revisions(DEP)[-1]["revision"] == 3


async def test_failed_start_is_reported_and_old_replicas_keep_serving(tmp_path: Path) -> None:
    f, c = make(tmp_path, replicas=2)
    ns = f.namespace
    plan = await c.plan_edit_args(EditArgsRequest(ns, DEP, {"gpu-memory-utilization": 0.4}))
    assert plan.preflight.status == "fail" and "refuse to start" in plan.preflight.messages[0]
    assert any("No available memory for the cache blocks" in w or "KV cache is needed" in w for w in plan.warnings)
    assert (await c.apply(plan)).ok  # the SRE may insist; the rollout then fails visibly
    st = await until_done(c, ns)
    assert st.state == "failed" and "--previous" in st.reason
    old = [n for n in f.replica_names() if f.engine_args(n).gpu_memory_utilization != 0.4]
    assert len(old) == 2 and all(f.status(n).in_rotation for n in old)
    bad = next(p.name for p in st.new_rs.pods)
    logs = await c.logs(ns, bad, previous=True)
    assert any("KV cache" in ln or "cache blocks" in ln for ln in logs.lines)
    assert any(e.reason == "BackOff" for e in await c.events(ns))
    assert (await c.apply(await c.plan_rollback(ns, DEP))).ok
    st = await until_done(c, ns)
    assert st.state == "done" and bad not in f.replica_names()


async def test_readonly_changes_nothing(tmp_path: Path) -> None:
    f, c = make(tmp_path, readonly=True)
    ns = f.namespace
    names = f.replica_names()
    args = {n: f.engine_args(n) for n in names}
    target = names[0]
    results = []
    for plan in [
        await c.plan_edit_args(EditArgsRequest(ns, DEP, {"max-num-seqs": 8})),
        await c.plan_scale(ns, DEP, 5),
        await c.plan_restart(ns, DEP),
        await c.plan_cordon(ns, target),
        await c.plan_delete_pod(ns, target),
    ]:
        assert plan.readonly
        results.append(await c.apply(plan, typed_name=plan.target.name))
    steps = [s async for s in c.drain(await c.plan_drain(ns, target), lambda: f.load(target), poll_s=1)]
    assert all(not r.ok and "read-only" in r.message for r in results)
    assert steps[-1].status == "failed" and "read-only" in steps[-1].message
    await c.sleep(120)
    assert f.replica_names() == names and {n: f.engine_args(n) for n in names} == args
    assert all(f.status(n).in_rotation for n in names)
    assert not (await c.permissions(ns)).allowed("edit")


async def test_concurrent_edit_is_refused(tmp_path: Path) -> None:
    f, c = make(tmp_path, replicas=2)
    ns = f.namespace
    mine = await c.plan_edit_args(EditArgsRequest(ns, DEP, {"max-num-seqs": 32}))
    theirs = await c.plan_edit_args(EditArgsRequest(ns, DEP, {"max-num-batched-tokens": 1024}))
    assert (await c.apply(theirs)).ok
    res = await c.apply(mine)
    assert not res.ok and res.details["kind"] == "conflict" and "--max-num-batched-tokens" in " ".join(res.details["current_args"])
    await until_done(c, ns)
    assert {(f.engine_args(n).max_num_seqs, f.engine_args(n).max_num_batched_tokens) for n in f.replica_names()} == {(64, 1024)}


async def test_reads_and_errors(tmp_path: Path) -> None:
    f, c = make(tmp_path, replicas=2)
    ns = f.namespace
    pods = await c.list_pods()
    assert [(p.owner_kind, p.owner_name, p.ready, p.labels["serving"]) for p in pods] == [("Deployment", DEP, True, "true")] * 2
    info = await c.get_deployment(ns, DEP)
    assert (info.replicas, info.ready, info.revision) == (2, 2, "1")
    assert "--max-num-seqs" in info.containers[0].args
    assert [d.name for d in await c.list_deployments(ns)] == [DEP]
    from tui.core.cluster.base import ClusterError

    with pytest.raises(ClusterError) as e:
        await c.get_deployment(ns, "nope")
    assert e.value.kind == "not-found"
    assert not (await c.scale(ns, "nope", 1)).ok
    assert (await c.plan_scale(ns, DEP, -2)).errors
    assert (await c.list_contexts())[0].name == "demo" and await c.list_namespaces() == [ns]
    await c.sleep(10)
    logs = await c.logs(ns, pods[0].name, filtered=False)
    assert logs.total > 0 and any("KV cache" in ln for ln in logs.lines)
    gen = c.watch_pods()
    sync = await gen.__anext__()
    assert sync.type == "SYNC" and len(sync.pods) == 2
    await c.apply(await c.plan_scale(ns, DEP, 3))
    added = await gen.__anext__()
    assert added.type == "ADDED" and added.pod.ready is False
    await gen.aclose()

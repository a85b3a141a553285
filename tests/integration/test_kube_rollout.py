"""Rollout status through a real rolling update in the emulator: progressing -> done, stuck on
GPUs or the progress deadline, failed on crash-looping new pods, and the observedGeneration lag."""

from __future__ import annotations

from pathlib import Path

import pytest_asyncio

from tests.integration.kube_env import NS, Env, make_env
from tui.core.cluster.base import EditArgsRequest


@pytest_asyncio.fixture
async def slow(tmp_path: Path):
    async for e in make_env(tmp_path, pod_start="loading"):
        e.emu.ready_all(NS)
        yield e


def _new_pods(env: Env) -> list[str]:
    h = env.emu._template_hash(env.deployment()["spec"]["template"])
    return [p["metadata"]["name"] for p in env.pods() if p["metadata"]["labels"]["pod-template-hash"] == h]


async def test_rollout_transitions_to_done(slow: Env) -> None:
    env = slow
    c = env.cluster()
    st = await c.rollout_status(NS, "llama")
    assert st.state == "done" and st.reason == "successfully rolled out: 2/2 available" and st.old_rs == ()
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 128})))).ok
    seen = []
    for _ in range(6):
        st = await c.rollout_status(NS, "llama")
        seen.append((st.state, st.updated, st.available))
        if st.state == "done":
            break
        assert st.state == "progressing" and st.new_rs is not None and st.new_rs.revision == 2
        assert "--max-num-seqs 128" in st.new_rs.args_line
        assert [o.revision for o in st.old_rs] == [1]
        assert st.elapsed_s is not None and st.elapsed_s >= 0
        # the surge pod loads its model, then becomes ready
        for name in _new_pods(env):
            if not env.emu._is_ready(env.emu.get("pods", NS, name)):
                env.emu.set_ready(NS, name)
    # maxSurge 1, maxUnavailable 0: one new pod at a time, old ones go only when new are ready
    assert seen == [("progressing", 1, 2), ("progressing", 2, 2), ("done", 2, 2)]
    assert st.reason == "successfully rolled out: 2/2 available" and st.old_rs == ()
    assert "model loading" not in st.reason


async def test_rollout_reason_while_the_model_loads(slow: Env) -> None:
    env = slow
    c = env.cluster()
    await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 64})))
    st = await c.rollout_status(NS, "llama")
    assert st.state == "progressing" and st.reason == "1 of 2 new replicas updated"
    pods = st.new_rs.pods
    assert len(pods) == 1 and pods[0].phase == "Running" and not pods[0].ready


async def test_observed_generation_lag(slow: Env) -> None:
    env = slow
    env.emu.controllers = False
    c = env.cluster()
    await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 64})))
    st = await c.rollout_status(NS, "llama")
    assert (st.state, st.generation, st.observed_generation) == ("progressing", 2, 1)
    assert st.reason == "waiting for the Deployment spec update to be observed"
    env.emu.controllers = True
    env.emu.reconcile()
    assert (await c.rollout_status(NS, "llama")).observed_generation == 2


async def test_stuck_waiting_for_gpus_then_deadline(slow: Env) -> None:
    env = slow
    env.emu.pod_start = "unschedulable"
    c = env.cluster()
    await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 64})))
    st = await c.rollout_status(NS, "llama")
    assert st.state == "stuck" and "waiting for GPUs" in st.reason and "Insufficient nvidia.com/gpu" in st.reason
    assert st.new_rs.pods[0].phase == "Unschedulable"
    env.emu.advance(601)  # past progressDeadlineSeconds
    st = await c.rollout_status(NS, "llama")
    assert st.state == "stuck" and st.reason.startswith("progress deadline exceeded; pods cannot be scheduled")
    prog = next(x for x in st.conditions if x.type == "Progressing")
    assert (prog.status, prog.reason) == ("False", "ProgressDeadlineExceeded")


async def test_failed_when_new_pods_crash_loop(slow: Env) -> None:
    env = slow
    c = env.cluster()
    await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"gpu-memory-utilization": 0.3})))
    [new] = _new_pods(env)
    env.emu.crash(NS, new, "Error", 1)
    st = await c.rollout_status(NS, "llama")
    assert st.state == "failed" and new in st.reason and "CrashLoopBackOff" in st.reason and "--previous" in st.reason
    assert st.available == 2  # the old replicas keep serving

"""Rollout situations kubectl knows: a paused Deployment (its status says so and what resumes it) and
an OrderedReady StatefulSet edit that may need a stuck pod deleted by hand."""

from __future__ import annotations

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tui.core.cluster.base import EditArgsRequest


async def test_paused_deployment_rollout_status_says_paused(env: Env) -> None:
    d = env.deployment()
    d["spec"]["paused"] = True
    env.emu._update("deployments", env.deployment(), d)
    c = env.cluster()
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 32})))).ok
    st = await c.rollout_status(NS, "llama")
    assert st.state == "progressing" and st.reason.startswith("paused (kubectl rollout resume continues it)"), st.reason


async def test_statefulset_edit_warns_about_orderedready_forced_rollback(env: Env) -> None:
    from tests.k8s_emulator import vllm_statefulset

    env.emu.add(vllm_statefulset(replicas=2))
    env.emu.add(vllm_statefulset("par", replicas=1, podManagementPolicy="Parallel"))
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "qwen", {"max-num-seqs": 32}, kind="StatefulSet"))
    assert any("OrderedReady StatefulSet" in w and "deleted by hand" in w for w in plan.warnings)
    par = await c.plan_edit_args(EditArgsRequest(NS, "par", {"max-num-seqs": 32}, kind="StatefulSet"))
    assert par.ok and not any("OrderedReady" in w for w in par.warnings)

"""A paused Deployment's rollout status says it is paused and what resumes it."""

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

"""Issue 13 part B (the Kubernetes transport): 422 vs conflict, field manager, identity, access
reviews, re-authentication, exec on its own ApiClient, paging, metrics ports. Each test was written
before its fix and seen to fail on the old code."""

from __future__ import annotations

import pytest

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tui.core.cluster.base import EditArgsRequest

DEP = rf"/apis/apps/v1/namespaces/{NS}/deployments/llama$"


# ---- defect 2: a 422 that merely mentions "test" is not a conflict ----


@pytest.mark.parametrize(
    "message",
    [
        'Deployment.apps "llama" is invalid: spec.template.spec.containers[1].name: Invalid value: "test": must be unique',
        "admission webhook \"latest-tag.example.com\" denied the request: image tag 'latest' is not allowed in production",
    ],
)
async def test_a_422_mentioning_test_is_invalid_not_a_conflict(env: Env, message: str) -> None:
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 100}))
    env.emu.fail("PATCH", DEP, 422, message)
    res = await c.apply(plan)
    assert not res.ok and res.details["kind"] == "invalid", res.details
    assert "changed since" not in res.message


async def test_a_failed_json_patch_test_names_the_value_that_changed(env: Env) -> None:
    c = env.cluster()
    stale = await c.plan_scale(NS, "llama", 5)
    assert (await c.scale(NS, "llama", 3)).ok
    res = await c.apply(stale)
    assert not res.ok and res.status_code == 422 and res.details["kind"] == "conflict"
    assert "/spec/replicas" in res.message and "changed since it was read" in res.message


async def test_a_real_409_is_still_a_conflict(env: Env) -> None:
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 100}))
    env.emu.fail("PATCH", DEP, 409, "Operation cannot be fulfilled on deployments.apps \"llama\": the object has been modified")
    res = await c.apply(plan)
    assert not res.ok and res.details["kind"] == "conflict" and res.status_code == 409


async def test_scale_from_zero_is_guarded_by_the_resource_version(env: Env) -> None:
    c = env.cluster()
    assert (await c.scale(NS, "llama", 0)).ok
    plan = await c.plan_scale(NS, "llama", 1)
    assert plan.patch[0]["path"] == "/metadata/resourceVersion"
    env.emu.add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "other", "namespace": NS}, "spec": {}})
    d = env.deployment()
    d["metadata"].setdefault("labels", {})["touched"] = "yes"  # someone else changes the Deployment after the read
    env.emu._update("deployments", env.deployment(), d)
    res = await c.apply(plan)
    assert not res.ok and res.details["kind"] == "conflict", res.message
    assert env.deployment()["spec"]["replicas"] == 0

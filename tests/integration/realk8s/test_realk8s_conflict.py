"""A concurrent change between plan and apply, on the real API server: a failed JSON Patch
`test` comes back as 422 Invalid with a generic message (no "testing value ... failed"), so
kvwatch must find out itself what changed, say so with the current values, and overwrite nothing."""

from __future__ import annotations

import json

from tui.core.cluster.base import EditArgsRequest

from .common import Cluster, connect, wait_for


def _llama(c: Cluster) -> None:
    c.apply_example("llama")
    c.rollout_wait("deployment/llama")


async def test_edit_args_after_a_concurrent_change_says_what_changed(cluster: Cluster) -> None:
    _llama(cluster)
    kc = connect(cluster)
    plan = await kc.plan_edit_args(EditArgsRequest(cluster.ns, "llama", {"max-num-seqs": "32"}))
    assert not plan.errors, plan.errors
    # someone else changes the engine's args between the plan and the apply
    cmd = cluster.get("deployment", "llama")["spec"]["template"]["spec"]["containers"][0]["command"]
    theirs = [("0.8" if a == "0.9" else a) for a in cmd]
    cluster.kubectl("patch", "-n", cluster.ns, "deployment/llama", "--type=json",
                    "-p", json.dumps([{"op": "replace", "path": "/spec/template/spec/containers/0/command", "value": theirs}]))
    res = await kc.apply(plan)
    assert not res.ok
    assert "changed since it was read; nothing was overwritten" in res.message, res.message
    assert "/spec/template/spec/containers/0/command" in res.message and "0.8" in res.message, res.message
    now = cluster.get("deployment", "llama")["spec"]["template"]["spec"]["containers"][0]["command"]
    assert now == theirs  # theirs kept, ours not applied


async def test_scale_after_a_concurrent_scale_says_the_current_count(cluster: Cluster) -> None:
    _llama(cluster)
    kc = connect(cluster)
    plan = await kc.plan_scale(cluster.ns, "llama", 3)
    cluster.kubectl("scale", "-n", cluster.ns, "deployment/llama", "--replicas=4")
    res = await kc.apply(plan)
    assert not res.ok
    assert "changed since it was read; nothing was overwritten" in res.message, res.message
    assert "/spec/replicas" in res.message and "4" in res.message, res.message
    wait_for("4 replicas kept", lambda: cluster.get("deployment", "llama")["spec"]["replicas"] == 4)

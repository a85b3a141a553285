"""Drain (runbook preemption-thrash step 2) against the emulator: spare first, out of rotation,
out of every EndpointSlice, wait for the live load to reach 0, then the ReplicaSet removes exactly
the target (pod-deletion-cost + scale-down) or it is evicted; cancel; warnings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest_asyncio

from tests.integration.kube_env import NS, Env, env, make_env  # noqa: F401 - fixture
from tests.k8s_emulator import vllm_deployment


class Load:
    """The target's (running, waiting) as its metrics would show them, step by step."""

    def __init__(self, *values: tuple[int, int]) -> None:
        self.values = list(values)
        self.calls = 0

    async def __call__(self) -> tuple[int, int] | None:
        self.calls += 1
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


@pytest_asyncio.fixture
async def slow(tmp_path: Path):
    """New pods load the model (Running, not Ready) until the test says they are ready."""
    async for e in make_env(tmp_path, pod_start="loading"):
        yield e


async def test_drain_step_sequence_and_exact_requests(slow: Env) -> None:
    env = slow
    env.emu.ready_all(NS)
    env.emu.calls.clear()
    c = env.cluster()
    target = env.pods()[0]["metadata"]["name"]
    plan = await c.plan_drain(NS, target)
    assert plan.ok and plan.data["owner"] == "llama" and plan.data["replicas"] == 2 and plan.data["label"] == "serving"
    assert plan.data["mechanism"] == "scale-down" and plan.data["routes"] == ["Service llama"]
    assert "1. scale deployment/llama 2 -> 3; wait until one more pod is ready" in plan.diff.splitlines()
    assert any("Service llama: out of rotation by serving=draining" in w for w in plan.warnings)
    load = Load((3, 2), (3, 2), (1, 0), (0, 0))
    steps = []
    async for s in c.drain(plan, load, poll_s=0.01):
        steps.append(s)
        if s.step == "wait-spare" and s.status == "running":
            env.emu.ready_all(NS)  # the spare has loaded its model
    seq = [(s.step, s.status) for s in steps if s.step != "check"]
    assert seq[:3] == [("scale-up", "running"), ("scale-up", "ok"), ("wait-spare", "running")]
    assert ("wait-spare", "ok") in seq
    i = seq.index(("wait-spare", "ok"))
    assert seq[i + 1 : i + 3] == [("cordon", "ok"), ("endpoints", "ok")]
    assert seq[i + 3 :] == [
        ("wait-idle", "running"),
        ("wait-idle", "running"),
        ("wait-idle", "ok"),
        ("remove", "ok"),
        ("done", "ok"),
    ]
    assert [s.data.get("running") for s in steps if s.step == "wait-idle" and s.status == "running"] == [3, 1]
    # the exact mutations, in order; each preceded by its server-side dry run; kvwatch deletes nothing itself
    muts = [(w.method, w.path, w.query.get("dryRun")) for w in env.writes()]
    assert muts == [
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale", "All"),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale", None),
        ("PATCH", f"/api/v1/namespaces/{NS}/pods/{target}", "All"),
        ("PATCH", f"/api/v1/namespaces/{NS}/pods/{target}", None),
        ("PATCH", f"/api/v1/namespaces/{NS}/pods/{target}", "All"),
        ("PATCH", f"/api/v1/namespaces/{NS}/pods/{target}", None),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale", "All"),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale", None),
    ]
    cost = env.writes()[5].body
    assert {"op": "add", "path": "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost", "value": "-2147483648"} in cost
    # the ReplicaSet removed exactly the target, with the pod's own grace period; no replacement started
    assert env.emu.deleted == [(NS, target, 60)]
    labelled = env.emu.objects[("v1/pods", NS, target)].history[-3]
    assert labelled["metadata"]["labels"]["serving"] == "draining"
    assert env.deployment()["spec"]["replicas"] == 2
    assert steps[-1].data["removed"] == [target] and len(steps[-1].data["created"]) == 1 and steps[-1].data["replicas"] == 2
    assert "restore_replicas" not in steps[-1].data
    acts = [x["action"] for x in env.audit.read()]
    assert acts == ["drain", "scale", "cordon", "deletion-cost", "scale", "drain"]


async def test_drain_waits_for_the_spare_before_touching_the_target(slow: Env) -> None:
    env = slow
    env.emu.ready_all(NS)
    c = env.cluster()
    target = env.pods()[0]["metadata"]["name"]
    plan = await c.plan_drain(NS, target)
    waits = 0
    async for s in c.drain(plan, Load((0, 0)), poll_s=0.01):
        if s.step == "wait-spare" and s.status == "running":
            waits += 1
            # the target is still in rotation while the spare loads
            assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "true"
            if waits == 3:
                env.emu.ready_all(NS)
    assert waits == 3 and s.step == "done"


async def test_spare_pending_for_gpus_warns_and_times_out(tmp_path: Path) -> None:
    async for env in make_env(tmp_path, pod_start="unschedulable"):
        c = env.cluster()
        # the two initial pods are Pending too; make them serve, so only the spare waits
        env.emu.ready_all(NS)
        target = env.pods()[0]["metadata"]["name"]
        steps = [s async for s in c.drain(await c.plan_drain(NS, target), Load((1, 0)), poll_s=0.01, spare_timeout_s=0.3)]
        warn = next(s for s in steps if s.status == "warn" and s.step == "wait-spare")
        assert "Insufficient nvidia.com/gpu" in warn.message and "no free nvidia.com/gpu" in warn.message
        assert (steps[-1].step, steps[-1].status) == ("wait-spare", "failed")
        assert "target left in rotation" in steps[-1].message
        assert ("scale-down", "ok") in [(s.step, s.status) for s in steps]  # the spare is not left behind
        assert env.deployment()["spec"]["replicas"] == 2
        assert not any(w.path.endswith(f"/pods/{target}") for w in env.writes())
        assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "true"


async def test_cancel_while_waiting_for_idle_puts_the_target_back(env: Env) -> None:
    c = env.cluster()
    target = env.pods()[0]["metadata"]["name"]
    cancel = asyncio.Event()
    load = Load((5, 5))
    steps = []
    async for s in c.drain(await c.plan_drain(NS, target), load, cancel=cancel, poll_s=0.01):
        steps.append(s)
        if s.step == "wait-idle" and s.status == "running":
            cancel.set()
    assert [(s.step, s.status) for s in steps[-3:]] == [("cancel", "cancelled"), ("uncordon", "ok"), ("scale-down", "ok")]
    pod = env.emu.get("pods", NS, target)
    assert pod["metadata"]["labels"]["serving"] == "true"
    assert "kvwatch.io/rotation-label" not in (pod["metadata"].get("annotations") or {})
    assert target not in [name for _, name, _ in env.emu.deleted] and env.deployment()["spec"]["replicas"] == 2


async def test_closing_the_drain_midway_does_not_leave_the_target_out_of_rotation(env: Env) -> None:
    c = env.cluster()
    target = env.pods()[0]["metadata"]["name"]
    gen = c.drain(await c.plan_drain(NS, target), Load((5, 5)), poll_s=0.01)
    async for s in gen:
        if s.step == "wait-idle":
            break
    assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "draining"
    await gen.aclose()
    assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "true"


async def test_idle_timeout_deletes_anyway_with_the_grace_period(env: Env) -> None:
    c = env.cluster()
    target = env.pods()[0]["metadata"]["name"]
    steps = [s async for s in c.drain(await c.plan_drain(NS, target, grace_s=90), Load((2, 0)), poll_s=0.01, idle_timeout_s=0.2)]
    assert ("wait-idle", "warn") in [(s.step, s.status) for s in steps]
    # an explicit grace period needs the Eviction API (a scale-down uses the pod's own)
    assert steps[-1].step == "done" and env.emu.deleted[0] == (NS, target, 90)
    assert any(w.path.endswith(f"/pods/{target}/eviction") and w.body["deleteOptions"]["gracePeriodSeconds"] == 90 for w in env.writes())
    assert env.deployment()["spec"]["replicas"] == 2


async def test_grace_period_and_label_warnings(env: Env) -> None:
    env.emu.add(
        vllm_deployment(
            "short",
            args=["--max-num-seqs", "64", "--shutdown-timeout", "120"],
            grace=30,
            prestop_sleep=15,
            labels={"serving": "true"},
        )
    )
    c = env.cluster()
    pod = next(p for p in env.emu.items("pods", NS) if p["metadata"]["labels"]["app"] == "short")["metadata"]["name"]
    plan = await c.plan_drain(NS, pod, grace_s=60)
    text = "\n".join(plan.warnings)
    assert "terminationGracePeriodSeconds (30s) is shorter than vLLM's --shutdown-timeout (120s) + preStop sleep (15s)" in text
    assert "the delete grace period (60s) is shorter" in text
    assert "no Service or InferencePool selects this pod" in text  # the Service selects app=llama only
    ok = await c.plan_drain(NS, env.pods()[0]["metadata"]["name"], grace_s=60)
    assert not any("shorter" in w for w in ok.warnings)
    assert any("--shutdown-timeout is 0" in w for w in ok.warnings)


async def test_configured_rotation_label_and_already_drained(env: Env) -> None:
    c = env.cluster(rotation_label="traffic", drain_value="off")
    target = env.pods()[0]["metadata"]["name"]
    plan = await c.plan_cordon(NS, target)
    assert plan.data["label"] == "traffic"
    assert plan.patch[-2] == {"op": "add", "path": "/metadata/labels/traffic", "value": "off"}
    assert (await c.apply(plan)).ok
    again = await c.plan_drain(NS, target)
    assert not again.ok and "already out of rotation" in again.errors[0]
    undo = await c.plan_cordon(NS, target, undo=True)
    assert undo.patch[-2] == {"op": "remove", "path": "/metadata/labels/traffic"}
    assert (await c.apply(undo)).ok
    assert "traffic" not in env.emu.get("pods", NS, target)["metadata"]["labels"]


async def test_production_drain_is_confirmed_once_with_the_pod_name(env: Env) -> None:
    c = env.cluster(policy_config={"contexts": {"*": {"production": True}}})
    target = env.pods()[0]["metadata"]["name"]
    plan = await c.plan_drain(NS, target)
    assert plan.requires_typed_name
    refused = [s async for s in c.drain(plan, Load((0, 0)), typed_name="llama", poll_s=0.01)]
    assert [(s.step, s.status) for s in refused] == [("check", "failed")] and "type" in refused[0].message
    assert env.writes() == []
    steps = [s async for s in c.drain(plan, Load((0, 0)), typed_name=target, poll_s=0.01)]
    assert (steps[-1].step, steps[-1].status) == ("done", "ok")
    audit = env.audit.read()
    assert [(x["action"], x["result"]["ok"]) for x in audit] == [
        ("drain", False), ("drain", True), ("scale", True), ("cordon", True), ("deletion-cost", True), ("scale", True), ("drain", True),
    ]
    assert audit[-1]["result"]["message"].startswith("drain done ok: drained")


async def test_unreadable_load_and_failed_eviction_put_the_target_back(env: Env) -> None:
    env.emu.add({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "llama", "namespace": NS},
                 "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llama"}}}})
    c = env.cluster()
    target = env.pods()[0]["metadata"]["name"]
    calls = {"n": 0}

    def flaky() -> tuple[int, int]:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionError("metrics scrape failed")
        return (0, 0)

    env.emu.fail("POST", f"/pods/{target}/eviction$", 403, "pods \"x\" is forbidden: cannot create pods/eviction")
    plan = await c.plan_drain(NS, target)
    assert plan.data["mechanism"] == "evict" and any("PodDisruptionBudget llama: 1 disruptions allowed" in ln for ln in plan.diff.splitlines())
    steps = [s async for s in c.drain(plan, flaky, poll_s=0.01)]
    warns = [s for s in steps if s.step == "wait-idle" and s.status == "warn"]
    assert len(warns) == 1 and "metrics scrape failed" in warns[0].message
    assert [(s.step, s.status) for s in steps[-3:]] == [("uncordon", "ok"), ("scale-down", "ok"), ("evict", "failed")]
    assert "forbidden" in steps[-1].message and env.deployment()["spec"]["replicas"] == 2
    assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "true"
    assert env.audit.read()[-1]["result"]["ok"] is False

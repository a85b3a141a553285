"""Mitigations through the official client: the exact requests, no lost updates, read-only,
production confirmation, roll back, restart, scale, and the audit log."""

from __future__ import annotations

import asyncio
import json

from kubernetes import client as k8s

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.k8s_emulator import client_for, vllm_deployment
from tui.core.cluster.base import PREVIOUS_ARGS_ANNOTATION, RESTARTED_AT_ANNOTATION, EditArgsRequest

ARGS = ["--max-num-seqs", "256", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192", "--port", "8000"]
BASE = "/spec/template/spec/containers/0"


async def test_edit_sends_the_exact_patch_after_a_dry_run(env: Env) -> None:
    c = env.cluster()
    before = env.deployment()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": "128"}))
    assert plan.ok and not env.writes()  # planning only reads
    assert plan.summary == "edit deployment/llama -n serving: --max-num-seqs 128"
    assert [ln for ln in plan.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")] == ["-- 256", "+- 128"]
    new_args = ["--max-num-seqs", "128"] + ARGS[2:]
    previous = json.dumps({"args": ARGS, "command": ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "name": "vllm"}, separators=(",", ":"), sort_keys=True)
    assert plan.patch == [
        {"op": "test", "path": f"{BASE}/name", "value": "vllm"},
        {"op": "test", "path": f"{BASE}/args", "value": ARGS},
        {"op": "replace", "path": f"{BASE}/args", "value": new_args},
        {"op": "add", "path": "/metadata/annotations/kvwatch.io~1previous-args", "value": previous},
        {"op": "add", "path": "/metadata/annotations/kubernetes.io~1change-cause", "value": "kvwatch: --max-num-seqs 256 -> 128"},
    ]
    res = await c.apply(plan)
    assert res.ok, res.message
    writes = env.writes()
    assert [(w.method, w.path, w.query, w.content_type) for w in writes] == [
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama", {"dryRun": "All", "fieldManager": "kvwatch"}, "application/json-patch+json"),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama", {"fieldManager": "kvwatch"}, "application/json-patch+json"),
    ]
    assert writes[0].body == writes[1].body == plan.patch
    after = env.deployment()
    assert after["spec"]["template"]["spec"]["containers"][0]["args"] == new_args
    assert after["spec"]["template"]["spec"]["containers"][1] == before["spec"]["template"]["spec"]["containers"][1]
    assert after["metadata"]["annotations"][PREVIOUS_ARGS_ANNOTATION] == previous
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert res.details["generation"] == after["metadata"]["generation"]
    [line] = env.audit.read()
    assert (line["user"], line["context"], line["action"], line["target"]) == (env.emu.identity, "kind-test", "edit", "deployment/llama -n serving")
    assert line["kubeconfig_user"] == "sre" and line["user_source"] == "SelfSubjectReview"
    assert line["diff"] == plan.diff and line["result"]["ok"] is True and line["patch"] == plan.patch


async def test_edit_an_env_referenced_value_changes_only_the_env(env: Env) -> None:
    env.emu.add(
        vllm_deployment(
            "envform",
            args=["--max-num-seqs", "$(MAX_SEQS)", "--port", "8000"],
            env=[{"name": "HF_HOME", "value": "/models"}, {"name": "MAX_SEQS", "value": "96"}],
        )
    )
    c = env.cluster()
    info = await c.get_deployment(NS, "envform")
    assert info.containers[0].env == (("HF_HOME", "/models"), ("MAX_SEQS", "96"))
    plan = await c.plan_edit_args(EditArgsRequest(NS, "envform", {"max-num-seqs": 48}))
    assert plan.patch[:4] == [
        {"op": "test", "path": f"{BASE}/name", "value": "vllm"},
        {"op": "test", "path": f"{BASE}/env/1/name", "value": "MAX_SEQS"},
        {"op": "test", "path": f"{BASE}/env/1/value", "value": "96"},
        {"op": "replace", "path": f"{BASE}/env/1/value", "value": "48"},
    ]
    assert (await c.apply(plan)).ok
    v = env.vllm("envform")
    assert v["env"][1] == {"name": "MAX_SEQS", "value": "48"} and v["args"] == ["--max-num-seqs", "$(MAX_SEQS)", "--port", "8000"]


async def test_presets_validation_and_preflight_in_the_plan(env: Env) -> None:
    c = env.cluster()
    half = await c.plan_edit_args(EditArgsRequest(NS, "llama", {}, preset="seqs-50"))
    assert half.data["changes"] == {"max-num-seqs": 128}
    bad = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"gpu-memory-utilization": "1.2", "max-num-seqs": "many"}))
    assert not bad.ok and len(bad.errors) == 2 and bad.patch is None
    res = await c.apply(bad)
    assert not res.ok and "refused" in res.message and not env.writes()
    cache = {"num_gpu_blocks": "5691", "block_size": "16", "gpu_memory_utilization": "0.9"}
    crash = await c.plan_edit_args(EditArgsRequest(NS, "llama", {}, preset="gmu-0.6", cache_config=cache, gpu_total_bytes=40 * 2**30, kv_bytes_token=131072))
    assert crash.preflight is not None and crash.preflight.status == "fail"
    assert any("crash-loop" in w for w in crash.warnings)
    same = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 256}))
    assert same.errors == ("nothing to change: the new values equal the current ones",)


async def test_concurrent_change_is_refused_and_nothing_is_lost(env: Env) -> None:
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 128}))
    # another SRE edits the same Deployment between our read and our write
    other = k8s.AppsV1Api(client_for(env.srv))
    theirs = ["--max-num-seqs", "256", "--gpu-memory-utilization", "0.85", "--max-model-len", "8192", "--port", "8000"]
    await asyncio.to_thread(
        other.patch_namespaced_deployment,
        "llama",
        NS,
        {"spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": theirs}]}}}},
    )
    assert env.emu.calls[-1].content_type == "application/strategic-merge-patch+json"
    env.emu.calls.clear()
    res = await c.apply(plan)
    assert not res.ok and res.status_code == 422 and res.details["kind"] == "conflict"
    assert "changed since it was read" in res.message and "nothing was overwritten" in res.message
    assert res.details["current_args"] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"] + theirs
    assert env.vllm()["args"] == theirs  # their change survived
    assert [w.query for w in env.writes()] == [{"dryRun": "All", "fieldManager": "kvwatch"}]  # the dry run already refused it
    assert env.audit.read()[-1]["result"]["ok"] is False


async def test_stale_resource_version_gets_409(env: Env) -> None:
    # the image's entrypoint runs vLLM and the spec has no args: kvwatch adds them, guarded by
    # the resourceVersion it read (JSON Patch cannot test that a field is absent)
    d = vllm_deployment("noargs")
    del d["spec"]["template"]["spec"]["containers"][0]["args"]
    del d["spec"]["template"]["spec"]["containers"][0]["command"]
    env.emu.add(d)
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "noargs", {"max-num-seqs": 8}))
    assert plan.patch[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": env.deployment("noargs")["metadata"]["resourceVersion"]}
    assert {"op": "add", "path": f"{BASE}/args", "value": ["--max-num-seqs", "8"]} in plan.patch
    other = k8s.AppsV1Api(client_for(env.srv))
    await asyncio.to_thread(other.patch_namespaced_deployment, "noargs", NS, {"metadata": {"labels": {"team": "ml"}}})
    res = await c.apply(plan)
    assert not res.ok and res.details["kind"] == "conflict"
    assert env.deployment("noargs")["metadata"]["labels"]["team"] == "ml"
    assert "args" not in env.vllm("noargs")
    # the emulator's own optimistic concurrency: a PUT with a stale resourceVersion is a 409
    stale = env.deployment("noargs")
    stale["metadata"]["resourceVersion"] = "1"
    from kubernetes.client.exceptions import ApiException

    try:
        await asyncio.to_thread(other.replace_namespaced_deployment, "noargs", NS, stale)
        raise AssertionError("stale PUT accepted")
    except ApiException as e:
        assert e.status == 409


async def _every_mitigation(c, env: Env) -> list:
    """Plan and apply every mutating key; returns the results."""
    pod = env.pods()[0]["metadata"]["name"]
    results = []
    for plan in [
        await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 64})),
        await c.plan_edit_args(EditArgsRequest(NS, "llama", {}, preset="gmu-0.7")),
        await c.plan_scale(NS, "llama", 3),
        await c.plan_restart(NS, "llama"),
        await c.plan_rollback(NS, "llama"),
        await c.plan_cordon(NS, pod),
        await c.plan_delete_pod(NS, pod),
        await c.plan_restore(NS, "llama", 2),
    ]:
        results.append(await c.apply(plan, typed_name=plan.target.name))
    results += [await c.scale(NS, "llama", 4), await c.restart(NS, "llama"), await c.rollback(NS, "llama"), await c.delete_pod(NS, pod)]
    drain = await c.plan_drain(NS, pod)
    steps = [s async for s in c.drain(drain, lambda: (0, 0), typed_name=pod, poll_s=0.01)]
    results.append(steps[-1])
    return results


async def test_readonly_sends_no_mutating_request(env: Env) -> None:
    # give roll back something to roll back to, then start counting requests
    rw = env.cluster()
    assert (await rw.apply(await rw.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 100})))).ok
    env.emu.calls.clear()
    n_audit = len(env.audit.read())
    for c in (env.cluster(readonly=True), env.cluster(policy_config={"contexts": {"kind-*": {"readOnly": True}}})):
        assert c.readonly
        results = await _every_mitigation(c, env)
        assert len(results) == 13
        assert all("read-only" in (r.message) for r in results), results
        assert all(not getattr(r, "ok", False) for r in results[:-1]) and results[-1].status == "failed"
        perms = await c.permissions(NS)
        assert not any(perms.allowed(a) for a in ("edit", "scale", "restart", "rollback", "drain", "delete-pod", "cordon"))
        assert perms.actions["edit"].reason == "read-only"
    assert env.writes() == []  # not even a dry run
    reviews = [x for x in env.emu.calls if x.path.endswith("selfsubjectaccessreviews")]
    assert reviews and all(x.body["spec"]["resourceAttributes"]["verb"] in ("get", "list", "watch") for x in reviews)
    assert env.vllm()["args"][1] == "100" and env.deployment()["spec"]["replicas"] == 2
    refused = env.audit.read()[n_audit:]
    assert len(refused) == 26 and all(not x["result"]["ok"] for x in refused)


async def test_production_context_requires_the_target_name(env: Env) -> None:
    c = env.cluster(policy_config={"contexts": {"kind-*": {"production": True}}})
    plan = await c.plan_scale(NS, "llama", 3)
    assert plan.requires_typed_name and plan.confirm_word == "llama"
    for typed in (None, "", "Llama", "llama "):
        res = await c.apply(plan, typed_name=typed)
        assert not res.ok and "type 'llama'" in res.message
    assert not env.writes()
    assert (await c.apply(plan, typed_name="llama")).ok
    assert env.deployment()["spec"]["replicas"] == 3


async def test_scale_uses_the_scale_subresource_with_a_test(env: Env) -> None:
    c = env.cluster()
    plan = await c.plan_scale(NS, "llama", 3)
    assert plan.patch == [{"op": "test", "path": "/spec/replicas", "value": 2}, {"op": "replace", "path": "/spec/replicas", "value": 3}]
    assert plan.diff == "-replicas: 2\n+replicas: 3"
    assert (await c.apply(plan)).ok
    assert [(w.method, w.path) for w in env.writes()] == [("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale")] * 2
    assert len(env.pods()) == 3
    # someone else scaled meanwhile: the stale plan is refused
    stale = await c.plan_scale(NS, "llama", 5)
    assert (await c.scale(NS, "llama", 4)).ok
    res = await c.apply(stale)
    assert not res.ok and res.details["kind"] == "conflict" and env.deployment()["spec"]["replicas"] == 4
    bad = await c.plan_scale(NS, "llama", -1)
    assert not bad.ok


async def test_restart_sets_restarted_at_like_kubectl(env: Env) -> None:
    c = env.cluster()
    old = {p["metadata"]["name"] for p in env.pods()}
    plan = await c.plan_restart(NS, "llama")
    stamp = plan.data["restarted_at"]
    assert plan.patch == {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: stamp}}}}}
    assert (await c.apply(plan)).ok
    assert env.writes()[-1].content_type == "application/merge-patch+json"
    assert env.deployment()["spec"]["template"]["metadata"]["annotations"][RESTARTED_AT_ANNOTATION] == stamp
    assert env.deployment()["spec"]["template"]["metadata"]["labels"] == {"app": "llama", "serving": "true"}  # merged, not replaced
    assert old.isdisjoint({p["metadata"]["name"] for p in env.pods()})  # every pod replaced


async def test_roll_back_restores_the_previous_template(env: Env) -> None:
    c = env.cluster()
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 128})))).ok
    assert env.deployment()["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    template_v2 = env.deployment()["spec"]["template"]
    env.emu.calls.clear()
    plan = await c.plan_rollback(NS, "llama")
    assert plan.summary == "roll back deployment/llama -n serving: revision 2 -> 1"
    assert [ln for ln in plan.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")] == ["-- 128", "+- 256"]
    assert plan.patch[0] == {"op": "test", "path": "/spec/template", "value": template_v2}
    assert plan.patch[1]["op"] == "replace" and plan.patch[1]["path"] == "/spec/template"
    assert "pod-template-hash" not in plan.patch[1]["value"]["metadata"]["labels"]
    # the Deployment, its ReplicaSets, then who else controls it (an HPA or an owner would undo the change)
    assert [x.path for x in env.emu.calls] == [f"/apis/apps/v1/namespaces/{NS}/deployments/llama", f"/apis/apps/v1/namespaces/{NS}/replicasets", f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers"]
    assert env.emu.calls[1].query == {"labelSelector": "app=llama"}
    assert (await c.apply(plan)).ok
    d = env.deployment()
    assert d["spec"]["template"]["spec"]["containers"][0]["args"] == ARGS
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"  # revision 1 reused as 3
    assert "kubernetes.io/change-cause" not in d["metadata"]["annotations"]
    assert json.loads(d["metadata"]["annotations"][PREVIOUS_ARGS_ANNOTATION])["args"][1] == "128"
    rs = env.emu.items("replicasets", NS)
    assert len(rs) == 2 and sorted(r["spec"]["replicas"] for r in rs) == [0, 2]
    # rolling back again goes to revision 2 (kubectl undo semantics)
    again = await c.plan_rollback(NS, "llama")
    assert again.data["to_revision"] == 2


async def test_roll_back_without_history_is_refused_clearly(env: Env) -> None:
    plan = await env.cluster().plan_rollback(NS, "llama")
    assert not plan.ok and "no revision before 1" in plan.errors[0]


async def test_statefulset_edit_scale_and_status(env: Env) -> None:
    sts = vllm_deployment("qwen", replicas=1)
    sts["kind"] = "StatefulSet"
    sts["spec"].pop("strategy")
    sts["spec"].pop("progressDeadlineSeconds")
    sts["spec"]["serviceName"] = "qwen"
    sts["status"] = {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1, "currentRevision": "qwen-1", "updateRevision": "qwen-1", "observedGeneration": 1}
    env.emu.add(sts)
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "qwen", {"max-num-seqs": 32}, kind="StatefulSet"))
    assert plan.target.kind == "StatefulSet" and plan.ok
    assert (await c.apply(plan)).ok
    assert env.writes()[-1].path == f"/apis/apps/v1/namespaces/{NS}/statefulsets/qwen"
    got = env.emu.get("statefulsets", NS, "qwen")
    assert got["spec"]["template"]["spec"]["containers"][0]["args"][1] == "32" and got["metadata"]["generation"] == 2
    st = await c.rollout_status(NS, "qwen", kind="StatefulSet")
    assert st.state == "progressing" and "spec update to be observed" in st.reason
    assert (await c.scale(NS, "qwen", 2)).ok is False  # kind defaults to Deployment: none is called qwen
    assert (await c.restart(NS, "qwen", kind="StatefulSet")).ok
    plan = await c.plan_scale(NS, "qwen", 2, kind="StatefulSet")
    assert (await c.apply(plan)).ok and env.emu.get("statefulsets", NS, "qwen")["spec"]["replicas"] == 2
    rb = await c.plan_rollback(NS, "qwen", kind="StatefulSet")
    assert not rb.ok and "Deployments" in rb.errors[0]

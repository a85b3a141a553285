"""Issue 13's defects, driven through KubeCluster's public entry points against the emulator's
real semantics (graceful deletion, Eviction + PDBs, EndpointSlices, StatefulSets, HPA, owners,
paging). Each was written first as a strict xfail and seen failing for the defect's own reason."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any


from tests.integration.kube_env import NS, Env, env, make_env  # noqa: F401 - fixture
from tests.integration.test_kube_discovery import PAGE
from tests.k8s_emulator import res, vllm_deployment, vllm_statefulset
from tests.waits import eventually
from tui.core.cluster.base import EditArgsRequest
from tui.core.sources.kube import ClusterSource


class Load:
    """The target's (running, waiting), recording whether any EndpointSlice still listed it."""

    def __init__(self, env: Env, pod: str, service: str = "llama", value: tuple[int, int] = (0, 0)) -> None:
        self.env, self.pod, self.service, self.value = env, pod, service, value
        self.listed: list[bool] = []

    async def __call__(self) -> tuple[int, int]:
        pod = self.env.emu.get("pods", NS, self.pod)
        ip = (pod or {}).get("status", {}).get("podIP")
        self.listed.append(ip in self.env.emu.endpoint_ips(NS, self.service))
        return self.value


def helm_service(name: str = "llama") -> dict:
    """`helm create`'s Service: it selects exactly the Deployment's own selector labels."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS}, "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": "http"}]}}


def pdb(min_available: Any, name: str = "llama") -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS}, "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "llama"}}}}


async def run_drain(env: Env, target: str, load: Any, **kw: Any) -> list:
    c = env.cluster()
    plan = await c.plan_drain(NS, target)
    steps = []
    async for s in c.drain(plan, load, poll_s=0.01, spare_timeout_s=kw.pop("spare_timeout_s", 2.0), idle_timeout_s=kw.pop("idle_timeout_s", 0.3), **kw):
        steps.append(s)
    return steps


# ---- defect 2: scale from 0 ----


async def test_scale_up_from_zero_succeeds_and_a_real_change_is_still_a_conflict(env: Env) -> None:
    c = env.cluster()
    assert (await c.scale(NS, "llama", 0)).ok and env.deployment()["spec"]["replicas"] == 0
    res = await c.apply(await c.plan_scale(NS, "llama", 2))
    assert res.ok, res.message
    assert env.deployment()["spec"]["replicas"] == 2
    stale = await c.plan_scale(NS, "llama", 5)
    assert (await c.scale(NS, "llama", 3)).ok
    res = await c.apply(stale)
    assert not res.ok and res.details["kind"] == "conflict"


# ---- defect 3: out of rotation before judging in-flight ----


async def test_drain_behind_a_helm_create_service_leaves_every_endpointslice_first(tmp_path: Path) -> None:
    async for env in make_env(tmp_path):
        env.emu._update("services", env.emu.get("services", NS, "llama"), helm_service())
        target = env.pods()[0]["metadata"]["name"]
        load = Load(env, target)
        steps = await run_drain(env, target, load)
        assert load.listed, "in-flight was never judged"
        assert not any(load.listed), f"in-flight judged while the pod was still in an EndpointSlice: {load.listed}"
        assert steps[-1].step == "done"


async def test_drain_plan_names_the_inferencepool_that_routes_to_the_pod(env: Env) -> None:
    env.emu.install_crd("inferencepools")
    env.emu.add({"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool", "metadata": {"name": "llama-pool", "namespace": NS}, "spec": {"selector": {"app": "llama"}, "targetPortNumber": 8000, "extensionRef": {"name": "llama-epp"}}})
    plan = await env.cluster().plan_drain(NS, env.pods()[0]["metadata"]["name"])
    assert "InferencePool llama-pool" in plan.diff + "\n".join(list(plan.warnings) + list(plan.errors))


# ---- defect 4: never detach a StatefulSet pod ----


async def test_drain_never_makes_a_statefulset_pod_stop_matching_its_selector(tmp_path: Path) -> None:
    async for env in make_env(tmp_path, statefulset_controller=True):
        selector = {"matchLabels": {"app": "qwen"}, "matchExpressions": [{"key": "serving", "operator": "In", "values": ["true"]}]}
        env.emu.add(vllm_statefulset(replicas=2, selector=selector))
        env.emu.add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "qwen", "namespace": NS}, "spec": {"selector": {"app": "qwen", "serving": "true"}, "ports": [{"port": 80, "targetPort": 8000}]}})
        cancel = asyncio.Event()
        c = env.cluster()
        plan = await c.plan_drain(NS, "qwen-1")
        async for s in c.drain(plan, Load(env, "qwen-1", "qwen", (5, 5)), cancel=cancel, poll_s=0.01, spare_timeout_s=1.0):
            if s.step == "wait-idle":
                cancel.set()
        versions = env.emu.objects[("v1/pods", NS, "qwen-1")].history
        owned = [any(r.get("kind") == "StatefulSet" for r in v["metadata"].get("ownerReferences") or []) for v in versions]
        assert all(owned), "the StatefulSet released its own pod"


# ---- defect 5: evict, honour PDBs, the pod's own grace period ----


async def test_drain_evicts_instead_of_deleting(env: Env) -> None:
    env.emu.add(pdb(1))
    target = env.pods()[0]["metadata"]["name"]
    await run_drain(env, target, Load(env, target))
    paths = [(w.method, w.path) for w in env.emu.mutating_calls()]
    assert ("POST", f"/api/v1/namespaces/{NS}/pods/{target}/eviction") in paths
    assert ("DELETE", f"/api/v1/namespaces/{NS}/pods/{target}") not in paths


async def test_drain_blocked_by_a_pdb_says_so_and_leaves_the_pod(env: Env) -> None:
    env.emu.add(pdb("100%"))
    target = env.pods()[0]["metadata"]["name"]
    c = env.cluster()
    plan = await c.plan_drain(NS, target)
    assert "PodDisruptionBudget llama" in plan.diff + "\n".join(plan.warnings)
    steps = await run_drain(env, target, Load(env, target))
    assert steps[-1].status == "failed" and "blocked by PDB llama" in steps[-1].message
    assert not env.emu.get("pods", NS, target)["metadata"].get("deletionTimestamp")


async def test_drain_grace_defaults_to_the_pods_own_period(env: Env) -> None:
    env.emu.add(vllm_deployment("slowstop", grace=180, labels={"serving": "true"}))
    target = next(p for p in env.emu.items("pods", NS) if p["metadata"]["labels"]["app"] == "slowstop")["metadata"]["name"]
    await run_drain(env, target, Load(env, target, "slowstop"))
    assert env.emu.deleted and env.emu.deleted[-1] == (NS, target, 180)


# ---- defect 6: the spare wait with an unready replica ----


async def test_spare_wait_passes_with_an_unready_replica(tmp_path: Path) -> None:
    async for env in make_env(tmp_path):
        scale = env.emu.get("deployments", NS, "llama")
        scale["spec"]["replicas"] = 3
        env.emu._update("deployments", env.emu.get("deployments", NS, "llama"), scale)
        names = [p["metadata"]["name"] for p in env.pods()]
        env.emu.set_ready(NS, names[2], False)  # one replica is unready; the target is another one
        steps = await run_drain(env, names[0], Load(env, names[0]), spare_timeout_s=0.5)
        assert ("wait-spare", "ok") in [(s.step, s.status) for s in steps]


async def test_drain_removes_exactly_the_target_without_a_replacement(env: Env) -> None:
    before = {p["metadata"]["name"] for p in env.pods()}
    target = sorted(before)[0]
    c = env.cluster()
    steps = await run_drain(env, target, Load(env, target))
    if "restore_replicas" in steps[-1].data:  # a drain that leaves the restore to a separate plan
        assert (await c.apply(await c.plan_restore(NS, "llama", steps[-1].data["restore_replicas"]))).ok
    ever = {name for (r, ns, name) in env.emu.objects.keys() if r == res("pods") and ns == NS and name.startswith("llama")}
    created = ever - before
    assert len(created) == 1, f"pods created for this drain: {sorted(created)} (only the spare should be)"
    assert {p["metadata"]["name"] for p in env.pods()} == (before - {target}) | created and env.deployment()["spec"]["replicas"] == 2


# ---- defect 7: controllers that revert kvwatch's change ----


async def test_scale_of_an_hpa_managed_deployment_refuses_or_sticks(env: Env) -> None:
    env.emu.add({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "llama", "namespace": NS}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}, "minReplicas": 2, "maxReplicas": 4}})
    c = env.cluster()
    plan = await c.plan_scale(NS, "llama", 3)
    res = await c.apply(plan) if plan.ok else None
    env.emu.advance(15)
    if res is not None and res.ok:
        assert env.deployment()["spec"]["replicas"] == 3, "reported success for a change the HPA reverted"
    else:
        assert "HorizontalPodAutoscaler/llama" in "\n".join(plan.errors) + (res.message if res else "")


async def test_edit_of_a_leaderworkerset_statefulset_refuses_or_sticks(env: Env) -> None:
    env.emu.install_crd("leaderworkersets")
    tpl = vllm_deployment("big")["spec"]["template"]
    env.emu.add({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "big", "namespace": NS}, "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": tpl}}})
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "big", {"max-num-seqs": 32}, kind="StatefulSet"))
    res = await c.apply(plan) if plan.ok else None
    env.emu.reconcile()
    args = env.emu.get("statefulsets", NS, "big")["spec"]["template"]["spec"]["containers"][0]["args"]
    if res is not None and res.ok:
        assert args[1] == "32", "reported success for a change the LeaderWorkerSet reverted"
    else:
        assert "LeaderWorkerSet/big" in "\n".join(plan.errors) + (res.message if res else "")


async def test_edit_of_an_inferenceservice_deployment_refuses_or_sticks(env: Env) -> None:
    env.emu.install_crd("inferenceservices")
    containers = vllm_deployment()["spec"]["template"]["spec"]["containers"][:1]
    env.emu.add({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "chat", "namespace": NS}, "spec": {"predictor": {"minReplicas": 1, "containers": containers}}})
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "chat-predictor", {"max-num-seqs": 32}))
    res = await c.apply(plan) if plan.ok else None
    env.emu.reconcile()
    args = env.deployment("chat-predictor")["spec"]["template"]["spec"]["containers"][0]["args"]
    if res is not None and res.ok:
        assert args[1] == "32", "reported success for a change the InferenceService reverted"
    else:
        assert "InferenceService/chat" in "\n".join(plan.errors) + (res.message if res else "")


# ---- defect 8: rollout status as kubectl computes it ----


async def test_rollout_with_a_recovered_crashlooping_pod_is_done(env: Env) -> None:
    c = env.cluster()
    pod = env.pods()[0]["metadata"]["name"]
    for _ in range(3):
        env.emu.crash(NS, pod)
    env.emu.set_ready(NS, pod)
    st = await c.rollout_status(NS, "llama")
    assert st.state == "done", st.reason


async def test_restart_and_rollback_of_a_paused_deployment_are_refused(env: Env) -> None:
    d = env.deployment()
    d["spec"]["paused"] = True
    env.emu._update("deployments", env.deployment(), d)
    c = env.cluster()
    for plan in (await c.plan_restart(NS, "llama"), await c.plan_rollback(NS, "llama")):
        assert not plan.ok and "paused" in "\n".join(plan.errors)


async def test_statefulset_partitioned_rollout_is_complete_like_kubectl(tmp_path: Path) -> None:
    async for env in make_env(tmp_path, statefulset_controller=True):
        env.emu.add(vllm_statefulset(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}))
        c = env.cluster()
        assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "qwen", {"max-num-seqs": 32}, kind="StatefulSet")))).ok
        assert env.emu.get("statefulsets", NS, "qwen")["status"]["updatedReplicas"] == 1
        st = await c.rollout_status(NS, "qwen", kind="StatefulSet")
        assert st.state == "done", st.reason  # kubectl: "partitioned roll out complete: 1 new pods have been updated"


async def test_statefulset_stuck_on_a_broken_pod_says_to_delete_it(tmp_path: Path) -> None:
    async for env in make_env(tmp_path, statefulset_controller=True):
        env.emu.add(vllm_statefulset(replicas=2))
        c = env.cluster()
        env.emu.pod_start = "loading"  # the bad args never become ready
        assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "qwen", {"max-num-seqs": 512}, kind="StatefulSet")))).ok
        env.emu.crash(NS, "qwen-1")
        assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "qwen", {"max-num-seqs": 256}, kind="StatefulSet")))).ok
        assert env.emu.get("pods", NS, "qwen-1")["metadata"]["labels"]["controller-revision-hash"] != env.emu.get("statefulsets", NS, "qwen")["status"]["updateRevision"]
        st = await c.rollout_status(NS, "qwen", kind="StatefulSet")
        assert "qwen-1" in st.reason and "delete" in st.reason, st.reason


# ---- defect 10: lists and watches ----


async def test_pod_list_is_paged(env: Env) -> None:
    await env.cluster().list_pods(NS)
    lists = [c for c in env.emu.calls if c.method == "GET" and c.path.endswith("/pods") and "watch" not in c.query]
    assert lists and all("limit" in c.query for c in lists)


async def test_watch_resumes_after_an_error_and_relists_only_on_410(env: Env) -> None:
    c = env.cluster(watch_timeout_s=1)
    gen = c.watch_pods(NS)
    first = await asyncio.wait_for(gen.__anext__(), 5)
    assert first.type == "SYNC"
    env.emu.fail("GET", rf"/api/v1/namespaces/{NS}/pods$", 500, times=1)

    def lists() -> int:
        return sum(1 for x in env.emu.calls if x.method == "GET" and x.path.endswith("/pods") and x.query.get("watch") not in ("true", "True", "1"))

    async def until(cond: Any) -> None:
        for _ in range(100):
            if cond():
                return
            await asyncio.sleep(0.05)

    await until(lambda: len([x for x in env.emu.calls if x.query.get("watch")]) >= 3)
    try:
        assert lists() == 1, "a non-410 watch error re-listed"
        env.emu.expire_watches()
        await until(lambda: lists() >= 2)
        assert lists() == 2, "410 Gone must re-list"
    finally:
        await gen.aclose()


# ---- defect 11: metrics port ----


async def test_metrics_port_expands_env_var_references(env: Env) -> None:
    env.emu.add(vllm_deployment("envport", args=["--port", "$(VLLM_PORT)"], env=[{"name": "VLLM_PORT", "value": "9100"}], labels={"serving": "true"}))
    c = env.cluster()
    pod = next(p for p in await c.list_pods(NS) if p.name.startswith("envport"))
    assert ":9100/proxy/metrics" in c.metrics_url(pod)


async def test_metrics_port_falls_back_to_the_named_container_port(env: Env) -> None:
    d = vllm_deployment("named", args=["--max-num-seqs", "64"], labels={"serving": "true"})
    d["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 9000, "name": "metrics"}]
    env.emu.add(d)
    c = env.cluster()
    pod = next(p for p in await c.list_pods(NS) if p.name.startswith("named"))
    assert ":9000/proxy/metrics" in c.metrics_url(pod)


async def test_metrics_port_of_kserve_huggingfaceserver_with_the_vllm_backend(env: Env) -> None:
    d = vllm_deployment("hf", command=["python", "-m", "huggingfaceserver"], args=["--model_name=llama", "--backend=vllm"], labels={"serving": "true"})
    d["spec"]["template"]["spec"]["containers"][0].pop("ports")
    env.emu.add(d)
    c = env.cluster()
    pods = [p for p in await c.list_pods(NS) if p.name.startswith("hf")]
    assert pods, "huggingfaceserver --backend=vllm is not recognised as a vLLM pod"
    assert ":8080/proxy/metrics" in c.metrics_url(pods[0])


# ---- defect 12: field manager ----


async def test_every_write_carries_field_manager_kvwatch(env: Env) -> None:
    c = env.cluster()
    pod = env.pods()[0]["metadata"]["name"]
    assert (await c.apply(await c.plan_cordon(NS, pod))).ok
    assert (await c.scale(NS, "llama", 3)).ok
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 32})))).ok
    writes = [w for w in env.writes() if w.method in ("PATCH", "PUT", "POST")]
    assert writes and all(w.query.get("fieldManager") == "kvwatch" for w in writes), [(w.method, w.path, w.query) for w in writes]


async def test_two_namespaces_pods_with_the_same_name_do_not_collide(tmp_path: Path) -> None:
    async for env in make_env(tmp_path, statefulset_controller=True):
        src = ClusterSource(env.same_pod_in("team-a", "team-b", page=PAGE), timeout=2.0)
        await src.start()
        try:
            got = {(s.pod.namespace, s.pod.name) for s in await src.poll() if s.pod.name == "vllm-0"}
            assert got == {("team-a", "vllm-0"), ("team-b", "vllm-0")}
        finally:
            await src.close()


# ---- defect 9: the pod proxy load on the API server ----


async def test_proxy_scrapes_stay_within_a_request_budget(tmp_path: Path) -> None:
    async for env in make_env(tmp_path):
        env.emu.add(vllm_deployment("fleet", replicas=80, labels={"serving": "true"}))
        for p in env.emu.items("pods", NS):
            env.emu.pod_metrics[(NS, p["metadata"]["name"])] = PAGE
        env.emu.proxy_delay = 0.05
        src = ClusterSource(env.cluster(watch_timeout_s=2), timeout=5.0)
        await src.start()
        try:
            await src.poll()
        finally:
            await src.close()
        proxied = sorted(c.at for c in env.emu.calls if "/proxy/" in c.path)
        assert len(proxied) == 82
        busiest = max(sum(1 for t in proxied if t0 <= t < t0 + 1.0) for t0 in proxied)
        assert busiest <= 50, f"{busiest} proxy requests in one second ({env.emu.proxy_inflight_max} at once)"


# ---- defect 1: exec shares the app's ApiClient ----


async def test_api_calls_during_an_exec_do_not_go_over_the_websocket(env: Env) -> None:
    c = env.cluster()
    pod = env.pods()[0]["metadata"]["name"]
    env.emu.fail("GET", r"/exec$", 500, "exec is slow to connect", delay=1.0)
    exec_task = asyncio.create_task(c.exec_in_pod(NS, pod, "vllm", ["nvidia-smi"]))
    try:
        # the exec is connecting (still: a done task would have given up before the list)
        await eventually(lambda: exec_task.done() or any(x.path.endswith("/exec") for x in env.emu.calls),
                         what="the exec request")
        assert not exec_task.done(), exec_task
        pods = await c.list_pods(NS)
        assert {p.name for p in pods} == {p["metadata"]["name"] for p in env.pods()}
    finally:
        with contextlib.suppress(Exception):
            await exec_task


async def test_access_reviews_ask_about_the_resources_actually_touched(env: Env) -> None:
    env.emu.deny("create", "pods", "eviction")
    perms = await env.cluster().permissions(NS)
    asked = {
        (a["verb"], a.get("group") or "", a["resource"], a.get("subresource") or "")
        for c in env.emu.calls
        if c.path.endswith("selfsubjectaccessreviews")
        for a in [c.body["spec"]["resourceAttributes"]]
    }
    assert {("create", "", "pods", "eviction"), ("create", "", "pods", "exec")} <= asked
    assert any(r == "statefulsets" for _, _, r, _ in asked)
    assert not perms.allowed("drain")


async def test_audit_records_the_authenticated_identity(env: Env) -> None:
    assert (await env.cluster().scale(NS, "llama", 3)).ok
    assert env.audit.read()[-1]["user"] == env.emu.identity

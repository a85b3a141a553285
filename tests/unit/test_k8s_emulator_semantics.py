"""The emulator behaves as the real API server and controllers do, checked with the plain
`kubernetes` client (no kvwatch code): one short test per behaviour kvwatch depends on."""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

import kmock
import pytest
import pytest_asyncio
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.k8s_emulator import KubeEmulator, client_for, vllm_deployment, vllm_service, vllm_statefulset

NS = "serving"


class Kube:
    def __init__(self, emu: KubeEmulator, api: client.ApiClient) -> None:
        self.emu, self.api = emu, api
        self.core, self.apps = client.CoreV1Api(api), client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    async def call(self, fn: Any, *a: Any, **kw: Any) -> Any:
        """A typed client method, its answer decoded as plain JSON (as kvwatch reads them)."""

        def run() -> Any:
            resp = fn(*a, _preload_content=False, **kw)
            if resp.status >= 400:  # the generated client raises only when it deserializes
                raise ApiException(http_resp=resp)
            return json.loads(resp.data or b"null")

        return await asyncio.to_thread(run)

    async def raw(self, method: str, path: str, body: Any = None, ctype: str = "application/json", query: list | None = None) -> tuple[int, Any]:
        """(status, decoded body) of one request, errors included."""

        def run() -> tuple[int, Any]:
            m, url, headers, data = self.api.param_serialize(method, path, query_params=query or [], header_params={"Content-Type": ctype, "Accept": "application/json"}, body=body)[:4]
            r = self.api.call_api(m, url, headers, data)
            return r.status, json.loads(r.read() or b"null")

        return await asyncio.to_thread(run)

    def pods(self, prefix: str = "llama") -> list[dict]:
        return sorted((p for p in self.emu.items("pods", NS) if p["metadata"]["name"].startswith(prefix)), key=lambda p: p["metadata"]["name"])


@pytest_asyncio.fixture
async def kube() -> AsyncIterator[Kube]:
    async with KubeEmulator() as emu, kmock.Server(emu) as srv:
        emu.add(vllm_deployment())
        emu.add(vllm_service())
        emu.calls.clear()
        yield Kube(emu, client_for(srv))


def pdb(name: str = "llama", **spec: Any) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS}, "spec": {"selector": {"matchLabels": {"app": "llama"}}, **spec}}


# ---- Scale subresource ----


async def test_scale_subresource_omits_zero_replicas_so_a_json_patch_test_fails(kube: Kube) -> None:
    await kube.call(kube.apps.patch_namespaced_deployment_scale, "llama", NS, {"spec": {"replicas": 0}})
    code, scale = await kube.raw("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale")
    assert code == 200 and scale["spec"] == {}
    patch = [{"op": "test", "path": "/spec/replicas", "value": 0}, {"op": "replace", "path": "/spec/replicas", "value": 1}]
    code, body = await kube.raw("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale", patch, "application/json-patch+json")
    assert code == 422 and body["reason"] == "Invalid"
    add = [{"op": "add", "path": "/spec/replicas", "value": 1}]
    code, body = await kube.raw("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale", add, "application/json-patch+json")
    assert code == 200 and body["spec"] == {"replicas": 1}


# ---- graceful deletion ----


async def test_delete_is_graceful_with_the_pods_own_grace_period(kube: Kube) -> None:
    kube.emu.shutdown_s = None  # the container ignores SIGTERM: the kubelet waits out the grace period
    name = kube.pods()[0]["metadata"]["name"]
    await kube.call(kube.core.delete_namespaced_pod, name, NS)
    pod = kube.emu.get("pods", NS, name)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 60 and pod["metadata"]["deletionTimestamp"]
    assert len([p for p in kube.pods() if not p["metadata"].get("deletionTimestamp")]) == 2  # the ReplicaSet replaced it already
    kube.emu.advance(59)
    assert kube.emu.get("pods", NS, name) is not None
    kube.emu.advance(1)
    assert kube.emu.get("pods", NS, name) is None


async def test_finalizers_keep_a_terminating_pod_until_removed(kube: Kube) -> None:
    name = kube.pods()[0]["metadata"]["name"]
    await kube.call(kube.core.patch_namespaced_pod, name, NS, {"metadata": {"finalizers": ["example.com/hold"]}})
    await kube.call(kube.core.delete_namespaced_pod, name, NS, grace_period_seconds=5)
    kube.emu.advance(10)
    assert kube.emu.get("pods", NS, name)["metadata"]["deletionTimestamp"]
    await kube.call(kube.core.patch_namespaced_pod, name, NS, {"metadata": {"finalizers": None}})
    assert kube.emu.get("pods", NS, name) is None


# ---- EndpointSlices ----


def _slice_endpoints(kube: Kube, svc: str = "llama") -> dict[str, dict]:
    slices = kube.emu.items("endpointslices", NS)
    return {e["targetRef"]["name"]: e for s in slices if s["metadata"]["labels"]["kubernetes.io/service-name"] == svc for e in s["endpoints"]}


async def test_endpointslices_follow_selector_readiness_and_termination(kube: Kube) -> None:
    kube.emu.shutdown_s = None
    code, got = await kube.raw("GET", f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices", query=[("labelSelector", "kubernetes.io/service-name=llama")])
    assert code == 200 and len(got["items"]) == 1 and got["items"][0]["ports"] == [{"name": "", "port": 8000, "protocol": "TCP"}]
    a, b = (p["metadata"]["name"] for p in kube.pods())
    eps = _slice_endpoints(kube)
    assert set(eps) == {a, b} and eps[a]["addresses"] == [kube.emu.get("pods", NS, a)["status"]["podIP"]]
    kube.emu.set_ready(NS, a, False)
    assert _slice_endpoints(kube)[a]["conditions"] == {"ready": False, "serving": False, "terminating": False}
    await kube.call(kube.core.patch_namespaced_pod, a, NS, {"metadata": {"labels": {"serving": "draining"}}})
    assert a not in _slice_endpoints(kube)
    await kube.call(kube.core.delete_namespaced_pod, b, NS)
    assert _slice_endpoints(kube)[b]["conditions"] == {"ready": False, "serving": True, "terminating": True}


# ---- Eviction and PodDisruptionBudgets ----


async def test_pdb_status_is_computed_like_the_disruption_controller(kube: Kube) -> None:
    kube.emu.add(pdb("min", minAvailable=1))
    kube.emu.add(pdb("pct", maxUnavailable="50%", selector={"matchLabels": {"app": "llama"}}))
    st = kube.emu.get("poddisruptionbudgets", NS, "min")["status"]
    assert (st["currentHealthy"], st["desiredHealthy"], st["expectedPods"], st["disruptionsAllowed"]) == (2, 1, 2, 1)
    st = kube.emu.get("poddisruptionbudgets", NS, "pct")["status"]
    assert (st["desiredHealthy"], st["expectedPods"], st["disruptionsAllowed"]) == (1, 2, 1)  # 50% of the Deployment's 2, rounded up
    kube.emu.set_ready(NS, kube.pods()[0]["metadata"]["name"], False)
    assert kube.emu.get("poddisruptionbudgets", NS, "min")["status"]["disruptionsAllowed"] == 0


async def test_eviction_blocked_by_a_pdb_answers_429_with_the_budget(kube: Kube) -> None:
    kube.emu.add(pdb(minAvailable=2))
    name = kube.pods()[0]["metadata"]["name"]
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=NS))
    with pytest.raises(ApiException) as e:
        await kube.call(kube.core.create_namespaced_pod_eviction, name, NS, body)
    assert e.value.status == 429
    status = json.loads(e.value.body)
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [{"reason": "DisruptionBudget", "message": "The disruption budget llama needs 2 healthy pods and has 2 currently"}]
    assert not kube.emu.get("pods", NS, name)["metadata"].get("deletionTimestamp")


async def test_eviction_allowed_spends_the_budget_and_deletes_gracefully(kube: Kube) -> None:
    kube.emu.add(pdb(minAvailable=1))
    kube.emu.shutdown_s = None
    a, b = (p["metadata"]["name"] for p in kube.pods())
    code, status = await kube.raw("POST", f"/api/v1/namespaces/{NS}/pods/{a}/eviction", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": a, "namespace": NS}})
    assert code == 201 and status["status"] == "Success"
    assert kube.emu.get("pods", NS, a)["metadata"]["deletionGracePeriodSeconds"] == 60
    kube.emu.pod_start = "loading"  # the next replacement loads its model
    replacement = next(p["metadata"]["name"] for p in kube.pods() if p["metadata"]["name"] not in (a, b))
    await kube.call(kube.core.delete_namespaced_pod, replacement, NS)
    code, _ = await kube.raw("POST", f"/api/v1/namespaces/{NS}/pods/{b}/eviction", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": b, "namespace": NS}})
    assert code == 429  # the replacement is not counted until it is Ready; one healthy pod left


async def test_eviction_with_two_matching_pdbs_is_a_500(kube: Kube) -> None:
    kube.emu.add(pdb("one", minAvailable=0))
    kube.emu.add(pdb("two", maxUnavailable=1))
    name = kube.pods()[0]["metadata"]["name"]
    code, status = await kube.raw("POST", f"/api/v1/namespaces/{NS}/pods/{name}/eviction", {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})
    assert code == 500 and "more than one PodDisruptionBudget" in status["message"]


# ---- HPA ----


async def test_hpa_scales_a_manual_change_back_on_its_next_sync(kube: Kube) -> None:
    kube.emu.add({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "llama", "namespace": NS}, "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}, "minReplicas": 2, "maxReplicas": 4}})
    kube.emu.advance(15)
    await kube.call(kube.apps.patch_namespaced_deployment_scale, "llama", NS, {"spec": {"replicas": 3}})
    assert kube.emu.get("deployments", NS, "llama")["spec"]["replicas"] == 3  # until the HPA syncs
    kube.emu.advance(15)
    assert kube.emu.get("deployments", NS, "llama")["spec"]["replicas"] == 2
    kube.emu.recommend(NS, "llama", 9)
    kube.emu.advance(15)
    assert kube.emu.get("deployments", NS, "llama")["spec"]["replicas"] == 4  # clamped to maxReplicas


# ---- StatefulSet and ReplicaSet controllers ----


async def test_statefulset_ordered_ready_creates_ordinals_one_at_a_time() -> None:
    async with KubeEmulator(statefulset_controller=True, pod_start="loading") as emu:
        emu.add(vllm_statefulset())
        assert [p["metadata"]["name"] for p in emu.items("pods", NS)] == ["qwen-0"]
        emu.set_ready(NS, "qwen-0")
        emu.set_ready(NS, "qwen-1")
        names = sorted(p["metadata"]["name"] for p in emu.items("pods", NS))
        assert names == ["qwen-0", "qwen-1", "qwen-2"]
        st = emu.get("statefulsets", NS, "qwen")["status"]
        assert st["currentRevision"] == st["updateRevision"] and emu.get("pods", NS, "qwen-0")["metadata"]["labels"]["controller-revision-hash"] == st["updateRevision"]


async def test_statefulset_parallel_rolling_update_respects_partition_and_on_delete() -> None:
    async with KubeEmulator(statefulset_controller=True) as emu:
        emu.add(vllm_statefulset(podManagementPolicy="Parallel", updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}))
        old = emu.get("statefulsets", NS, "qwen")["status"]["updateRevision"]
        sts = emu.get("statefulsets", NS, "qwen")
        sts["spec"]["template"]["spec"]["containers"][0]["args"][1] = "32"
        emu._update("statefulsets", emu.get("statefulsets", NS, "qwen"), sts)
        st = emu.get("statefulsets", NS, "qwen")["status"]
        revs = {p["metadata"]["name"]: p["metadata"]["labels"]["controller-revision-hash"] for p in emu.items("pods", NS)}
        assert revs == {"qwen-0": old, "qwen-1": old, "qwen-2": st["updateRevision"]}
        assert (st["updatedReplicas"], st["currentRevision"]) == (1, old)  # the partition holds the rollout
        sts = emu.get("statefulsets", NS, "qwen")
        sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
        sts["spec"]["template"]["spec"]["containers"][0]["args"][1] = "16"
        emu._update("statefulsets", emu.get("statefulsets", NS, "qwen"), sts)
        assert emu.get("statefulsets", NS, "qwen")["status"]["updatedReplicas"] == 0  # OnDelete: nothing replaced


async def test_statefulset_releases_a_pod_that_stops_matching_and_recreates_the_ordinal() -> None:
    async with KubeEmulator(statefulset_controller=True) as emu:
        emu.add(vllm_statefulset(replicas=1))
        pod = emu.get("pods", NS, "qwen-0")
        pod["metadata"]["labels"]["app"] = "detached"
        emu._update("pods", emu.get("pods", NS, "qwen-0"), pod)
        assert emu.get("pods", NS, "qwen-0")["metadata"]["ownerReferences"] == []  # released, kept its name
        assert emu.get("statefulsets", NS, "qwen")["status"]["replicas"] == 0  # the name is taken: no replacement yet
        emu._delete("pods", emu.get("pods", NS, "qwen-0"), 0)
        assert emu.get("pods", NS, "qwen-0")["metadata"]["labels"]["app"] == "qwen"  # recreated from the template


async def test_a_pod_whose_labels_stop_matching_is_released_and_replaced(kube: Kube) -> None:
    name = kube.pods()[0]["metadata"]["name"]
    h = kube.emu.get("pods", NS, name)["metadata"]["labels"]["pod-template-hash"]
    await kube.call(kube.core.patch_namespaced_pod, name, NS, {"metadata": {"labels": {"pod-template-hash": h + "x"}}})
    assert not kube.emu.get("pods", NS, name)["metadata"]["ownerReferences"]  # orphaned
    assert len(kube.pods()) == 3  # the ReplicaSet created a replacement


async def test_replicaset_scale_down_removes_the_lowest_pod_deletion_cost(kube: Kube) -> None:
    keep, drop = (p["metadata"]["name"] for p in kube.pods())
    await kube.call(kube.core.patch_namespaced_pod, drop, NS, {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-100"}}})
    await kube.call(kube.apps.patch_namespaced_deployment_scale, "llama", NS, {"spec": {"replicas": 1}})
    assert [p["metadata"]["name"] for p in kube.pods()] == [keep]


# ---- owners: LeaderWorkerSet, InferenceService; CRDs and discovery ----


async def test_custom_resources_exist_only_once_installed(kube: Kube) -> None:
    code, _ = await kube.raw("GET", f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{NS}/leaderworkersets")
    assert code == 404
    groups = {g["name"] for g in (await kube.raw("GET", "/apis"))[1]["groups"]}
    assert "leaderworkerset.x-k8s.io" not in groups and "apps" in groups
    kube.emu.install_crd("leaderworkersets", "inferencepools")
    groups = {g["name"] for g in (await kube.raw("GET", "/apis"))[1]["groups"]}
    assert {"leaderworkerset.x-k8s.io", "inference.networking.x-k8s.io"} <= groups
    pool = {"apiVersion": "inference.networking.x-k8s.io/v1alpha2", "kind": "InferencePool", "metadata": {"name": "pool"}, "spec": {"selector": {"app": "llama"}, "targetPortNumber": 8000, "extensionRef": {"name": "epp"}}}
    got = await kube.call(kube.custom.create_namespaced_custom_object, "inference.networking.x-k8s.io", "v1alpha2", NS, "inferencepools", pool)
    assert got["spec"]["selector"] == {"app": "llama"}


async def test_leaderworkerset_reapplies_its_statefulset(kube: Kube) -> None:
    kube.emu.install_crd("leaderworkersets")
    tpl = vllm_deployment("big")["spec"]["template"]
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "big"}, "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": tpl}}}
    await kube.call(kube.custom.create_namespaced_custom_object, "leaderworkerset.x-k8s.io", "v1", NS, "leaderworkersets", lws)
    sts = kube.emu.get("statefulsets", NS, "big")
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet" and sts["spec"]["replicas"] == 2
    await kube.call(kube.apps.patch_namespaced_stateful_set_scale, "big", NS, {"spec": {"replicas": 5}})
    assert kube.emu.get("statefulsets", NS, "big")["spec"]["replicas"] == 2  # reverted on the owner's next reconcile


async def test_inferenceservice_reapplies_its_deployment(kube: Kube) -> None:
    kube.emu.install_crd("inferenceservices")
    containers = vllm_deployment()["spec"]["template"]["spec"]["containers"][:1]
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "chat"}, "spec": {"predictor": {"minReplicas": 1, "containers": containers}}}
    await kube.call(kube.custom.create_namespaced_custom_object, "serving.kserve.io", "v1beta1", NS, "inferenceservices", isvc)
    body = [{"op": "replace", "path": "/spec/template/spec/containers/0/args/1", "value": "32"}]
    await kube.raw("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/chat-predictor", body, "application/json-patch+json")
    assert kube.emu.get("deployments", NS, "chat-predictor")["spec"]["template"]["spec"]["containers"][0]["args"][1] == "256"


# ---- lists and watches ----


async def test_list_paging_with_limit_and_continue(kube: Kube) -> None:
    for i in range(3):
        kube.emu.add({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"extra-{i}", "namespace": NS}, "spec": {"containers": []}, "status": {"phase": "Running"}})
    first = await kube.call(kube.core.list_namespaced_pod, NS, limit=2)
    assert len(first["items"]) == 2 and first["metadata"]["remainingItemCount"] == 3
    rest = await kube.call(kube.core.list_namespaced_pod, NS, limit=10, _continue=first["metadata"]["continue"])
    names = [p["metadata"]["name"] for p in first["items"] + rest["items"]]
    assert len(names) == 5 == len(set(names)) and "continue" not in rest["metadata"]
    kube.emu.expire_watches()
    with pytest.raises(ApiException) as e:
        await kube.call(kube.core.list_namespaced_pod, NS, limit=2, _continue=first["metadata"]["continue"])
    assert e.value.status == 410 and json.loads(e.value.body)["reason"] == "Expired"


async def test_watch_sends_bookmarks_and_a_forced_410(kube: Kube) -> None:
    rv = (await kube.call(kube.core.list_namespaced_pod, NS))["metadata"]["resourceVersion"]
    seen: list[tuple[str, Any]] = []

    def run() -> None:
        w = watch.Watch()
        for ev in w.stream(kube.core.list_namespaced_pod, NS, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=3, _request_timeout=10):
            seen.append((ev["type"], ev["raw_object"]))

    async def until(cond) -> None:
        end = asyncio.get_running_loop().time() + 30
        while not cond():
            assert asyncio.get_running_loop().time() < end, seen
            await asyncio.sleep(0.01)

    task = asyncio.create_task(asyncio.to_thread(run))
    await until(lambda: kube.emu._watchers)  # the watch is open
    at = kube.emu._rv
    kube.emu.bookmark()
    await until(lambda: seen)  # the bookmark reached the client
    kube.emu.expire_watches()
    with pytest.raises(ApiException) as e:
        await task
    assert e.value.status == 410
    assert seen[0][0] == "BOOKMARK" and seen[0][1]["metadata"]["resourceVersion"] == str(at)


async def test_request_log_records_every_request(kube: Kube) -> None:
    await kube.call(kube.core.list_namespaced_pod, NS)
    await kube.call(kube.core.patch_namespaced_pod, kube.pods()[0]["metadata"]["name"], NS, {"metadata": {"labels": {"x": "y"}}}, field_manager="kvwatch")
    assert [c.method for c in kube.emu.calls] == ["GET", "PATCH"] and kube.emu.calls[1].query["fieldManager"] == "kvwatch"


async def test_self_subject_review_reports_the_authenticated_user(kube: Kube) -> None:
    kube.emu.identity = "oidc:bob@example.com"
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    code, got = await kube.raw("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body)
    assert code == 201 and got["status"]["userInfo"]["username"] == "oidc:bob@example.com"

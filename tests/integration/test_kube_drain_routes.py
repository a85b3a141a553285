"""The drain on the workloads real clusters run: a `helm create` Service with a PDB (quarantine),
an HPA-managed Deployment (no spare the HPA would undo), and in-flight judged only from scrapes
taken after the pod left every EndpointSlice."""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.kube_env import NS, Env, env, make_env  # noqa: F401 - fixture
from tests.integration.test_kube_issue13_regressions import Load, helm_service, pdb, run_drain


async def test_helm_create_service_with_a_pdb_quarantines_and_accounts_for_every_pod(tmp_path: Path) -> None:
    async for env in make_env(tmp_path):
        env.emu._update("services", env.emu.get("services", NS, "llama"), helm_service())
        env.emu.add(pdb(1))
        before = {p["metadata"]["name"] for p in env.pods()}
        target = sorted(before)[0]
        c = env.cluster()
        plan = await c.plan_drain(NS, target)
        assert plan.ok and plan.data["mechanism"] == "quarantine" and plan.data["routes"] == ["Service llama"]
        assert "budget: PodDisruptionBudget llama: 1 disruptions allowed (2 healthy, needs 1)" in plan.diff
        assert any("quarantine" in w and "detaches the pod from its ReplicaSet" in w for w in plan.warnings)
        load = Load(env, target)
        steps = await run_drain(env, target, load)
        assert steps[-1].step == "done" and steps[-1].status == "ok", steps[-1].message
        assert load.listed and not any(load.listed)  # out of every EndpointSlice before in-flight was judged
        assert [s.step for s in steps if s.status == "ok"].index("endpoints") < [s.step for s in steps if s.status == "ok"].index("wait-idle")
        # no scale request at all: the Deployment stays at its count; the replacement is accounted for
        assert not any(w.path.endswith("/scale") for w in env.writes())
        assert env.deployment()["spec"]["replicas"] == 2
        now = {p["metadata"]["name"] for p in env.pods()}
        created = sorted(now - before)
        assert steps[-1].data["detached"] == [target] and steps[-1].data["created"] == created and len(created) == 1
        gone = env.emu.get("pods", NS, target)
        assert gone is None or gone["metadata"].get("deletionTimestamp")
        assert any(w.path.endswith(f"/pods/{target}/eviction") and w.query.get("dryRun") is None for w in env.writes())


async def test_helm_create_quarantine_is_refused_when_the_pdb_allows_no_disruption(tmp_path: Path) -> None:
    async for env in make_env(tmp_path):
        env.emu._update("services", env.emu.get("services", NS, "llama"), helm_service())
        env.emu.add(pdb(2))
        target = env.pods()[0]["metadata"]["name"]
        plan = await env.cluster().plan_drain(NS, target)
        assert not plan.ok and any("blocked by PDB llama: 0 disruptions allowed" in e for e in plan.errors)
        steps = await run_drain(env, target, Load(env, target))
        assert [(s.step, s.status) for s in steps] == [("check", "failed")] and env.writes() == []


async def test_drain_of_an_hpa_managed_deployment_starts_no_spare_the_hpa_would_undo(env: Env) -> None:
    env.emu.add({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "llama", "namespace": NS},
                 "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}, "minReplicas": 2, "maxReplicas": 4}})
    before = {p["metadata"]["name"] for p in env.pods()}
    target = sorted(before)[0]
    plan = await env.cluster().plan_drain(NS, target)
    assert plan.data["mechanism"] == "evict" and not plan.data["spare"]
    assert "managed by HorizontalPodAutoscaler/llama" in plan.diff
    steps = await run_drain(env, target, Load(env, target))
    assert steps[-1].step == "done", steps[-1].message
    assert not any(w.path.endswith("/scale") for w in env.writes())  # nothing the HPA reverts
    env.emu.advance(15)
    env.emu.reconcile()
    assert env.deployment()["spec"]["replicas"] == 2
    assert target not in {p["metadata"]["name"] for p in env.pods() if not p["metadata"].get("deletionTimestamp")}


async def test_in_flight_is_judged_only_from_scrapes_after_the_pod_left_rotation(env: Env) -> None:
    target = env.pods()[0]["metadata"]["name"]
    calls: list[str] = []

    def load() -> tuple[float, float, float]:
        # an idle reading from a scrape taken before the drain started, three times, then a fresh busy one, then idle
        calls.append("x")
        n = len(calls)
        if n <= 3:
            return (0.0, 0.0, time.time() - 3600)
        return (2.0, 0.0, time.time()) if n == 4 else (0.0, 0.0, time.time())

    steps = await run_drain(env, target, load)
    idle = [s for s in steps if s.step == "wait-idle"]
    assert [(s.status, s.data.get("running")) for s in idle] == [("running", 2.0), ("ok", None)]
    assert len(calls) == 5 and steps[-1].step == "done"


async def test_drain_of_a_leaderworkerset_pod_evicts_without_a_spare_or_a_detach(tmp_path: Path) -> None:
    async for env in make_env(tmp_path, statefulset_controller=True):
        from tests.k8s_emulator import vllm_deployment

        env.emu.install_crd("leaderworkersets")
        tpl = vllm_deployment("big")["spec"]["template"]
        env.emu.add({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "big", "namespace": NS},
                     "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": tpl}}})
        env.emu.add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "big", "namespace": NS},
                     "spec": {"selector": {"app": "big", "serving": "true"}, "ports": [{"port": 80, "targetPort": 8000}]}})
        env.emu.ready_all(NS)
        c = env.cluster()
        plan = await c.plan_drain(NS, "big-1")
        assert plan.ok and plan.data["mechanism"] == "evict" and not plan.data["spare"]
        assert "managed by LeaderWorkerSet/big" in plan.diff
        load = Load(env, "big-1", "big")
        steps = await run_drain(env, "big-1", load)
        assert steps[-1].step == "done", steps[-1].message
        assert load.listed and not any(load.listed)
        assert not any(w.path.endswith("/scale") or "/statefulsets/" in w.path for w in env.writes())
        versions = [v for v in env.emu.objects[("v1/pods", NS, "big-1")].history if v is not None]  # None: deleted
        assert all(any(r.get("kind") == "StatefulSet" for r in v["metadata"].get("ownerReferences") or []) for v in versions)
        assert env.emu.get("statefulsets", NS, "big")["spec"]["replicas"] == 2


async def test_a_replicaset_that_ignores_pod_deletion_cost_still_loses_only_the_target(env: Env) -> None:
    from tests.k8s_emulator.core import DELETION_COST

    before = {p["metadata"]["name"] for p in env.pods()}
    target = sorted(before)[0]
    seen: list[str] = []

    def load() -> tuple[float, float, float]:
        # as a cluster without PodDeletionCost ranks them: the spare (newest, same cost) goes first
        for p in env.pods():
            name = p["metadata"]["name"]
            if name not in before and not seen:
                seen.append(name)
                p["metadata"].setdefault("annotations", {})[DELETION_COST] = "-2147483648"
                env.emu._write("pods", p, "MODIFIED")
        return (0.0, 0.0, time.time())

    steps = await run_drain(env, target, load)
    seq = [(s.step, s.status) for s in steps]
    assert ("remove", "warn") in seq and ("evict", "ok") in seq and seq[-1] == ("done", "ok"), steps[-1].message
    assert seen and seen[0] in next(s.message for s in steps if s.step == "remove")
    live = {p["metadata"]["name"] for p in env.pods() if not p["metadata"].get("deletionTimestamp")}
    assert target not in live and len(live) == 2 and env.deployment()["spec"]["replicas"] == 2

"""Reads the drain and the controller checks need: who controls a workload (ownerReferences to
the top, HPAs), what routes to a pod (Services, EndpointSlices, InferencePools) and which
PodDisruptionBudgets cover it. Nothing here changes the cluster.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..routes import Budget, Route, budgets_for, endpoint_listing, routes_to
from ..values import ClusterError
from .transport import KubeTransport

# InferencePool: Gateway API Inference Extension, v1 (GA) and the v1alpha2 llm-d still serves
POOL_VERSIONS = (("inference.networking.k8s.io", "v1"), ("inference.networking.x-k8s.io", "v1alpha2"))
# controllers known to re-apply what they own: changing the owned object directly is undone
REAPPLYING = {"LeaderWorkerSet", "InferenceService", "Revision", "Service", "Configuration", "InferenceGraph"}


class KubeControl(KubeTransport):
    """Controller awareness and the drain's routing reads."""

    def _api(self, name: str) -> Any:
        from kubernetes import client

        cache = self.__dict__.setdefault("_apis", {})
        if name not in cache:
            cache[name] = getattr(client, name)(self.api)
        return cache[name]

    async def _get_owner(self, namespace: str, ref: Mapping[str, Any]) -> dict[str, Any] | None:
        """The object an ownerReference names, or None when it cannot be read (a CRD not served)."""
        kind, name = ref.get("kind"), ref.get("name")
        try:
            if kind == "ReplicaSet":
                rs: dict[str, Any] = await self._call(self.apps.read_namespaced_replica_set, name, namespace)
                return rs
            if kind in ("Deployment", "StatefulSet"):
                return await self._read_workload(namespace, str(name), str(kind))
            group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
            if not group:
                return None
            custom: dict[str, Any] = await self._call(self._api("CustomObjectsApi").get_namespaced_custom_object, group, version, namespace, f"{str(kind).lower()}s", name)
            return custom
        except ClusterError:
            return None

    async def owner_chain(self, namespace: str, obj: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(kind, name) of each controller above `obj`, nearest first, following ownerReferences
        with controller=true to the end (an owner that cannot be read ends the chain)."""
        out: list[tuple[str, str]] = []
        cur: Mapping[str, Any] | None = obj
        for _ in range(8):
            refs = ((cur or {}).get("metadata") or {}).get("ownerReferences") or []
            ref = next((r for r in refs if r.get("controller")), None)
            if ref is None:
                break
            out.append((str(ref.get("kind")), str(ref.get("name"))))
            cur = await self._get_owner(namespace, ref)
            if cur is None:
                break
        return out

    async def hpas_for(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        """HorizontalPodAutoscalers whose scaleTargetRef is this workload."""
        try:
            data = await self._call(self._api("AutoscalingV2Api").list_namespaced_horizontal_pod_autoscaler, namespace)
        except ClusterError:
            return []
        return [h for h in data.get("items") or [] if ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("kind") == kind
                and ((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name") == name]

    async def managed_by(self, namespace: str, kind: str, obj: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
        """The controllers above a workload that re-apply it, and the HPAs that scale it."""
        chain = [c for c in await self.owner_chain(namespace, obj) if c[0] in REAPPLYING]
        name = str((obj.get("metadata") or {}).get("name") or "")
        return chain, await self.hpas_for(namespace, kind, name)

    async def pod_controller(self, namespace: str, pod: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
        """The pod's workload: ("Deployment", dep) through its ReplicaSet, ("StatefulSet", sts), or
        (kind, None) for another owner; the selector that must keep matching comes from the
        nearest controller (a ReplicaSet's includes pod-template-hash)."""
        refs = (pod.get("metadata") or {}).get("ownerReferences") or []
        ref = next((r for r in refs if r.get("controller")), None)
        kind, name = (ref.get("kind"), ref.get("name")) if ref else (None, None)
        if not kind or not name:
            return None, None
        if kind == "ReplicaSet":
            rs = await self._get_owner(namespace, {"kind": "ReplicaSet", "name": name})
            up = next((r for r in ((rs or {}).get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)
            if up and up.get("kind") == "Deployment":
                return "Deployment", await self._get_owner(namespace, up)
            return "ReplicaSet", rs
        if kind == "StatefulSet":
            return "StatefulSet", await self._get_owner(namespace, {"kind": "StatefulSet", "name": name})
        return kind, None

    async def routes_for(self, namespace: str, labels: Mapping[str, str]) -> tuple[list[Route], list[str]]:
        """Services and InferencePools (when the CRD is served) that select these labels, and notes."""
        notes: list[str] = []
        svcs = await self._call(self.core.list_namespaced_service, namespace)
        pools: list[dict[str, Any]] = []
        for group, version in POOL_VERSIONS:
            try:
                data = await self._call(self._api("CustomObjectsApi").list_namespaced_custom_object, group, version, namespace, "inferencepools")
            except ClusterError as e:
                if e.status not in (404, None):
                    notes.append(f"cannot list InferencePools ({group}/{version}): {e.message}")
                continue
            pools.extend(data.get("items") or [])
        return routes_to(labels, svcs.get("items") or [], pools), notes

    async def budgets(self, namespace: str, labels: Mapping[str, str]) -> list[Budget]:
        try:
            data = await self._call(self._api("PolicyV1Api").list_namespaced_pod_disruption_budget, namespace)
        except ClusterError:
            return []
        return budgets_for(labels, data.get("items") or [])

    async def route_listing(self, namespace: str, pod: str) -> list[str]:
        """The EndpointSlices that still list the pod; [] once it is out of all of them (or gone)."""
        try:
            p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        except ClusterError as e:
            if e.status == 404:
                return []
            raise
        ip = (p.get("status") or {}).get("podIP")
        uid = (p.get("metadata") or {}).get("uid")
        data = await self._call(self._api("DiscoveryV1Api").list_namespaced_endpoint_slice, namespace)
        return endpoint_listing(data.get("items") or [], ip, uid)

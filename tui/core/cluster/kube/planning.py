"""The Kubernetes adapter's plans: each reads what it needs, then builds an `ActionPlan` that
says exactly what would change. Nothing is sent here.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Mapping

from ..plans import (
    DEFAULT_ROTATION_LABEL,
    bad_replicas,
    build_cordon_plan,
    build_delete_pod_plan,
    build_drain_plan,
    build_edit_plan,
    build_restart_plan,
    build_rollback_plan,
    build_scale_plan,
    build_uncordon_plan,
    grace_warnings,
    owner_of,
    pod_info,
    rotation_label,
)
from ..values import ActionPlan, ClusterError, EditArgsRequest, Target
from .transport import KubeTransport


class KubePlans(KubeTransport):
    """Reads, then the pure builders of `..plans`."""

    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        dep = await self._read_workload(req.namespace, req.name, req.kind)
        return build_edit_plan(dep, req, **self._flags())

    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        refused = bad_replicas(target, replicas, **self._flags())
        if refused is not None:
            return refused
        scale = await self._call(self._workload(kind)[2], name, namespace)
        spec = scale.get("spec") or {}
        cur = int(spec.get("replicas") or 0)
        rv = None if "replicas" in spec else str((scale.get("metadata") or {}).get("resourceVersion") or "") or None
        warnings = []
        if replicas > cur:
            warnings.append("each new replica needs free GPUs and loads the model for minutes; watch for Pending pods")
        if replicas == 0:
            warnings.append("0 replicas: the model stops serving")
        return build_scale_plan(target, cur, replicas, warnings, resource_version=rv, **self._flags())

    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        dep = await self._read_workload(namespace, name, kind)
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        return build_restart_plan(dep, kind, now, **self._flags())

    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        if kind != "Deployment":
            return ActionPlan("rollback", target, "roll back", errors=("roll back is supported for Deployments; edit the args instead",), **self._flags())
        dep = await self._read_workload(namespace, name, kind)
        rss = await self._replica_sets(dep)
        return build_rollback_plan(dep, rss, **self._flags())

    async def plan_delete_pod(self, namespace: str, pod: str, grace_s: int = 60) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        return build_delete_pod_plan(p, grace_s, **self._flags())

    async def _choose_label(self, namespace: str, pod: Mapping[str, Any], label: str | None) -> tuple[str, list[str]]:
        """The label that puts the pod in rotation (`plans.rotation_label`), from the configured
        one or the Services in the pod's namespace and its owner's selector."""
        if label or self.rotation_label:
            return str(label or self.rotation_label), []
        kind, owner = owner_of(pod)
        try:
            owner_selector: Mapping[str, str] = {}
            if kind == "Deployment" and owner:
                dep = await self._read_workload(namespace, owner, "Deployment")
                owner_selector = ((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            svcs = await self._call(self.core.list_namespaced_service, namespace)
        except ClusterError as e:
            return DEFAULT_ROTATION_LABEL, [f"cannot find the Service selecting this pod ({e.message}); using label {DEFAULT_ROTATION_LABEL!r}"]
        return rotation_label(pod, owner_selector, svcs.get("items") or [])

    async def plan_cordon(self, namespace: str, pod: str, *, undo: bool = False, label: str | None = None) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        if undo:
            return build_uncordon_plan(p, **self._flags())
        key, notes = await self._choose_label(namespace, p, label)
        return build_cordon_plan(p, key, self.drain_value, notes, **self._flags())

    async def plan_drain(self, namespace: str, pod: str, *, label: str | None = None, grace_s: int = 60) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        info = pod_info(p)
        target = Target("Pod", namespace, pod)
        warnings: list[str] = []
        errors: list[str] = []
        replicas = None
        owner = info.owner_name if info.owner_kind == "Deployment" else None
        if owner:
            try:
                replicas = (await self.get_deployment(namespace, owner)).replicas
            except ClusterError as e:
                errors.append(f"cannot read the owning Deployment {owner}: {e.message}")
        elif info.owner_kind:
            warnings.append(f"owned by a {info.owner_kind}: no spare is started, capacity drops by one while draining")
        key, notes = await self._choose_label(namespace, p, label)
        warnings.extend(notes)
        warnings.extend(grace_warnings(p, grace_s))
        if (p.get("metadata") or {}).get("labels", {}).get(key) == self.drain_value:
            errors.append(f"{pod} is already out of rotation ({key}={self.drain_value})")
        return build_drain_plan(target, owner, replicas, key, self.drain_value, grace_s, warnings, errors, **self._flags())

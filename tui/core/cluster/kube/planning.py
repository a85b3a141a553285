"""The Kubernetes adapter's plans: each reads what it needs, then builds an `ActionPlan` that
says exactly what would change. Nothing is sent here.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from typing import TYPE_CHECKING, Any, Mapping

from ..plans import (
    DEFAULT_ROTATION_LABEL,
    bad_replicas,
    build_cordon_plan,
    build_deletion_cost_plan,
    build_delete_pod_plan,
    build_drain_plan,
    build_evict_plan,
    build_edit_plan,
    build_restart_plan,
    build_rollback_plan,
    build_scale_plan,
    build_uncordon_plan,
    grace_warnings,
    pod_info,
)
from ..routes import LOWEST_DELETION_COST, choose_rotation
from ..values import ActionPlan, ClusterError, EditArgsRequest, Target
from .control import KubeControl
from .patchtest import applied


def _refuse(plan: ActionPlan, *why: str) -> ActionPlan:
    return dataclasses.replace(plan, errors=tuple(plan.errors) + tuple(why)) if why else plan


class KubePlans(KubeControl):
    if TYPE_CHECKING:  # KubeReads' (the two are combined in KubeCluster)
        async def _replica_sets(self, dep: Mapping[str, Any]) -> list[dict[str, Any]]: ...

    """Reads, then the pure builders of `..plans`."""

    async def _reverted_by(self, namespace: str, kind: str, obj: Mapping[str, Any], *, replicas: bool) -> list[str]:
        """Why a direct change to this workload would be undone: a controller above it that
        re-applies its spec, or (for a replica count) an HPA that scales it."""
        chain, hpas = await self.managed_by(namespace, kind, obj)
        out = [f"managed by {k}/{n}: change it there (it re-applies {kind.lower()}/{obj['metadata']['name']} on its next sync)" for k, n in chain[:1]]
        if replicas:
            for h in hpas:
                spec = h.get("spec") or {}
                out.append(
                    f"managed by HorizontalPodAutoscaler/{h['metadata']['name']} (minReplicas {spec.get('minReplicas', 1)}, maxReplicas "
                    f"{spec.get('maxReplicas')}): change it there (kubectl patch hpa {h['metadata']['name']} ...); it scales {kind.lower()}/{obj['metadata']['name']} back"
                )
        return out

    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        dep = await self._read_workload(req.namespace, req.name, req.kind)
        plan = build_edit_plan(dep, req, **self._flags())
        spec = dep.get("spec") or {}
        if plan.ok and req.kind == "StatefulSet" and spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady" \
                and (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate":
            # k8s docs, StatefulSet "Forced rollback": a pod broken by the new template is never replaced by a later fix
            note = ("OrderedReady StatefulSet: if a pod never becomes Ready with these args, the rollout stops there and a "
                    "corrected edit does not replace it; that pod must then be deleted by hand (rollout status names it)")
            plan = dataclasses.replace(plan, warnings=tuple(plan.warnings) + (note,))
        return _refuse(plan, *await self._reverted_by(req.namespace, req.kind, dep, replicas=False))

    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        refused = bad_replicas(target, replicas, **self._flags())
        if refused is not None:
            return refused
        scale = await self._call(self._workload(kind)[2], name, namespace)
        reverted = await self._reverted_by(namespace, kind, await self._read_workload(namespace, name, kind), replicas=True)
        spec = scale.get("spec") or {}
        cur = int(spec.get("replicas") or 0)
        rv = None if "replicas" in spec else str((scale.get("metadata") or {}).get("resourceVersion") or "") or None
        warnings = []
        if replicas > cur:
            warnings.append("each new replica needs free GPUs and loads the model for minutes; watch for Pending pods")
        if replicas == 0:
            warnings.append("0 replicas: the model stops serving")
        return _refuse(build_scale_plan(target, cur, replicas, warnings, resource_version=rv, **self._flags()), *reverted)

    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        dep = await self._read_workload(namespace, name, kind)
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        # kubectl rollout restart: "can't restart paused deployment (run rollout resume first)"
        paused = [f"{kind.lower()}/{name} is paused: resume it first (kubectl rollout resume); kubectl refuses to restart a paused Deployment"] if (dep.get("spec") or {}).get("paused") else []
        plan = build_restart_plan(dep, kind, now, **self._flags())
        return _refuse(plan, *paused, *await self._reverted_by(namespace, kind, dep, replicas=False))

    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        if kind != "Deployment":
            return ActionPlan("rollback", target, "roll back", errors=("roll back is supported for Deployments; edit the args instead",), **self._flags())
        dep = await self._read_workload(namespace, name, kind)
        if (dep.get("spec") or {}).get("paused"):
            # kubectl rollout undo: "you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume'"
            return ActionPlan("rollback", target, "roll back", errors=(f"deployment/{name} is paused: resume it first (kubectl rollout resume); kubectl refuses to roll back a paused Deployment",), **self._flags())
        rss = await self._replica_sets(dep)
        return _refuse(build_rollback_plan(dep, rss, **self._flags()), *await self._reverted_by(namespace, kind, dep, replicas=False))

    async def plan_delete_pod(self, namespace: str, pod: str, grace_s: int = 60) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        return build_delete_pod_plan(p, grace_s, **self._flags())

    async def _choose_label(self, namespace: str, pod: Mapping[str, Any], label: str | None) -> tuple[str, list[str]]:
        """The label that takes the pod out of every route while it stays with its controller
        (`routes.choose_rotation`); the configured one when set."""
        if label or self.rotation_label:
            return str(label or self.rotation_label), []
        labels = (pod.get("metadata") or {}).get("labels") or {}
        try:
            kind, ctl = await self.pod_controller(namespace, pod)
            routes, notes = await self.routes_for(namespace, labels)
        except ClusterError as e:
            return DEFAULT_ROTATION_LABEL, [f"cannot find the Service selecting this pod ({e.message}); using label {DEFAULT_ROTATION_LABEL!r}"]
        rot = choose_rotation(labels, routes, kind, ((ctl or {}).get("spec") or {}).get("selector"), self.drain_value)
        if rot.mechanism == "label" and rot.key:
            return rot.key, notes + list(rot.notes)
        # a cordon alone never detaches the pod: say that it stays in rotation
        why = rot.error or (rot.notes[0] if rot.notes else "")
        return DEFAULT_ROTATION_LABEL, notes + [f"{why}; using {DEFAULT_ROTATION_LABEL!r}, which no Service selects: the pod stays in rotation (use drain)"]

    async def plan_cordon(self, namespace: str, pod: str, *, undo: bool = False, label: str | None = None) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        if undo:
            return build_uncordon_plan(p, **self._flags())
        key, notes = await self._choose_label(namespace, p, label)
        return build_cordon_plan(p, key, self.drain_value, notes, **self._flags())

    async def plan_evict(self, namespace: str, pod: str, grace_s: int | None = None) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        return build_evict_plan(p, grace_s, **self._flags())

    async def plan_deletion_cost(self, namespace: str, pod: str, cost: int = LOWEST_DELETION_COST, *,
                                 after: Any = None) -> ActionPlan:
        """`after`: a JSON Patch sent before this step (the drain's cordon): plan on the pod as
        it will be then, so a dry run lists what the real run sends."""
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        if after:
            p = applied(p, after)
        return build_deletion_cost_plan(p, cost, **self._flags())

    async def plan_drain(self, namespace: str, pod: str, *, label: str | None = None, grace_s: int | None = None) -> ActionPlan:
        """Every route to the pod and how it leaves each, the PodDisruptionBudgets that cover it,
        the controllers that would undo a spare, and the mechanism that follows from them."""
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        info = pod_info(p)
        labels = (p.get("metadata") or {}).get("labels") or {}
        target = Target("Pod", namespace, pod)
        warnings: list[str] = []
        errors: list[str] = []
        kind, ctl = await self.pod_controller(namespace, p)
        selector = ((ctl or {}).get("spec") or {}).get("selector")
        if kind == "Deployment" and ctl is not None:
            # the ReplicaSet's selector is the Deployment's plus pod-template-hash (never changed by kvwatch)
            selector = dict(selector or {})
        try:
            routes, notes = await self.routes_for(namespace, labels)
        except ClusterError as e:
            routes, notes = [], [f"cannot list the Services in {namespace} ({e.message})"]
            errors.append(f"cannot find what routes to {pod}: {e.message}")
        warnings.extend(notes)
        rot = choose_rotation(labels, routes, kind if ctl is not None else (kind or None), selector, self.drain_value, label or self.rotation_label)
        key = rot.key or label or self.rotation_label or DEFAULT_ROTATION_LABEL
        if labels.get(key) == self.drain_value:
            errors.insert(0, f"{pod} is already out of rotation ({key}={self.drain_value})")
        warnings.extend(rot.notes)
        budgets = await self.budgets(namespace, labels)
        if len(budgets) > 1:
            # pkg/registry/core/pod/storage/eviction.go: more than one PDB -> the eviction fails (500)
            errors.append(f"{len(budgets)} PodDisruptionBudgets select {pod} ({', '.join(b.name for b in budgets)}): the Eviction API refuses such a pod")
        chain: list[tuple[str, str]] = []
        hpas: list[dict[str, Any]] = []
        if ctl is not None:
            chain, hpas = await self.managed_by(namespace, kind or "", ctl)
        owner = (ctl.get("metadata") or {}).get("name") if kind == "Deployment" and ctl else None
        replicas = int((ctl.get("spec") or {}).get("replicas", 1)) if owner and ctl else None
        spare = False
        if rot.mechanism == "refused":
            errors.append(rot.error)
            mechanism, why = "evict", ""
        elif rot.mechanism == "quarantine":
            mechanism, why = "quarantine", "no label change takes the pod out of rotation while it stays in its ReplicaSet"
            for b in budgets:
                if b.allowed <= 0:
                    errors.append(f"blocked by PDB {b.name}: {b.allowed} disruptions allowed; detaching the pod would bypass it")
        elif owner and not chain and not hpas:
            spare = True
            own = int((p.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            if grace_s is not None and grace_s != own:
                mechanism, why = "evict", f"a grace period of {grace_s}s was asked for (the pod's own is {own}s); only an eviction can set it"
            elif budgets:
                mechanism, why = "evict", f"{budgets[0].name} covers the pod, and only the Eviction API honours a PodDisruptionBudget"
            else:
                mechanism, why = "scale-down", "no PodDisruptionBudget covers the pod; the ReplicaSet removes exactly this pod, no replacement starts"
        else:
            mechanism = "evict"
            if chain:
                why = f"managed by {chain[0][0]}/{chain[0][1]}: a spare would be undone, so none is started; the controller replaces the evicted pod"
            elif hpas:
                why = f"managed by HorizontalPodAutoscaler/{hpas[0]['metadata']['name']}: it would scale a spare away, so none is started; the ReplicaSet replaces the evicted pod"
            elif info.owner_kind:
                why = f"owned by a {kind or info.owner_kind}: no spare; its controller replaces the evicted pod"
            else:
                why = "the pod has no owner: nothing will recreate it"
            if info.owner_kind:
                warnings.append(f"{why}; capacity drops by one while draining")
        if grace_s is None:
            grace_s_eff = int((p.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        else:
            grace_s_eff = grace_s
        warnings.extend(grace_warnings(p, grace_s_eff))
        return build_drain_plan(
            target, owner, replicas, key, self.drain_value, grace_s, warnings, errors,
            mechanism=mechanism, spare=spare, routes=[str(r) for r in routes], budgets=[str(b) for b in budgets], why=why, **self._flags(),
        )

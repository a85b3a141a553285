"""The Kubernetes adapter's plans: each reads what it needs, then builds an `ActionPlan` that
says exactly what would change. Nothing is sent here.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Mapping

from ..values import RESTARTED_AT_ANNOTATION, ActionPlan, ClusterError, EditArgsRequest, Target
from ..plans import (
    DEFAULT_ROTATION_LABEL,
    HASH_LABEL,
    ROTATION_ANNOTATION,
    build_edit_plan,
    build_rollback_plan,
    deployment_info,
    esc,
    grace_warnings,
    owner_of,
    pod_info,
)
from .transport import KubeTransport


class KubePlans(KubeTransport):
    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        dep = await self._read_workload(req.namespace, req.name, req.kind)
        return build_edit_plan(dep, req, **self._flags())

    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            return ActionPlan("scale", target, "scale", errors=(f"replicas must be a whole number >= 0, not {replicas!r}",), **self._flags())
        scale = await self._call(self._workload(kind)[2], name, namespace)
        cur = int((scale.get("spec") or {}).get("replicas") or 0)
        ops = [
            {"op": "test", "path": "/spec/replicas", "value": cur},
            {"op": "replace", "path": "/spec/replicas", "value": replicas},
        ]
        warnings = []
        if replicas > cur:
            warnings.append("each new replica needs free GPUs and loads the model for minutes; watch for Pending pods")
        if replicas == 0:
            warnings.append("0 replicas: the model stops serving")
        return ActionPlan(
            "scale",
            target,
            f"scale {target}: {cur} -> {replicas} replicas",
            diff=f"-replicas: {cur}\n+replicas: {replicas}",
            patch=ops,
            patch_type="json",
            subresource="scale",
            warnings=tuple(warnings),
            data={"from": cur, "to": replicas},
            **self._flags(),
        )

    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        dep = await self._read_workload(namespace, name, kind)
        info = deployment_info(dep, kind)
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}}}}
        old = ((dep.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations", {}).get(RESTARTED_AT_ANNOTATION)
        diff = (f"-{RESTARTED_AT_ANNOTATION}: {old}\n" if old else "") + f"+{RESTARTED_AT_ANNOTATION}: {now}"
        warnings = [f"restarts all {info.replicas} replicas one by one; each reloads the model (minutes)"]
        if info.strategy == "RollingUpdate":
            warnings.append("a RollingUpdate needs a free GPU for the surge pod; without one the rollout stalls")
        return ActionPlan(
            "restart",
            Target(kind, namespace, name),
            f"rollout restart {kind.lower()}/{name}",
            diff=diff,
            patch=patch,
            patch_type="merge",
            warnings=tuple(warnings),
            data={"restarted_at": now},
            **self._flags(),
        )

    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        if kind != "Deployment":
            return ActionPlan("rollback", target, "roll back", errors=("roll back is supported for Deployments; edit the args instead",), **self._flags())
        dep = await self._read_workload(namespace, name, kind)
        rss = await self._replica_sets(dep)
        return build_rollback_plan(dep, rss, **self._flags())

    async def plan_delete_pod(self, namespace: str, pod: str, grace_s: int = 60) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        uid = (p.get("metadata") or {}).get("uid")
        info = pod_info(p)
        warnings = []
        if info.owner_kind is None:
            warnings.append("the pod has no owner: nothing will recreate it")
        return ActionPlan(
            "delete-pod",
            Target("Pod", namespace, pod),
            f"delete pod/{pod} --grace-period={grace_s}",
            diff=f"-pod/{pod} (uid {uid})",
            patch={"gracePeriodSeconds": grace_s, "preconditions": {"uid": uid}},
            warnings=tuple(warnings),
            data={"uid": uid, "grace_s": grace_s},
            **self._flags(),
        )

    async def _choose_label(self, namespace: str, pod: Mapping[str, Any], label: str | None) -> tuple[str, list[str]]:
        """The label that puts the pod in rotation: configured, else one a Service selects on
        that the owner does not (changing an owner-selected label orphans the pod)."""
        notes: list[str] = []
        if label or self.rotation_label:
            return str(label or self.rotation_label), notes
        labels = (pod.get("metadata") or {}).get("labels") or {}
        owner_keys = {HASH_LABEL}
        kind, owner = owner_of(pod)
        try:
            if kind == "Deployment" and owner:
                dep = await self._read_workload(namespace, owner, "Deployment")
                owner_keys |= set((((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}))
            svcs = await self._call(self.core.list_namespaced_service, namespace)
        except ClusterError as e:
            notes.append(f"cannot find the Service selecting this pod ({e.message}); using label {DEFAULT_ROTATION_LABEL!r}")
            return DEFAULT_ROTATION_LABEL, notes
        shared: list[str] = []
        for s in svcs.get("items") or []:
            selector = (s.get("spec") or {}).get("selector") or {}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                free = [k for k in selector if k not in owner_keys]
                if free:
                    notes.append(f"Service {s['metadata']['name']} selects {free[0]}={selector[free[0]]}")
                    return free[0], notes
                shared.extend(selector)
        if shared:
            notes.append(
                f"the Service selects only on labels the {kind} also selects ({', '.join(sorted(set(shared)))}); "
                f"using {DEFAULT_ROTATION_LABEL!r}, which no Service selects: configure a rotation label"
            )
        else:
            notes.append(f"no Service selects this pod; using label {DEFAULT_ROTATION_LABEL!r} (for an external router)")
        return DEFAULT_ROTATION_LABEL, notes

    async def plan_cordon(self, namespace: str, pod: str, *, undo: bool = False, label: str | None = None) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        meta = p.get("metadata") or {}
        labels = meta.get("labels") or {}
        ann = meta.get("annotations") or {}
        target = Target("Pod", namespace, pod)
        flags = self._flags()
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
        if undo:
            saved = ann.get(ROTATION_ANNOTATION)
            if not saved:
                return ActionPlan("cordon", target, f"put {pod} back in rotation", errors=("the pod was not taken out of rotation by kvwatch",), **flags)
            try:
                rec = json.loads(saved)
                key, old = rec["label"], rec.get("value")
            except (ValueError, KeyError, TypeError):
                return ActionPlan("cordon", target, "uncordon", errors=(f"unreadable {ROTATION_ANNOTATION} annotation",), **flags)
            path = f"/metadata/labels/{esc(key)}"
            if key in labels:
                ops.append({"op": "test", "path": path, "value": labels[key]})
            ops.append({"op": "replace" if key in labels else "add", "path": path, "value": old} if old is not None else {"op": "remove", "path": path})
            ops.append({"op": "remove", "path": f"/metadata/annotations/{esc(ROTATION_ANNOTATION)}"})
            return ActionPlan(
                "cordon",
                target,
                f"label pod/{pod} {key}={old} (back in rotation)",
                diff=f"-{key}: {labels.get(key)}\n" + (f"+{key}: {old}" if old is not None else ""),
                patch=ops,
                patch_type="json",
                data={"label": key, "value": old, "undo": True},
                **flags,
            )
        key, notes = await self._choose_label(namespace, p, label)
        old = labels.get(key)
        if old == self.drain_value:
            return ActionPlan("cordon", target, "cordon", errors=(f"{pod} is already out of rotation ({key}={old})",), **flags)
        path = f"/metadata/labels/{esc(key)}"
        if not labels:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        if old is not None:
            ops.append({"op": "test", "path": path, "value": old})
        ops.append({"op": "replace" if old is not None else "add", "path": path, "value": self.drain_value})
        record = json.dumps({"label": key, "value": old}, separators=(",", ":"))
        if not ann:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {ROTATION_ANNOTATION: record}})
        else:
            ops.append({"op": "add", "path": f"/metadata/annotations/{esc(ROTATION_ANNOTATION)}", "value": record})
        return ActionPlan(
            "cordon",
            target,
            f"label pod/{pod} {key}={self.drain_value} (out of rotation)",
            diff=(f"-{key}: {old}\n" if old is not None else "") + f"+{key}: {self.drain_value}",
            patch=ops,
            patch_type="json",
            warnings=tuple(notes),
            data={"label": key, "value": old, "undo": False},
            **flags,
        )

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
        steps = []
        if owner and replicas is not None:
            steps.append(f"1. scale deployment/{owner} {replicas} -> {replicas + 1}; wait until the spare is ready")
        steps += [
            f"2. label pod/{pod} {key}={self.drain_value} (out of rotation)",
            "3. wait until its running + waiting reaches 0",
            f"4. delete pod/{pod} --grace-period={grace_s}",
        ]
        if owner and replicas is not None:
            steps.append(f"then: restore deployment/{owner} to {replicas} replicas (restore key)")
        return ActionPlan(
            "drain",
            target,
            f"drain pod/{pod}",
            diff="\n".join(steps),
            warnings=tuple(warnings),
            errors=tuple(errors),
            data={"owner": owner, "replicas": replicas, "label": key, "grace_s": grace_s},
            **self._flags(),
        )

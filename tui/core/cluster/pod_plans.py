"""Pure plan builders for one pod: delete, cordon / uncordon (out of rotation and back), evict,
pod-deletion-cost, and the drain's step list. Dicts in, `ActionPlan`s out, as in `plans`
(which re-exports these).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from . import args as A
from .convert import (
    DEFAULT_ROTATION_LABEL,
    HASH_LABEL,
    ROTATION_ANNOTATION,
    containers_of,
    esc,
    owner_of,
    pod_info,
    prestop_sleep_s,
    vllm_index,
)
from .routes import DELETION_COST
from .values import (
    ActionPlan,
    Target,
)


def grace_warnings(pod: Mapping[str, Any], grace_s: int) -> list[str]:
    """In-flight requests are cut when the grace period is shorter than vLLM's shutdown timeout
    plus any preStop sleep."""
    spec = pod.get("spec") or {}
    cs = containers_of(spec)
    vi = vllm_index(cs)
    if vi is None:
        return []
    cmd = A.parse_container(cs[vi])
    shutdown = int(cmd.value("shutdown-timeout") or 0)
    pre = prestop_sleep_s(cs[vi])
    need = shutdown + pre
    tgps = int(spec.get("terminationGracePeriodSeconds", 30) if spec.get("terminationGracePeriodSeconds") is not None else 30)
    out = []
    for what, g in (("the pod's terminationGracePeriodSeconds", tgps), ("the delete grace period", grace_s)):
        if g < need:
            out.append(
                f"{what} ({g}s) is shorter than vLLM's --shutdown-timeout ({shutdown}s) + preStop sleep ({pre}s): "
                "in-flight requests would be cut"
            )
    if shutdown == 0:
        out.append("--shutdown-timeout is 0: vLLM aborts in-flight requests on SIGTERM, so the drain waits for 0 first")
    return out


def build_delete_pod_plan(pod: Mapping[str, Any], grace_s: int, **flags: Any) -> ActionPlan:
    """Delete `pod` with a grace period, guarded by its uid (a recreated namesake is not hit)."""
    meta = pod.get("metadata") or {}
    ns, name, uid = str(meta.get("namespace") or ""), str(meta.get("name") or ""), meta.get("uid")
    warnings = []
    if pod_info(pod).owner_kind is None:
        warnings.append("the pod has no owner: nothing will recreate it")
    return ActionPlan(
        "delete-pod",
        Target("Pod", ns, name),
        f"delete pod/{name} --grace-period={grace_s}",
        diff=f"-pod/{name} (uid {uid})",
        patch={"gracePeriodSeconds": grace_s, "preconditions": {"uid": uid}},
        warnings=tuple(warnings),
        data={"uid": uid, "grace_s": grace_s},
        **flags,
    )


def rotation_label(pod: Mapping[str, Any], owner_selector: Mapping[str, str], services: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """The label that takes `pod` out of rotation when changed, and notes on how it was chosen:
    one a Service selects on that the owner does not (changing an owner-selected label orphans
    the pod), else `DEFAULT_ROTATION_LABEL`, which no Service selects (for an external router)."""
    notes: list[str] = []
    labels = (pod.get("metadata") or {}).get("labels") or {}
    kind, _ = owner_of(pod)
    owner_keys = {HASH_LABEL} | set(owner_selector)
    shared: list[str] = []
    for s in services:
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


def _pod_parts(pod: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, str], Mapping[str, str], Target]:
    """A pod's metadata, labels, annotations, and itself as a plan target."""
    meta = pod.get("metadata") or {}
    target = Target("Pod", str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    return meta, meta.get("labels") or {}, meta.get("annotations") or {}, target


def build_cordon_plan(pod: Mapping[str, Any], key: str, drain_value: str, notes: Sequence[str] = (), **flags: Any) -> ActionPlan:
    """Out of rotation: label `key` set to `drain_value`, the old value kept in an annotation so
    `build_uncordon_plan` can put it back."""
    meta, labels, ann, target = _pod_parts(pod)
    name = target.name
    old = labels.get(key)
    if old == drain_value:
        return ActionPlan("cordon", target, "cordon", errors=(f"{name} is already out of rotation ({key}={old})",), **flags)
    path = f"/metadata/labels/{esc(key)}"
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
    if not labels:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
    if old is not None:
        ops.append({"op": "test", "path": path, "value": old})
    ops.append({"op": "replace" if old is not None else "add", "path": path, "value": drain_value})
    record = json.dumps({"label": key, "value": old}, separators=(",", ":"))
    if not ann:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {ROTATION_ANNOTATION: record}})
    else:
        ops.append({"op": "add", "path": f"/metadata/annotations/{esc(ROTATION_ANNOTATION)}", "value": record})
    return ActionPlan(
        "cordon",
        target,
        f"label pod/{name} {key}={drain_value} (out of rotation)",
        diff=(f"-{key}: {old}\n" if old is not None else "") + f"+{key}: {drain_value}",
        patch=ops,
        patch_type="json",
        warnings=tuple(notes),
        data={"label": key, "value": old, "undo": False},
        **flags,
    )


def build_uncordon_plan(pod: Mapping[str, Any], **flags: Any) -> ActionPlan:
    """Back in rotation: the label kvwatch changed restored from its annotation."""
    meta, labels, ann, target = _pod_parts(pod)
    name = target.name
    saved = ann.get(ROTATION_ANNOTATION)
    if not saved:
        return ActionPlan("cordon", target, f"put {name} back in rotation", errors=("the pod was not taken out of rotation by kvwatch",), **flags)
    try:
        rec = json.loads(saved)
        key, old = rec["label"], rec.get("value")
    except (ValueError, KeyError, TypeError):
        return ActionPlan("cordon", target, "uncordon", errors=(f"unreadable {ROTATION_ANNOTATION} annotation",), **flags)
    path = f"/metadata/labels/{esc(key)}"
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
    if key in labels:
        ops.append({"op": "test", "path": path, "value": labels[key]})
    ops.append({"op": "replace" if key in labels else "add", "path": path, "value": old} if old is not None else {"op": "remove", "path": path})
    ops.append({"op": "remove", "path": f"/metadata/annotations/{esc(ROTATION_ANNOTATION)}"})
    return ActionPlan(
        "cordon",
        target,
        f"label pod/{name} {key}={old} (back in rotation)",
        diff=f"-{key}: {labels.get(key)}\n" + (f"+{key}: {old}" if old is not None else ""),
        patch=ops,
        patch_type="json",
        data={"label": key, "value": old, "undo": True},
        **flags,
    )


def build_drain_plan(
    target: Target,
    owner: str | None,
    replicas: int | None,
    key: str,
    drain_value: str,
    grace_s: int | None,
    warnings: Sequence[str] = (),
    errors: Sequence[str] = (),
    *,
    mechanism: str = "delete",
    spare: bool | None = None,
    routes: Sequence[str] = (),
    budgets: Sequence[str] = (),
    why: str = "",
    **flags: Any,
) -> ActionPlan:
    """The drain's plan: its steps as the diff, and what `drain.drain` needs as data.

    `mechanism` says how the pod leaves: "scale-down" (pod-deletion-cost, then the Deployment
    back to its count: the ReplicaSet removes exactly this pod), "evict" (the Eviction API, so a
    PodDisruptionBudget is honoured), "quarantine" (detached from its ReplicaSet on purpose, then
    evicted once idle) or "delete" (a cluster without the Eviction API: the simulator). A spare
    is started first only when the owning Deployment (`owner`) and its `replicas` are known."""
    pod = target.name
    spare = (bool(owner) and replicas is not None) if spare is None else spare
    if spare and replicas is None:
        raise ValueError("a spare needs the owner's replica count")
    count = replicas if replicas is not None else 0  # the owner's replicas (read only with a spare or a scale-down)
    grace = f"--grace-period={grace_s}" if grace_s is not None else "(the pod's own terminationGracePeriodSeconds)"
    if mechanism == "delete":  # the simulator's drain: spare, label, idle, delete, restore
        lines = [f"1. scale deployment/{owner} {count} -> {count + 1}; wait until the spare is ready"] if spare else []
        lines += [f"2. label pod/{pod} {key}={drain_value} (out of rotation)", "3. wait until its running + waiting reaches 0", f"4. delete pod/{pod} {grace}"]
        if spare:
            lines.append(f"then: restore deployment/{owner} to {replicas} replicas (restore key)")
    else:
        lines = [f"routes: {', '.join(routes) if routes else 'none found (an external router)'}"]
        lines += [f"budget: {b}" for b in budgets]
        if why:
            lines.append(f"mechanism: {mechanism}: {why}")
        steps = [f"scale deployment/{owner} {count} -> {count + 1}; wait until one more pod is ready"] if spare else []
        detach = " AND detached: the ReplicaSet starts its replacement" if mechanism == "quarantine" else ""
        steps += [
            f"label pod/{pod} {key}={drain_value} (out of rotation{detach})",
            "wait until no EndpointSlice lists the pod's IP",
            "wait until its running + waiting reaches 0 (scrapes taken after that only)",
        ]
        if mechanism == "scale-down":
            steps.append(f"annotate pod/{pod} {DELETION_COST}=-2147483648")
            steps.append(f"scale deployment/{owner} {count + 1 if spare else count} -> {count}: the ReplicaSet removes exactly pod/{pod} {grace}")
        else:
            steps.append(f"evict pod/{pod} (policy/v1 Eviction; PodDisruptionBudgets honoured) {grace}")
            if spare:
                steps.append(f"scale deployment/{owner} {count + 1} -> {count} (removes the replacement the ReplicaSet starts)")
        lines += [f"{i}. {s}" for i, s in enumerate(steps, 1)]
    diff = "\n".join(lines)
    return ActionPlan(
        "drain",
        target,
        f"drain pod/{pod}",
        diff=diff,
        warnings=tuple(warnings),
        errors=tuple(errors),
        data={"owner": owner, "replicas": replicas, "label": key,
              "grace_s": grace_s, "mechanism": mechanism, "spare": spare, "routes": list(routes), "budgets": list(budgets)},
        **flags,
    )


def build_evict_plan(pod: Mapping[str, Any], grace_s: int | None, **flags: Any) -> ActionPlan:
    """POST pods/NAME/eviction (policy/v1), guarded by the pod's uid; the grace period is the
    pod's own unless one is given."""
    meta = pod.get("metadata") or {}
    ns, name, uid = str(meta.get("namespace") or ""), str(meta.get("name") or ""), meta.get("uid")
    opts: dict[str, Any] = {"preconditions": {"uid": uid}}
    if grace_s is not None:
        opts["gracePeriodSeconds"] = grace_s
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}, "deleteOptions": opts}
    own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
    return ActionPlan(
        "evict",
        Target("Pod", ns, name),
        f"evict pod/{name} (grace period {grace_s if grace_s is not None else own}s)",
        diff=f"-pod/{name} (uid {uid})",
        patch=body,
        data={"uid": uid, "grace_s": grace_s if grace_s is not None else own},
        **flags,
    )


def build_deletion_cost_plan(pod: Mapping[str, Any], cost: int, **flags: Any) -> ActionPlan:
    """Annotate the pod with controller.kubernetes.io/pod-deletion-cost so a ReplicaSet
    scale-down removes it first (k8s >= 1.22)."""
    meta, _, ann, target = _pod_parts(pod)
    path = f"/metadata/annotations/{esc(DELETION_COST)}"
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
    if not ann:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {DELETION_COST: str(cost)}})
    else:
        ops.append({"op": "add", "path": path, "value": str(cost)})
    return ActionPlan(
        "deletion-cost",
        target,
        f"annotate pod/{target.name} {DELETION_COST}={cost}",
        diff=(f"-{DELETION_COST}: {ann[DELETION_COST]}\n" if DELETION_COST in ann else "") + f"+{DELETION_COST}: {cost}",
        patch=ops,
        patch_type="json",
        data={"cost": cost},
        **flags,
    )

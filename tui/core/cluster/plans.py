"""Pure plan builders: API objects (dicts) and facts in, `ActionPlan`s and statuses out.

No client, no I/O: the adapters read, then call these (`kube.KubeCluster` with what the API
server returns, `sim.SimCluster` with synthetic objects of the same shape), and tests call them
with literal dicts. The API-object conversions live in `convert`, re-exported here.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Sequence

from . import args as A
from .convert import (  # noqa: F401 - re-exported: callers import these from `plans`
    DEFAULT_ROTATION_LABEL,
    GPU_RESOURCES,
    HASH_LABEL,
    ROTATION_ANNOTATION,
    conditions_of,
    container_spec,
    containers_of,
    deployment_info,
    esc,
    metrics_port,
    owner_of,
    pending_reason,
    pod_info,
    pod_ref,
    prestop_sleep_s,
    selector_string,
    ts,
    vllm_index,
)
from .routes import DELETION_COST
from .values import (
    CHANGE_CAUSE_ANNOTATION,
    PREVIOUS_ARGS_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    REVISION_ANNOTATION,
    ActionPlan,
    DeploymentInfo,
    EditArgsRequest,
    ReplicaSetInfo,
    RolloutStatus,
    Target,
)


# --------------------------------------------------------------------------------------------
# Plan builders shared with tests (pure: dicts in, plans out)


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


def build_edit_plan(
    dep: Mapping[str, Any],
    req: EditArgsRequest,
    *,
    requires_typed_name: bool = False,
    readonly: bool = False,
    context: str = "",
) -> ActionPlan:
    """The args edit `req` asks for, against the workload `dep` as the API server returned it
    (its kind is `req.kind`; its namespace and name come from `dep`)."""
    kind, container, changes = req.kind, req.container, req.changes
    meta = dep.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    target = Target(kind, ns, name)
    flags = {"requires_typed_name": requires_typed_name, "readonly": readonly, "context": context}
    containers = containers_of(((dep.get("spec") or {}).get("template") or {}).get("spec") or {})
    idx = vllm_index(containers, container)
    if idx is None:
        what = f"container {container!r}" if container else "a vLLM container"
        return ActionPlan("edit", target, "edit engine args", errors=(f"{target} has no {what}",), **flags)
    c = containers[idx]
    try:
        cmd = A.parse_container(c, req.generation)
    except A.ArgError as e:
        return ActionPlan("edit", target, "edit engine args", errors=(str(e),), **flags)
    observed = dict(req.observed or {})
    if req.cache_config:
        observed = {**A.observed_from_cache_config(req.cache_config), **observed}
    raw = dict(changes)
    if req.preset:
        try:
            raw = {**A.preset(cmd, req.preset, observed), **raw}
        except A.ArgError as e:
            return ActionPlan("edit", target, "edit engine args", errors=(str(e),), **flags)
    v = A.validate(cmd, raw, observed)
    errors = [f"--{k}: {m}" if not m.startswith("--") else m for k, m in v.errors.items()]
    warnings = list(cmd.warnings) + list(v.warnings)
    if not v.changes and not errors:
        errors.append("nothing to change: the new values equal the current ones")
    if errors:
        return ActionPlan("edit", target, "edit engine args", errors=tuple(errors), warnings=tuple(warnings), **flags)
    try:
        rw = A.rewrite_container(c, cmd, v.changes)
    except A.ArgError as e:
        return ActionPlan("edit", target, "edit engine args", errors=(str(e),), **flags)
    warnings.extend(rw.notes)
    pf = A.kv_preflight(cmd, v.changes, req.cache_config, req.gpu_total_bytes, req.kv_bytes_token)
    if pf.status in ("fail", "warn"):
        warnings.extend(pf.messages)
    base = f"/spec/template/spec/containers/{idx}"
    ops: list[dict[str, Any]] = [{"op": "test", "path": f"{base}/name", "value": c.get("name")}]
    needs_rv = False
    for fld in rw.fields:
        new_val = rw.container.get(fld)
        if fld == "env":
            old_env = c.get("env") or []
            for j, (o, n) in enumerate(zip(old_env, new_val)):
                if o != n:
                    ops.append({"op": "test", "path": f"{base}/env/{j}/name", "value": o.get("name")})
                    ops.append({"op": "test", "path": f"{base}/env/{j}/value", "value": o.get("value")})
                    ops.append({"op": "replace", "path": f"{base}/env/{j}/value", "value": n.get("value")})
            continue
        if c.get(fld) is not None:
            ops.append({"op": "test", "path": f"{base}/{fld}", "value": c.get(fld)})
            ops.append({"op": "replace", "path": f"{base}/{fld}", "value": new_val})
        else:
            needs_rv = True
            ops.append({"op": "add", "path": f"{base}/{fld}", "value": new_val})
    if needs_rv:
        ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")})
    cause = "kvwatch: " + ", ".join(
        f"--{k} {cmd.values[k].display()} -> {A.format_value(val)}" for k, val in v.changes.items()
    )
    ann = meta.get("annotations") or {}
    new_ann = {PREVIOUS_ARGS_ANNOTATION: A.previous_args_annotation(c), CHANGE_CAUSE_ANNOTATION: cause}
    if not ann:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": new_ann})
    else:
        for k, val in new_ann.items():
            ops.append({"op": "add", "path": f"/metadata/annotations/{esc(k)}", "value": val})
    diff = A.args_diff(c, rw.container, f"{kind.lower()}/{name}/{c.get('name')}")
    summary = f"edit {target}: " + ", ".join(f"--{k} {A.format_value(val)}" for k, val in v.changes.items())
    return ActionPlan(
        "edit",
        target,
        summary,
        diff=diff,
        patch=ops,
        patch_type="json",
        warnings=tuple(dict.fromkeys(warnings)),
        preflight=pf,
        data={"container": c.get("name"), "index": idx, "changes": dict(v.changes), "resourceVersion": meta.get("resourceVersion")},
        **flags,
    )


def build_rollback_plan(
    dep: Mapping[str, Any],
    rss: list[Mapping[str, Any]],
    *,
    requires_typed_name: bool = False,
    readonly: bool = False,
    context: str = "",
) -> ActionPlan:
    """kubectl rollout undo, client side: the previous ReplicaSet's template patched back."""
    meta = dep.get("metadata") or {}
    target = Target("Deployment", str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    flags = {"requires_typed_name": requires_typed_name, "readonly": readonly, "context": context}
    template = (dep.get("spec") or {}).get("template") or {}
    ann = meta.get("annotations") or {}
    cur_rev = int(ann.get(REVISION_ANNOTATION, 0) or 0)

    def rev(rs: Mapping[str, Any]) -> int:
        return int(((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION_ANNOTATION, 0) or 0)

    if not cur_rev and rss:
        cur_rev = max(rev(r) for r in rss)
    older = [r for r in rss if rev(r) < cur_rev]
    if not older:
        return ActionPlan("rollback", target, "roll back", errors=(f"{target} has no revision before {cur_rev}",), **flags)
    prev = max(older, key=rev)
    prev_t = copy.deepcopy((prev.get("spec") or {}).get("template") or {})
    ((prev_t.get("metadata") or {}).get("labels") or {}).pop(HASH_LABEL, None)
    if prev_t == template:
        return ActionPlan("rollback", target, "roll back", errors=(f"revision {rev(prev)} has the same pod template as the current one",), **flags)
    cur_c = containers_of(template.get("spec") or {})
    prev_c = containers_of(prev_t.get("spec") or {})
    ci = vllm_index(cur_c)
    pi = vllm_index(prev_c, cur_c[ci].get("name") if ci is not None else None)
    diff = ""
    warnings: list[str] = []
    if ci is not None and pi is not None:
        diff = A.args_diff(cur_c[ci], prev_c[pi], f"deployment/{target.name}/{cur_c[ci].get('name')}")
        for k in ("image", "resources"):
            if cur_c[ci].get(k) != prev_c[pi].get(k):
                warnings.append(f"the roll back also changes the container's {k}")
    if not diff:
        diff = "(the vLLM args are the same; other parts of the pod template differ)"
    prev_cause = ((prev.get("metadata") or {}).get("annotations") or {}).get(CHANGE_CAUSE_ANNOTATION)
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/spec/template", "value": template},
        {"op": "replace", "path": "/spec/template", "value": prev_t},
    ]
    if ci is not None:
        record = A.previous_args_annotation(cur_c[ci])
        if ann:
            ops.append({"op": "add", "path": f"/metadata/annotations/{esc(PREVIOUS_ARGS_ANNOTATION)}", "value": record})
        else:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {PREVIOUS_ARGS_ANNOTATION: record}})
            ann = {PREVIOUS_ARGS_ANNOTATION: record}
    if prev_cause:
        ops.append({"op": "add", "path": f"/metadata/annotations/{esc(CHANGE_CAUSE_ANNOTATION)}", "value": prev_cause})
    elif CHANGE_CAUSE_ANNOTATION in ann:
        ops.append({"op": "remove", "path": f"/metadata/annotations/{esc(CHANGE_CAUSE_ANNOTATION)}"})
    return ActionPlan(
        "rollback",
        target,
        f"roll back {target}: revision {cur_rev} -> {rev(prev)}",
        diff=diff,
        patch=ops,
        patch_type="json",
        warnings=tuple(warnings),
        data={"from_revision": cur_rev, "to_revision": rev(prev), "replicaset": prev["metadata"]["name"]},
        **flags,
    )


def bad_replicas(target: Target, replicas: Any, **flags: Any) -> ActionPlan | None:
    """The refused plan for a replica count that is not a whole number >= 0, else None."""
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return ActionPlan("scale", target, "scale", errors=(f"replicas must be a whole number >= 0, not {replicas!r}",), **flags)
    return None


def build_scale_plan(
    target: Target, current: int, replicas: int, warnings: Sequence[str] = (), *, resource_version: str | None = None, **flags: Any
) -> ActionPlan:
    """Scale `target` from `current` to `replicas` through the scale subresource, guarded by a
    test of the count read; with `resource_version` (the Scale read had no replicas) by a test
    of that instead."""
    # k8s.io/api autoscaling/v1 ScaleSpec: Replicas int32 `json:"replicas,omitempty"`: 0 is omitted, so a test of
    # /spec/replicas == 0 always fails (evanphx/json-patch: "testing value /spec/replicas failed")
    if resource_version:  # "add" sets a member that is absent; "replace" would fail on it
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}, {"op": "add", "path": "/spec/replicas", "value": replicas}]
    else:
        ops = [{"op": "test", "path": "/spec/replicas", "value": current}, {"op": "replace", "path": "/spec/replicas", "value": replicas}]
    return ActionPlan(
        "scale",
        target,
        f"scale {target}: {current} -> {replicas} replicas",
        diff=f"-replicas: {current}\n+replicas: {replicas}",
        patch=ops,
        patch_type="json",
        subresource="scale",
        warnings=tuple(warnings),
        data={"from": current, "to": replicas},
        **flags,
    )


def build_restart_plan(dep: Mapping[str, Any], kind: str, now: str, **flags: Any) -> ActionPlan:
    """kubectl rollout restart: the pod template's restartedAt annotation set to `now` (ISO)."""
    meta = dep.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    info = deployment_info(dep, kind)
    patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}}}}
    old = ((dep.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations", {}).get(RESTARTED_AT_ANNOTATION)
    diff = (f"-{RESTARTED_AT_ANNOTATION}: {old}\n" if old else "") + f"+{RESTARTED_AT_ANNOTATION}: {now}"
    warnings = [f"restarts all {info.replicas} replicas one by one; each reloads the model (minutes)"]
    if info.strategy == "RollingUpdate":
        warnings.append("a RollingUpdate needs a free GPU for the surge pod; without one the rollout stalls")
    return ActionPlan(
        "restart",
        Target(kind, ns, name),
        f"rollout restart {kind.lower()}/{name}",
        diff=diff,
        patch=patch,
        patch_type="merge",
        warnings=tuple(warnings),
        data={"restarted_at": now},
        **flags,
    )


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
    grace = f"--grace-period={grace_s}" if grace_s is not None else "(the pod's own terminationGracePeriodSeconds)"
    if mechanism == "delete":  # the simulator's drain: spare, label, idle, delete, restore
        lines = [f"1. scale deployment/{owner} {replicas} -> {replicas + 1}; wait until the spare is ready"] if spare else []
        lines += [f"2. label pod/{pod} {key}={drain_value} (out of rotation)", "3. wait until its running + waiting reaches 0", f"4. delete pod/{pod} {grace}"]
        if spare:
            lines.append(f"then: restore deployment/{owner} to {replicas} replicas (restore key)")
    else:
        lines = [f"routes: {', '.join(routes) if routes else 'none found (an external router)'}"]
        lines += [f"budget: {b}" for b in budgets]
        if why:
            lines.append(f"mechanism: {mechanism}: {why}")
        steps = [f"scale deployment/{owner} {replicas} -> {replicas + 1}; wait until one more pod is ready"] if spare else []
        detach = " AND detached: the ReplicaSet starts its replacement" if mechanism == "quarantine" else ""
        steps += [
            f"label pod/{pod} {key}={drain_value} (out of rotation{detach})",
            "wait until no EndpointSlice lists the pod's IP",
            "wait until its running + waiting reaches 0 (scrapes taken after that only)",
        ]
        if mechanism == "scale-down":
            steps.append(f"annotate pod/{pod} {DELETION_COST}=-2147483648")
            steps.append(f"scale deployment/{owner} {replicas + 1 if spare else replicas} -> {replicas}: the ReplicaSet removes exactly pod/{pod} {grace}")
        else:
            steps.append(f"evict pod/{pod} (policy/v1 Eviction; PodDisruptionBudgets honoured) {grace}")
            if spare:
                steps.append(f"scale deployment/{owner} {replicas + 1} -> {replicas} (removes the replacement the ReplicaSet starts)")
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


def compute_rollout(
    info: DeploymentInfo,
    new_rs: ReplicaSetInfo | None,
    old_rs: tuple[ReplicaSetInfo, ...],
    pods: list[Mapping[str, Any]],
    now: float,
) -> RolloutStatus:
    """kubectl rollout status' logic (kubectl/pkg/polymorphichelpers/rollout_status.go
    DeploymentStatusViewer), plus what it does not say: Pending pods waiting for GPUs (a
    RollingUpdate with no spare GPU deadlocks) and new pods crash-looping now."""
    cond = {c.type: c for c in info.conditions}
    prog = cond.get("Progressing")
    elapsed = (now - new_rs.created) if new_rs and new_rs.created else None

    def out(state: str, reason: str) -> RolloutStatus:
        return RolloutStatus(
            state, reason, info.replicas, info.updated, info.ready, info.available, info.current,
            info.generation, info.observed_generation, new_rs, old_rs, elapsed, info.conditions,
        )

    new_pods = new_rs.pods if new_rs else ()
    # a restart count is history, not state: a new pod that restarted and is Ready now has recovered
    crashing = [p for p in new_pods if p.phase in ("CrashLoopBackOff", "Error") and not p.ready]
    pending = [pending_reason(p) for p in pods]
    pending = [p for p in pending if p]
    if info.generation > info.observed_generation:
        return out("progressing", "waiting for the Deployment spec update to be observed")
    if prog is not None and prog.reason == "ProgressDeadlineExceeded":
        if crashing:
            return out("failed", f"progress deadline exceeded; {crashing[0].name} is {crashing[0].phase} ({crashing[0].restarts} restarts)")
        if pending:
            return out("stuck", f"progress deadline exceeded; pods cannot be scheduled: {pending[0]}")
        return out("stuck", f"progress deadline exceeded: {prog.message or 'no progress'}")
    rf = cond.get("ReplicaFailure")
    if rf is not None and rf.status == "True":
        return out("failed", f"replica failure: {rf.message or rf.reason}")
    if crashing:
        return out("failed", f"{crashing[0].name} is {crashing[0].phase} ({crashing[0].restarts} restarts): check its logs (--previous)")
    if info.updated < info.replicas:
        if pending:
            return out("stuck", f"{info.updated}/{info.replicas} updated; waiting for GPUs: {pending[0]}")
        return out("progressing", f"{info.updated} of {info.replicas} new replicas updated")
    if info.current > info.updated:
        return out("progressing", f"{info.current - info.updated} old replicas pending termination")
    if info.available < info.updated:
        if pending:
            return out("stuck", f"{info.available}/{info.updated} available; waiting for GPUs: {pending[0]}")
        return out("progressing", f"{info.available} of {info.updated} updated replicas available (model loading)")
    return out("done", f"successfully rolled out: {info.available}/{info.replicas} available")

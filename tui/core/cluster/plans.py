"""Pure plan builders: API objects (dicts) and facts in, `ActionPlan`s and statuses out.

No client, no I/O: the adapters read, then call these (`kube.KubeCluster` with what the API
server returns, `sim.SimCluster` with synthetic objects of the same shape), and tests call them
with literal dicts. The API-object conversions live in `convert`, the one-pod plans (cordon,
evict, deletion cost, the drain's steps) in `pod_plans`; both are re-exported here.
"""

from __future__ import annotations

import copy
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
from .pod_plans import (  # noqa: F401 - re-exported: callers import these from `plans`
    build_cordon_plan,
    build_delete_pod_plan,
    build_deletion_cost_plan,
    build_drain_plan,
    build_evict_plan,
    build_uncordon_plan,
    grace_warnings,
    rotation_label,
)
from .values import (
    CHANGE_CAUSE_ANNOTATION,
    PlanFlags,
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
    flags: PlanFlags = {"requires_typed_name": requires_typed_name, "readonly": readonly, "context": context}
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
    pf = A.kv_preflight(cmd, v.changes, req.cache_config, req.gpu_total_bytes, req.kv_bytes_token,
                        fits=req.fits_max_num_seqs, fits_why=req.fits_why)
    if pf.status in ("fail", "warn"):
        warnings.extend(pf.messages)
    base = f"/spec/template/spec/containers/{idx}"
    ops: list[dict[str, Any]] = [{"op": "test", "path": f"{base}/name", "value": c.get("name")}]
    needs_rv = False
    for fld in rw.fields:
        new_val = rw.container.get(fld)
        if fld == "env":
            old_env = c.get("env") or []
            for j, (o, n) in enumerate(zip(old_env, new_val or [], strict=False)):
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
    rss: Sequence[Mapping[str, Any]],
    *,
    requires_typed_name: bool = False,
    readonly: bool = False,
    context: str = "",
) -> ActionPlan:
    """kubectl rollout undo, client side: the previous ReplicaSet's template patched back."""
    meta = dep.get("metadata") or {}
    target = Target("Deployment", str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    flags: PlanFlags = {"requires_typed_name": requires_typed_name, "readonly": readonly, "context": context}
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

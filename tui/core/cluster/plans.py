"""Pure translations between Kubernetes API objects (dicts) and kvwatch's plans and results.

No client, no I/O: `kube.KubeCluster` feeds these with what the API server returns, `sim.SimCluster`
with synthetic objects of the same shape, and tests with literal dicts.
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
from typing import Any, Mapping

from . import args as A
from .base import (
    CHANGE_CAUSE_ANNOTATION,
    PREVIOUS_ARGS_ANNOTATION,
    REVISION_ANNOTATION,
    ActionPlan,
    Condition,
    ContainerSpec,
    DeploymentInfo,
    EditArgsRequest,
    PodRef,
    ReplicaSetInfo,
    RolloutStatus,
    Target,
    sanitize,
)
from ..model import PodInfo

ROTATION_ANNOTATION = "kvwatch.io/rotation-label"  # on a drained pod: the label value to restore
DEFAULT_ROTATION_LABEL = "serving"
HASH_LABEL = "pod-template-hash"
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")


def esc(key: str) -> str:
    """JSON Pointer escaping (RFC 6901) for label / annotation keys."""
    return key.replace("~", "~0").replace("/", "~1")


# --------------------------------------------------------------------------------------------
# Conversions from API dicts


def ts(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def containers_of(pod_spec: Mapping[str, Any]) -> list[dict]:
    return list((pod_spec or {}).get("containers") or [])


def vllm_index(containers: list[Mapping[str, Any]], name: str | None = None) -> int | None:
    found = A.find_vllm_container(containers, name)
    return found[0] if found else None


def container_spec(c: Mapping[str, Any]) -> ContainerSpec:
    env = tuple((str(e.get("name")), (str(e["value"]) if "value" in e else None)) for e in c.get("env") or ())
    return ContainerSpec(
        str(c.get("name") or ""),
        c.get("image"),
        tuple(str(x) for x in c.get("command") or ()),
        tuple(str(x) for x in c.get("args") or ()),
        env,
    )


def owner_of(pod: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(kind, name) of the pod's workload: ReplicaSet -> Deployment by the template-hash suffix."""
    meta = pod.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not ref:
        return None, None
    kind, name = ref.get("kind"), ref.get("name")
    if kind == "ReplicaSet":
        h = (meta.get("labels") or {}).get(HASH_LABEL)
        if h and name and name.endswith("-" + h):
            return "Deployment", name[: -len(h) - 1]
    return kind, name


def pod_info(pod: Mapping[str, Any], owner: tuple[str | None, str | None] | None = None) -> PodInfo:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = containers_of(spec)
    vi = vllm_index(containers)
    vname = containers[vi].get("name") if vi is not None else None
    statuses = status.get("containerStatuses") or []
    cs = next((s for s in statuses if s.get("name") == vname), statuses[0] if statuses else None)
    restarts = int(cs.get("restartCount") or 0) if cs else 0
    reason = code = None
    phase = status.get("phase")
    if cs:
        last = (cs.get("lastState") or {}).get("terminated") or (cs.get("state") or {}).get("terminated")
        if last:
            reason = last.get("reason")
            code = last.get("exitCode")
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            phase = waiting["reason"]  # CrashLoopBackOff, ContainerCreating, ...
    if phase == "Pending":
        for cond in status.get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                phase = "Unschedulable" if cond.get("reason") == "Unschedulable" else phase
    if meta.get("deletionTimestamp"):
        phase = "Terminating"
    ready = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    kind, name = owner if owner is not None else owner_of(pod)
    return PodInfo(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        node=spec.get("nodeName"),
        phase=phase,
        ready=ready,
        restarts=restarts,
        last_termination_reason=reason,
        last_exit_code=code,
        owner_kind=kind,
        owner_name=name,
        labels=dict(meta.get("labels") or {}),
        pod_ip=status.get("podIP"),
    )


def conditions_of(status: Mapping[str, Any]) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            str(c.get("type")),
            str(c.get("status")),
            str(c.get("reason") or ""),
            sanitize(str(c.get("message") or "")),
            c.get("lastUpdateTime") or c.get("lastTransitionTime"),
        )
        for c in status.get("conditions") or []
    )


def deployment_info(d: Mapping[str, Any], kind: str = "Deployment") -> DeploymentInfo:
    meta = d.get("metadata") or {}
    spec = d.get("spec") or {}
    status = d.get("status") or {}
    ann = dict(meta.get("annotations") or {})
    return DeploymentInfo(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        kind=kind,
        replicas=int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1),
        ready=int(status.get("readyReplicas") or 0),
        updated=int(status.get("updatedReplicas") or 0),
        available=int(status.get("availableReplicas") or 0),
        current=int(status.get("replicas") or 0),
        generation=int(meta.get("generation") or 0),
        observed_generation=int(status.get("observedGeneration") or 0),
        conditions=conditions_of(status),
        resource_version=str(meta.get("resourceVersion") or ""),
        containers=tuple(container_spec(c) for c in containers_of((spec.get("template") or {}).get("spec") or {})),
        annotations=ann,
        revision=ann.get(REVISION_ANNOTATION),
        selector=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        uid=str(meta.get("uid") or ""),
        strategy=str((spec.get("strategy") or spec.get("updateStrategy") or {}).get("type") or "RollingUpdate"),
        progress_deadline_s=spec.get("progressDeadlineSeconds"),
    )


def selector_string(match_labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(match_labels.items()))


def pod_ref(p: Mapping[str, Any]) -> PodRef:
    info = pod_info(p)
    reason = ""
    for cond in (p.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "False" and cond.get("message"):
            reason = sanitize(str(cond["message"]))
            if cond.get("type") == "PodScheduled":
                break
    return PodRef(info.name, info.phase or "?", bool(info.ready), info.node, reason, info.restarts)


def pending_reason(p: Mapping[str, Any]) -> str | None:
    """Why a pod cannot be scheduled (insufficient GPUs and the like), or None."""
    status = p.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return sanitize(str(cond.get("message") or cond.get("reason") or "unschedulable"))
    return None


def prestop_sleep_s(container: Mapping[str, Any]) -> int:
    """Seconds a preStop hook sleeps (exec `sleep N`, `sh -c "sleep N"`, or the sleep action)."""
    pre = ((container.get("lifecycle") or {}).get("preStop")) or {}
    if "sleep" in pre:
        try:
            return int((pre.get("sleep") or {}).get("seconds") or 0)
        except (TypeError, ValueError):
            return 0
    cmd = " ".join(str(x) for x in ((pre.get("exec") or {}).get("command") or ()))
    m = re.search(r"\bsleep\s+(\d+)", cmd)
    return int(m.group(1)) if m else 0


def metrics_port(pod: Mapping[str, Any], default: int = 8000) -> int:
    containers = containers_of(pod.get("spec") or {})
    vi = vllm_index(containers)
    if vi is None:
        return default
    c = containers[vi]
    toks = [str(x) for x in (c.get("command") or [])] + [str(x) for x in (c.get("args") or [])]
    for i, t in enumerate(toks):
        if t.startswith("--port="):
            v = t.split("=", 1)[1]
            return int(v) if v.isdigit() else default
        if t == "--port" and i + 1 < len(toks) and toks[i + 1].isdigit():
            return int(toks[i + 1])
        m = re.search(r"--port[ =](\d+)", t)
        if m and " " in t:
            return int(m.group(1))
    return default


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


def compute_rollout(
    info: DeploymentInfo,
    new_rs: ReplicaSetInfo | None,
    old_rs: tuple[ReplicaSetInfo, ...],
    pods: list[Mapping[str, Any]],
    now: float,
) -> RolloutStatus:
    """kubectl rollout status' logic, plus what it does not say: Pending pods waiting for GPUs
    (a RollingUpdate with no spare GPU deadlocks) and crash-looping new pods."""
    cond = {c.type: c for c in info.conditions}
    prog = cond.get("Progressing")
    elapsed = (now - new_rs.created) if new_rs and new_rs.created else None

    def out(state: str, reason: str) -> RolloutStatus:
        return RolloutStatus(
            state, reason, info.replicas, info.updated, info.ready, info.available, info.current,
            info.generation, info.observed_generation, new_rs, old_rs, elapsed, info.conditions,
        )

    new_pods = new_rs.pods if new_rs else ()
    crashing = [p for p in new_pods if p.phase in ("CrashLoopBackOff", "Error") or p.restarts >= 3]
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

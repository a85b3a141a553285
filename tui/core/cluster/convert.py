"""Pure conversions from Kubernetes API objects (dicts) to kvwatch's values.

No client, no I/O: the adapters feed these with what the API server returns (or synthetic
objects of the same shape), tests with literal dicts. The plan builders are in `plans`.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Mapping, Sequence

from ..model import PodInfo
from . import args as A
from .values import REVISION_ANNOTATION, Condition, ContainerSpec, DeploymentInfo, PodRef, sanitize

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


def containers_of(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((pod_spec or {}).get("containers") or [])


def vllm_index(containers: Sequence[Mapping[str, Any]], name: str | None = None) -> int | None:
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
        started_at=ts(status.get("startTime") or meta.get("creationTimestamp")),
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


# kserve python/kserve/kserve/model_server.py: parser.add_argument("--http_port", default=DEFAULT_HTTP_PORT = 8080), the
# model server's REST port, which also serves /metrics; huggingfaceserver inherits that parser
KSERVE_HTTP_PORT = 8080
_PORT_FLAGS = {"vllm": ("--port",), "kserve": ("--http_port",)}


def metrics_port(pod: Mapping[str, Any], default: int = 8000) -> int:
    """The port the engine serves /metrics on: its `--port` (KServe huggingfaceserver: `--http_port`)
    with `$(VAR)` expanded from the container env as the kubelet does, else a declared containerPort
    named metrics or http, else the server's own default (vLLM 8000, KServe 8080)."""
    from .args.parse import KSERVE_HF, parse_container
    from .args.tokens import _env_map, _resolve, _tokens

    containers = containers_of(pod.get("spec") or {})
    vi = vllm_index(containers)
    if vi is None:
        return default
    c = containers[vi]
    kserve = parse_container(c).form == KSERVE_HF
    flags = _PORT_FLAGS["kserve" if kserve else "vllm"]
    toks, _ = _tokens(c)
    env = _env_map(c)
    found: int | None = None
    for i, t in enumerate(toks):  # argparse: the last occurrence wins
        flag, eq, inline = t.value.partition("=")
        if flag not in flags:
            continue
        vtok = None if eq else (toks[i + 1] if i + 1 < len(toks) else None)
        text = inline if eq else (vtok.value if vtok else "")
        # k8s.io/kubernetes pkg/kubelet/kuberuntime (third_party/forked/golang/expansion): $(VAR) in args from the container env
        value, _, _ = _resolve(text, vtok if not eq else t, env)
        if value is not None and value.isdigit():
            found = int(value)
    if found is not None:
        return found
    ports = {str(p.get("name") or ""): p.get("containerPort") for p in c.get("ports") or [] if isinstance(p, Mapping)}
    for name in ("metrics", "http"):
        port = ports.get(name)
        if isinstance(port, int):
            return port
    return KSERVE_HTTP_PORT if kserve else default
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

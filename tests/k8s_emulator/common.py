"""Shared pieces of the emulator: the resource table, Status errors, the request log, selectors
and patch semantics. Controllers and the server (core.py) build on these."""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from typing import Any

import kmock

# plural -> (group, version, kind, namespaced)
KINDS: dict[str, tuple[str, str, str, bool]] = {
    "pods": ("", "v1", "Pod", True),
    "services": ("", "v1", "Service", True),
    "events": ("", "v1", "Event", True),
    "namespaces": ("", "v1", "Namespace", False),
    "deployments": ("apps", "v1", "Deployment", True),
    "replicasets": ("apps", "v1", "ReplicaSet", True),
    "statefulsets": ("apps", "v1", "StatefulSet", True),
    "endpointslices": ("discovery.k8s.io", "v1", "EndpointSlice", True),
    "poddisruptionbudgets": ("policy", "v1", "PodDisruptionBudget", True),
    "horizontalpodautoscalers": ("autoscaling", "v2", "HorizontalPodAutoscaler", True),
    # custom resources: served only after `emu.install_crd(plural)`
    "leaderworkersets": ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", True),
    "inferenceservices": ("serving.kserve.io", "v1beta1", "InferenceService", True),
    "inferencepools": ("inference.networking.x-k8s.io", "v1alpha2", "InferencePool", True),
    "prometheusrules": ("monitoring.coreos.com", "v1", "PrometheusRule", True),
}
CRDS = ("leaderworkersets", "inferenceservices", "inferencepools", "prometheusrules")
PLURAL = {v[2]: k for k, v in KINDS.items()}
WORKLOADS = ("deployments", "replicasets", "statefulsets")
HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
GPU_PENDING = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."


def res(plural: str) -> kmock.resource:
    g, v, _, _ = KINDS[plural]
    return kmock.resource(g, v, plural)


def err(status: int, reason: str, message: str, **details: Any) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=status, reason=reason, message=message, details=details or {"causes": []})


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any
    at: float = field(default_factory=time.monotonic)  # when it arrived, to count requests per second

    @property
    def review(self) -> bool:
        """Access reviews and SelfSubjectReview: POSTs that change nothing (authorization / authentication APIs)."""
        return self.path.endswith(("accessreviews", "selfsubjectreviews"))

    @property
    def mutating(self) -> bool:
        """Changes cluster state. Reviews are POSTs that change nothing."""
        if self.method in ("PATCH", "PUT", "DELETE"):
            return self.query.get("dryRun") != "All"
        if self.method == "POST":
            return not self.review and self.query.get("dryRun") != "All"
        return False

    @property
    def writes(self) -> bool:
        """Any non-read request except reviews, dry runs included."""
        return self.method in ("PATCH", "PUT", "DELETE") or (self.method == "POST" and not self.review)


@dataclass
class Fault:
    method: str | None
    path: re.Pattern[str]
    status: int = 500
    message: str = "injected failure"
    delay: float = 0.0  # seconds before answering (timeouts)
    times: int | None = None  # None = forever
    hits: int = field(default=0)


# ---------------------------------------------------------------------------------------------
# selectors and patches


def _split_selector(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def label_match(selector: str | None, labels: dict[str, str]) -> bool:
    if not selector:
        return True
    for term in _split_selector(selector):
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", term)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            ok = labels.get(key) in vals if op == "in" else labels.get(key) not in vals
        elif "!=" in term:
            k, v = term.split("!=", 1)
            ok = labels.get(k.strip()) != v.strip()
        elif "=" in term:
            k, v = re.split(r"==?", term, maxsplit=1)
            ok = labels.get(k.strip()) == v.strip()
        elif term.startswith("!"):
            ok = term[1:].strip() not in labels
        else:
            ok = term in labels
        if not ok:
            return False
    return True


def _field(obj: dict, path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def field_match(selector: str | None, obj: dict) -> bool:
    if not selector:
        return True
    for term in _split_selector(selector):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if str(_field(obj, k.strip()) or "") == v.strip():
                return False
        else:
            k, v = re.split(r"==?", term, maxsplit=1)
            if str(_field(obj, k.strip()) or "") != v.strip():
                return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """Enough of strategic merge: dicts merge, lists of named dicts merge by `name`."""
    if isinstance(patch, dict) and isinstance(target, dict):
        out = copy.deepcopy(target)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = strategic_merge(out.get(k), v)
        return out
    if (
        isinstance(patch, list)
        and isinstance(target, list)
        and all(isinstance(x, dict) and "name" in x for x in patch + target)
    ):
        out = copy.deepcopy(target)
        for item in patch:
            i = next((j for j, t in enumerate(out) if t["name"] == item["name"]), None)
            if i is None:
                out.append(copy.deepcopy(item))
            else:
                out[i] = strategic_merge(out[i], item)
        return out
    return copy.deepcopy(patch)


def _resolve_int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1]) * total / 100.0
        return int(-(-pct // 1)) if round_up else int(pct // 1)
    return int(value)




def selector_match(selector: dict | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions) against labels; empty matches all."""
    # k8s.io/apimachinery pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector: In/NotIn/Exists/DoesNotExist
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, vals = e["key"], e["operator"], set(e.get("values") or [])
        ok = {"In": key in labels and labels[key] in vals, "NotIn": labels.get(key) not in vals, "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def is_ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def is_active(pod: dict) -> bool:
    """Counted by controllers: not terminating and not finished."""
    # k8s.io/kubernetes pkg/controller/controller_utils.go IsPodActive: phase != Succeeded/Failed && DeletionTimestamp == nil
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def controller_of(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def owner_ref(obj: dict) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

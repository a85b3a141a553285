"""What routes traffic to a pod, and how a drain can take it out of all of it (pure).

A pod is in rotation for every Service whose selector matches its labels (the EndpointSlice
controller lists it) and every Gateway API InferencePool whose selector matches (the endpoint
picker reads pods directly). A drain changes one label so that none of them matches any more,
without making the pod stop matching its own controller's selector (a ReplicaSet or StatefulSet
releases such a pod and starts a replacement). When no label can do both, the drain says so and
picks a mechanism that works, or refuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .convert import DEFAULT_ROTATION_LABEL, HASH_LABEL

STS_REVISION_LABEL = "controller-revision-hash"
STS_POD_LABELS = ("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index")
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LOWEST_DELETION_COST = -2147483648  # int32 minimum: the ReplicaSet removes this pod first


@dataclass(frozen=True)
class Route:
    kind: str  # "Service" or "InferencePool"
    name: str
    selector: Mapping[str, Any]  # a metav1.LabelSelector (matchLabels / matchExpressions)

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class Rotation:
    """How the drain takes the pod out of every route."""

    key: str | None  # the label to change; None: refused
    mechanism: str  # "label" (stays owned), "quarantine" (detached on purpose), "refused"
    routes: tuple[Route, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    error: str = ""


def as_selector(sel: Any) -> dict[str, Any]:
    """A Service's or InferencePool v1alpha2's plain map, or a LabelSelector, as a LabelSelector."""
    if not isinstance(sel, Mapping):
        return {}
    if "matchLabels" in sel or "matchExpressions" in sel:
        return dict(sel)
    return {"matchLabels": dict(sel)}


def selector_matches(sel: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics (In/NotIn/Exists/DoesNotExist); an empty selector matches all."""
    # k8s.io/apimachinery pkg/apis/meta/v1/helpers.go LabelSelectorAsSelector
    sel = sel or {}
    if any(labels.get(k) != v for k, v in (sel.get("matchLabels") or {}).items()):
        return False
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e.get("key"), e.get("operator"), set(e.get("values") or [])
        ok = {
            "In": key in labels and labels.get(key) in vals,
            "NotIn": labels.get(key) not in vals,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(str(op), False)
        if not ok:
            return False
    return True


def selector_keys(sel: Mapping[str, Any] | None) -> set[str]:
    sel = sel or {}
    return set(sel.get("matchLabels") or {}) | {str(e.get("key")) for e in sel.get("matchExpressions") or []}


def routes_to(labels: Mapping[str, str], services: Sequence[Mapping[str, Any]], pools: Sequence[Mapping[str, Any]] = ()) -> list[Route]:
    """Every Service (with a selector) and InferencePool whose selector matches `labels`."""
    out: list[Route] = []
    for kind, objs in (("Service", services), ("InferencePool", pools)):
        for o in objs:
            sel = as_selector((o.get("spec") or {}).get("selector"))
            # a Service without a selector gets no managed EndpointSlices (its endpoints are manual)
            if sel and selector_keys(sel) and selector_matches(sel, labels):
                out.append(Route(kind, str((o.get("metadata") or {}).get("name") or ""), sel))
    return out


def choose_rotation(
    labels: Mapping[str, str],
    routes: Sequence[Route],
    owner_kind: str | None,
    owner_selector: Mapping[str, Any] | None,
    drain_value: str,
    configured: str | None = None,
) -> Rotation:
    """The one label whose change to `drain_value` takes the pod out of every route while it
    still matches its controller's selector; else a quarantine (Deployment pods only) or a refusal."""
    protected = selector_keys(owner_selector) | {HASH_LABEL, STS_REVISION_LABEL, *STS_POD_LABELS}
    routes = tuple(routes)

    def breaks_all(key: str) -> bool:
        new = {**labels, key: drain_value}
        return all(not selector_matches(r.selector, new) for r in routes)

    def still_owned(key: str) -> bool:
        if owner_selector is None:
            return owner_kind is None  # an owner whose selector could not be read: change nothing it may select
        return selector_matches(owner_selector, {**labels, key: drain_value})

    names = ", ".join(str(r) for r in routes)
    if configured:
        if routes and not breaks_all(configured):
            left = [str(r) for r in routes if selector_matches(r.selector, {**labels, configured: drain_value})]
            return Rotation(None, "refused", routes, error=f"the rotation label {configured!r} does not take the pod out of {', '.join(left)}")
        if not still_owned(configured):
            return Rotation(None, "refused", routes, error=f"changing {configured!r} would detach the pod from its {owner_kind}")
        return Rotation(configured, "label", routes, (f"configured rotation label {configured}",))
    if not routes:
        note = f"no Service or InferencePool selects this pod; using label {DEFAULT_ROTATION_LABEL!r} (for an external router)"
        return Rotation(DEFAULT_ROTATION_LABEL, "label", routes, (note,))
    keys = sorted({k for r in routes for k in selector_keys(r.selector)})
    for k in keys:
        if k not in protected and breaks_all(k) and still_owned(k):
            return Rotation(k, "label", routes, (f"{names}: out of rotation by {k}={drain_value} (the {owner_kind or 'pod'} does not select on {k})",))
    why = f"every label that takes the pod out of {names} is also in its {owner_kind}'s selector"
    if owner_kind == "Deployment":
        shared = [k for k in keys if k not in (HASH_LABEL,) and breaks_all(k)]
        if shared:
            k = shared[0]
            note = (
                f"{why}: quarantine: {k}={drain_value} detaches the pod from its ReplicaSet on purpose, which starts its "
                "replacement at once; the detached pod is evicted once idle (configure a rotation label to keep the spare-first drain)"
            )
            return Rotation(k, "quarantine", routes, (note,))
    what = f"a {owner_kind} pod cannot be detached from its controller" if owner_kind else "no label can do it"
    return Rotation(None, "refused", routes, error=f"{why}; {what}: add a label the Service selects and the {owner_kind or 'pod'} does not (e.g. serving=true), or drain by hand")


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget that selects the pod, as its status reports it."""

    name: str
    allowed: int
    desired: int
    healthy: int
    expected: int

    def __str__(self) -> str:
        return f"PodDisruptionBudget {self.name}: {self.allowed} disruptions allowed ({self.healthy} healthy, needs {self.desired})"


def budgets_for(labels: Mapping[str, str], pdbs: Sequence[Mapping[str, Any]]) -> list[Budget]:
    out = []
    for p in pdbs:
        sel = (p.get("spec") or {}).get("selector")
        # pkg/registry/core/pod/storage/eviction.go getPodDisruptionBudgets: a nil or empty selector matches nothing
        if not sel or not selector_keys(sel) or not selector_matches(sel, labels):
            continue
        st = p.get("status") or {}
        out.append(Budget(
            str((p.get("metadata") or {}).get("name") or ""),
            int(st.get("disruptionsAllowed") or 0),
            int(st.get("desiredHealthy") or 0),
            int(st.get("currentHealthy") or 0),
            int(st.get("expectedPods") or 0),
        ))
    return out


def blocked_message(b: Budget | None) -> str:
    """The answer to a 429 from the Eviction API, with what would unblock it."""
    if b is None:
        return "eviction blocked by a PodDisruptionBudget (429); wait for more pods to be ready, or relax the budget"
    return (
        f"blocked by PDB {b.name}: {b.allowed} disruptions allowed ({b.healthy} healthy, needs {b.desired}); "
        f"it unblocks when another matching pod becomes ready (scale up) or the budget's minAvailable/maxUnavailable is relaxed"
    )


def endpoint_listing(slices: Sequence[Mapping[str, Any]], ip: str | None, uid: str | None) -> list[str]:
    """The EndpointSlices that still list the pod (by IP or by targetRef uid), ready or not."""
    out = []
    for s in slices:
        for e in s.get("endpoints") or []:
            ref = e.get("targetRef") or {}
            if (ip and ip in (e.get("addresses") or [])) or (uid and ref.get("uid") == uid):
                out.append(str((s.get("metadata") or {}).get("name") or ""))
                break
    return out

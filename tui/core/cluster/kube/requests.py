"""The exact mutating HTTP requests behind a plan: predicted from the plan (for `--dry-run`) and
recorded from the client as they are sent (for a real run), so scripts see what kvwatch does."""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable

from ..plans import build_scale_plan
from ..values import ActionPlan, Target
from .transport import FIELD_MANAGER

_WORKLOAD = {"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets"}


def _pod(ns: str, name: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods/{name}"


def plan_request(plan: ActionPlan) -> dict[str, Any] | None:
    """The one request a single-step plan sends (after its server-side dry run), or None: the
    path with the query the client adds (transport.py: fieldManager on every create and patch)."""
    t = plan.target
    fm = "?" + urllib.parse.urlencode({"fieldManager": FIELD_MANAGER})
    if plan.action in ("edit", "restart", "rollback", "scale"):
        path = f"/apis/apps/v1/namespaces/{t.namespace}/{_WORKLOAD.get(t.kind, t.kind.lower() + 's')}/{t.name}"
        return {"method": "PATCH", "path": path + ("/scale" if plan.action == "scale" else "") + fm, "body": plan.patch}
    if plan.action in ("cordon", "deletion-cost"):
        return {"method": "PATCH", "path": _pod(t.namespace, t.name) + fm, "body": plan.patch}
    if plan.action == "evict":
        return {"method": "POST", "path": _pod(t.namespace, t.name) + "/eviction" + fm, "body": plan.patch}
    if plan.action == "delete-pod":
        q = urllib.parse.urlencode({"gracePeriodSeconds": plan.data.get("grace_s", 60)})
        return {"method": "DELETE", "path": f"{_pod(t.namespace, t.name)}?{q}", "body": plan.patch}
    return None


async def drain_requests(cluster: Any, plan: ActionPlan) -> list[dict[str, Any]]:
    """The drain's requests in order, each sub-plan built now from the current state (reads only)."""
    ns, pod = plan.target.namespace, plan.target.name
    d = plan.data
    owner: Any = d.get("owner")  # as the planner wrote them; used only with `spare`
    original: Any = d.get("replicas")
    mech = d.get("mechanism", "delete")
    spare = bool(d.get("spare")) and owner and isinstance(original, int)
    subs: list[ActionPlan] = []
    if spare:
        subs.append(await cluster.plan_scale(ns, owner, original + 1))
    cordon = await cluster.plan_cordon(ns, pod, label=d.get("label"))
    subs.append(cordon)
    down = build_scale_plan(Target("Deployment", ns, owner), original + 1, original) if spare else None
    if mech == "scale-down":
        subs.append(await cluster.plan_deletion_cost(ns, pod, after=cordon.patch))  # the cordon adds an annotation
        subs.append(build_scale_plan(Target("Deployment", ns, owner), original + 1 if spare else original, original))
    elif mech in ("evict", "quarantine"):
        subs.append(await cluster.plan_evict(ns, pod, d.get("grace_s")))
        if down is not None:
            subs.append(down)
    else:
        subs.append(await cluster.plan_delete_pod(ns, pod, int(d.get("grace_s") or 60)))
    return [r for r in (plan_request(s) for s in subs) if r is not None]


def record_requests(api_client: Any, log: list[dict[str, Any]]) -> Callable[[], None]:
    """Append every mutating request the client sends (dry runs and access reviews left out) to
    `log` as {method, path with query, body}; returns the function that stops recording."""
    inner = api_client.call_api

    def call_api(method: str, url: str, *args: Any, **kw: Any) -> Any:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query)
        mutating = method.upper() in ("POST", "PUT", "PATCH", "DELETE") and query.get("dryRun") != ["All"]
        if mutating and not parts.path.endswith(("accessreviews", "selfsubjectreviews")):
            body = args[1] if len(args) > 1 else kw.get("body")
            log.append({"method": method.upper(), "path": parts.path + (f"?{parts.query}" if parts.query else ""), "body": body})
        return inner(method, url, *args, **kw)

    api_client.call_api = call_api

    def stop() -> None:
        api_client.call_api = inner

    return stop

"""The Kubernetes adapter's apply: a confirmed plan sent as a server-side dry run first, then
for real; a conflict is reported with the object's new state, never overwritten.
"""

from __future__ import annotations

from typing import Any, Callable

from ..plans import deployment_info
from ..routes import blocked_message
from ..values import ActionPlan, ActionResult, ClusterError, sanitize
from .patchtest import failed_tests, short, test_ops
from .transport import KubeTransport

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class KubeApply(KubeTransport):
    """Confirmed plans sent to the API server (dry run first)."""

    async def _apply(self, plan: ActionPlan) -> ActionResult:
        t = plan.target
        if plan.action in ("edit", "restart", "rollback"):
            _, patch_fn, _, _ = self._workload(t.kind)
            return await self._patch(plan, patch_fn, t.name, t.namespace)
        if plan.action == "scale":
            _, _, _, scale_fn = self._workload(t.kind)
            return await self._patch(plan, scale_fn, t.name, t.namespace)
        if plan.action in ("cordon", "deletion-cost"):
            return await self._patch(plan, self.core.patch_namespaced_pod, t.name, t.namespace)
        if plan.action == "evict":
            return await self._evict(plan)
        if plan.action == "delete-pod":
            body = dict(plan.patch or {})
            grace = int(plan.data.get("grace_s", 60))
            await self._call(self.core.delete_namespaced_pod, t.name, t.namespace, body=body, grace_period_seconds=grace, dry_run="All")
            await self._call(self.core.delete_namespaced_pod, t.name, t.namespace, body=body, grace_period_seconds=grace)
            return ActionResult(True, f"deleted pod/{t.name} (grace period {grace}s)", 200)
        return ActionResult(False, f"cannot apply a {plan.action!r} plan directly")

    async def _evict(self, plan: ActionPlan) -> ActionResult:
        """POST pods/NAME/eviction (kubectl drain's own way, kubectl/pkg/drain EvictPod): the API
        server checks the PodDisruptionBudgets and answers 429 when one allows no disruption."""
        t = plan.target
        fn = self.core.create_namespaced_pod_eviction
        for dry in ("All", None):
            try:
                kw: dict[str, Any] = {"dry_run": dry} if dry else {}
                await self._call(fn, t.name, t.namespace, plan.patch, **kw)
            except ClusterError as e:
                if e.status != 429:
                    return e.result(f"evict {t}: ")
                labels: dict[str, Any] = {}
                try:
                    labels = ((await self._call(self.core.read_namespaced_pod, t.name, t.namespace)).get("metadata") or {}).get("labels") or {}
                except ClusterError:
                    pass
                found = await self.budgets(t.namespace, labels) if labels else []  # type: ignore[attr-defined]
                return ActionResult(False, blocked_message(found[0] if found else None), 429, {"kind": "pdb-blocked", "budgets": [str(b) for b in found]})
        return ActionResult(True, f"evicted pod/{t.name} (grace period {plan.data.get('grace_s')}s)", 201)

    async def _patch(self, plan: ActionPlan, fn: Callable[..., Any], name: str, namespace: str) -> ActionResult:
        ctype = JSON_PATCH if plan.patch_type == "json" else MERGE_PATCH
        try:
            await self._call(fn, name, namespace, plan.patch, dry_run="All", _content_type=ctype)
        except ClusterError as e:
            return await self._refused(plan, e, "server-side dry run refused the change: ")
        try:
            out = await self._call(fn, name, namespace, plan.patch, _content_type=ctype)
        except ClusterError as e:
            return await self._refused(plan, e, "")
        meta = out.get("metadata") or {}
        details = {"resourceVersion": meta.get("resourceVersion"), "generation": meta.get("generation")}
        what = {
            "edit": "args changed; rollout started",
            "restart": "rollout restart started",
            "rollback": f"rolled back to revision {plan.data.get('to_revision')}",
            "scale": f"scaled to {plan.data.get('to')}",
            "cordon": plan.summary,
            "deletion-cost": plan.summary,
        }[plan.action]
        return ActionResult(True, f"{plan.target}: {what}", 200, details)

    async def _refused(self, plan: ActionPlan, e: ClusterError, prefix: str) -> ActionResult:
        changed: list[tuple[str, Any, Any]] = []
        guarded = e.status == 422 and plan.patch_type == "json" and bool(test_ops(plan.patch))
        if guarded or e.kind == "test-failed":
            # a failed `test` (some servers say which, v1.24 only "rejected"): re-read and compare
            try:
                changed = failed_tests(await self._read_target(plan), plan.patch)
            except ClusterError:
                pass
        if e.kind not in ("conflict", "test-failed") and not changed:
            return e.result(f"{plan.action} {plan.target}: {prefix}")
        # "changed since read": a 409 (stale resourceVersion) or a failed JSON Patch test
        details: dict[str, Any] = {"kind": "conflict", "cause": "test-failed" if changed else e.kind}
        if changed:
            details["changed"] = [{"path": p, "read": old, "now": now} for p, old, now in changed]
            why = ": " + "; ".join(f"{p} is now {sanitize(short(now))} (was {sanitize(short(old))})" for p, old, now in changed)
        else:
            why = f" ({e.message})" if e.kind == "test-failed" else ""
        msg = f"refused: {plan.target} changed since it was read; nothing was overwritten{why}. Review the new state and plan again"
        if plan.target.kind in ("Deployment", "StatefulSet"):
            try:
                now = deployment_info(await self._read_workload(plan.target.namespace, plan.target.name, plan.target.kind), plan.target.kind)
                details["current"] = now
                ci = plan.data.get("container")
                c = next((x for x in now.containers if x.name == ci), now.containers[0] if now.containers else None)
                if c is not None:
                    details["current_args"] = list(c.command) + list(c.args)
            except ClusterError:
                pass
        return ActionResult(False, msg, e.status, details)

    async def _read_target(self, plan: ActionPlan) -> dict[str, Any]:
        """The object a guarded patch was sent to (a scale's tests hold on the workload too)."""
        t = plan.target
        if t.kind == "Pod":
            pod: dict[str, Any] = await self._call(self.core.read_namespaced_pod, t.name, t.namespace)
            return pod
        return await self._read_workload(t.namespace, t.name, t.kind)

"""The simulated cluster's plans: the same `ActionPlan`s as the real adapter's, built from the
simulator's state (the args edit with the shared builder and the simulator's exact KV arithmetic)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from .. import args as A
from ..plans import bad_replicas, build_drain_plan, build_edit_plan, build_rollback_plan, build_scale_plan
from ..values import REVISION_ANNOTATION, ActionPlan, EditArgsRequest, Target
from .state import SimRevision, SimState, with_changes


class SimPlans(SimState):
    """Plans from the simulation's state, with the shared builders."""

    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        self.sync()
        d = self._dep(req.namespace, req.name)
        # a simulated group is always a Deployment; its GPU and engine generation are known here
        req = replace(
            req,
            kind="Deployment",
            gpu_total_bytes=req.gpu_total_bytes or d.gpu_total_bytes,
            generation="v0" if d.v0 else ("sglang" if d.sglang else req.generation),
        )
        plan = build_edit_plan(self._dep_dict(d), req, **self._flags())
        if not plan.ok or not plan.data.get("changes"):
            return plan
        # The simulator knows vLLM's start-up arithmetic exactly: use it as the preflight.
        try:
            new_args = with_changes(d.current.args, plan.data["changes"], d.sglang)
        except ValueError as e:  # an SGLang knob the simulator does not model
            return replace(plan, errors=(str(e),))
        try:
            kv = self.fleet.kv_plan(new_args, d.name)
            err = kv.error
        except ValueError as e:
            kv, err = None, f"ValueError: {e}"
        # The generic preflight's lines (capacity "not exposed", the fit line) give way to the exact one's.
        generic = set(plan.preflight.messages) if plan.preflight is not None else set()
        warnings = tuple(w for w in plan.warnings if w not in generic)
        if err:
            who = "SGLang" if d.sglang else "vLLM"
            pf = A.Preflight("fail", (f"{who} would refuse to start and the pod would crash-loop: {err}",))
            return replace(plan, preflight=pf, warnings=warnings + pf.messages)
        assert kv is not None
        msg = f"KV pool {kv.kv_cache_size_tokens:,} tokens: {kv.max_concurrency:.1f} full-length ({kv.max_model_len:,}) sequences at once"
        pf = A.with_fit(A.Preflight("ok", (msg,), None, kv.kv_cache_size_tokens), plan.data["changes"],
                        req.fits_max_num_seqs, req.fits_why)
        return replace(plan, preflight=pf, warnings=warnings + pf.messages[1:] if pf.status == "warn" else warnings)

    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan:
        d = self._dep(namespace, name)
        target = Target("Deployment", namespace, name)
        refused = bad_replicas(target, replicas, **self._flags())
        if refused is not None:
            return refused
        warnings = ("each new replica loads the model for minutes before it serves",) if replicas > d.desired else ()
        return build_scale_plan(target, d.desired, replicas, warnings, **self._flags())

    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        d = self._dep(namespace, name)
        # RFC 3339 in UTC, as kubectl writes it (not epoch seconds)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.now()))
        return ActionPlan(
            "restart", Target("Deployment", namespace, name), f"rollout restart deployment/{name}",
            diff=f"+kubectl.kubernetes.io/restartedAt: {stamp}",
            patch={"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}},
            patch_type="merge", warnings=(f"restarts all {d.desired} replicas one by one; each reloads the model",),
            data={"resourceVersion": str(d.rv), "restarted_at": stamp}, **self._flags(),
        )

    def rollback_inputs(self, namespace: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The Deployment and its ReplicaSets as the API server would return them, for the real
        roll back builder: one ReplicaSet per distinct pod template (a roll back reuses the old
        one, as Kubernetes does), the restart stamp in the template like `kubectl rollout restart`."""
        d = self._dep(namespace, name)
        dep = self._dep_dict(d)
        dep["spec"]["template"] = self._pod_template(d, d.current)
        latest: dict[Any, SimRevision] = {}
        for rev in d.revisions:
            latest[rev.key] = rev  # the newest revision of each template
        rss = [{"metadata": {"name": f"{d.name}-r{rev.number}", "annotations": {REVISION_ANNOTATION: str(rev.number)}},
                "spec": {"template": self._pod_template(d, rev, hashed=True)}}
               for rev in sorted(latest.values(), key=lambda r: r.number)]
        return dep, rss

    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        """`kubectl rollout undo` with the real cluster's builder: the same JSON Patch shape."""
        d = self._dep(namespace, name)
        plan = build_rollback_plan(*self.rollback_inputs(namespace, name), **self._flags())
        if plan.errors:
            return plan
        return replace(plan, data={**plan.data, "resourceVersion": str(d.rv)})

    async def plan_delete_pod(self, namespace: str, pod: str, grace_s: int = 60) -> ActionPlan:
        self._pod(namespace, pod)
        return ActionPlan(
            "delete-pod", Target("Pod", namespace, pod), f"delete pod/{pod} --grace-period={grace_s}", diff=f"-pod/{pod}",
            patch={"gracePeriodSeconds": grace_s}, data={"grace_s": grace_s}, **self._flags(),
        )

    async def plan_cordon(self, namespace: str, pod: str, *, undo: bool = False, label: str | None = None) -> ActionPlan:
        p = self._pod(namespace, pod)
        key = label or self.rotation_label
        target = Target("Pod", namespace, pod)
        cur = p.labels.get(key)
        new = "true" if undo else self.drain_value
        if cur == new:
            what = "in" if undo else "out of"
            return ActionPlan("cordon", target, "cordon", errors=(f"{pod} is already {what} rotation ({key}={cur})",), **self._flags())
        return ActionPlan(
            "cordon", target, f"label pod/{pod} {key}={new} ({'back in' if undo else 'out of'} rotation)",
            diff=f"-{key}: {cur}\n+{key}: {new}",
            patch=[{"op": "test", "path": f"/metadata/labels/{key}", "value": cur}, {"op": "replace", "path": f"/metadata/labels/{key}", "value": new}],
            patch_type="json", data={"label": key, "value": cur, "undo": undo}, **self._flags(),
        )

    async def plan_drain(self, namespace: str, pod: str, *, label: str | None = None, grace_s: int = 60) -> ActionPlan:
        p = self._pod(namespace, pod)
        d = self._deps[p.owner_name or ""]
        key = label or self.rotation_label
        errors = (f"{pod} is already out of rotation ({key}={self.drain_value})",) if p.labels.get(key) == self.drain_value else ()
        warnings = (f"the spare loads the model for ~{self.load_delay_s:.0f} simulated seconds",)
        target = Target("Pod", namespace, pod)
        return build_drain_plan(target, d.name, d.desired, key, self.drain_value, grace_s, warnings, errors, **self._flags())

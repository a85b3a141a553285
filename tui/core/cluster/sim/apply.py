"""The simulated cluster's apply: a confirmed plan changes the simulation (new revisions roll
out, replicas scale, leave rotation or go), with the same conflict checks as the API server."""

from __future__ import annotations


from ...sim.args import EngineArgs
from .. import args as A
from ..values import CHANGE_CAUSE_ANNOTATION, PREVIOUS_ARGS_ANNOTATION, ActionPlan, ActionResult
from .state import SimDeployment, SimRevision, SimState, with_changes


class SimApply(SimState):
    """Confirmed plans applied to the simulation."""

    def _conflict(self, plan: ActionPlan, d: SimDeployment) -> ActionResult | None:
        rv = plan.data.get("resourceVersion")
        if rv is not None and rv != str(d.rv):
            return ActionResult(
                False,
                f"refused: {plan.target} changed since it was read; nothing was overwritten. Review the new state and plan again",
                409,
                {"kind": "conflict", "current": self._info(d), "current_args": self._template(d)["command"] + self._template(d)["args"]},
            )
        return None

    def _new_revision(self, d: SimDeployment, args: EngineArgs, cause: str, restarted_at: str = "") -> SimRevision:
        rev = SimRevision(max(r.number for r in d.revisions) + 1, args, cause, self.now(), restarted_at)
        d.revisions.append(rev)
        d.generation += 1
        d.rv += 1
        if cause:
            d.annotations[CHANGE_CAUSE_ANNOTATION] = cause
        else:
            d.annotations.pop(CHANGE_CAUSE_ANNOTATION, None)
        return rev

    async def _apply(self, plan: ActionPlan) -> ActionResult:
        self._ensure_task()
        t = plan.target
        if plan.action in ("edit", "restart", "rollback", "scale"):
            d = self._dep(t.namespace, t.name)
            if plan.action == "scale":
                if d.desired != plan.data["from"]:
                    return ActionResult(False, f"refused: {t} changed since it was read (replicas are now {d.desired}); nothing was overwritten", 422, {"kind": "conflict"})
                d.desired = plan.data["to"]
                d.scaled_at = self.now()
                d.rv += 1
                self._event("Normal", "ScalingReplicaSet", f"Deployment/{d.name}", f"Scaled to {d.desired}")
                self.sync()
                return ActionResult(True, f"{t}: scaled to {d.desired}", 200)
            refused = self._conflict(plan, d)
            if refused is not None:
                return refused
            old = self._template(d)
            if plan.action == "edit":
                try:
                    new_args = with_changes(d.current.args, plan.data["changes"], d.sglang)
                    new_args.validate()
                except (ValueError, TypeError) as e:
                    return ActionResult(False, f"{t}: rejected: {e}", 422, {"kind": "invalid"})
                d.annotations[PREVIOUS_ARGS_ANNOTATION] = A.previous_args_annotation(old)
                cause = next((p["value"] for p in plan.patch if p["path"].endswith("change-cause")), "")
                rev = self._new_revision(d, new_args, cause, d.current.restarted_at)
                msg = "args changed; rollout started"
            elif plan.action == "restart":
                rev = self._new_revision(d, d.current.args, d.current.cause, plan.data["restarted_at"])
                msg = "rollout restart started"
            else:
                prev = next(r for r in d.revisions if r.number == plan.data["to_revision"])
                d.annotations[PREVIOUS_ARGS_ANNOTATION] = A.previous_args_annotation(old)
                rev = self._new_revision(d, prev.args, prev.cause, prev.restarted_at)
                msg = f"rolled back to revision {prev.number}"
            self._event("Normal", "ScalingReplicaSet", f"Deployment/{d.name}", f"revision {rev.number}: {msg}")
            self.sync()
            return ActionResult(True, f"{t}: {msg}", 200, {"generation": d.generation, "revision": rev.number})
        if plan.action == "cordon":
            p = self._pod(t.namespace, t.name)
            if p.labels.get(plan.data["label"]) != plan.data["value"]:
                return ActionResult(False, f"refused: {t} changed since it was read; nothing was overwritten", 422, {"kind": "conflict"})
            self.fleet.set_in_rotation(t.name, bool(plan.data["undo"]))
            return ActionResult(True, f"{t}: {plan.summary}", 200)
        if plan.action == "delete-pod":
            self._pod(t.namespace, t.name)
            self.fleet.remove_replica(t.name)
            self._replacing.pop(t.name, None)
            self._event("Normal", "Killing", f"Pod/{t.name}", f"Stopping container vllm (grace period {plan.data.get('grace_s', 60)}s)")
            self.sync()
            return ActionResult(True, f"deleted pod/{t.name} (grace period {plan.data.get('grace_s', 60)}s)", 200)
        return ActionResult(False, f"cannot apply a {plan.action!r} plan directly")

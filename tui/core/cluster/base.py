"""The cluster interface the UI talks to, implemented by `kube.KubeCluster` and `sim.SimCluster`.

Every mitigation is two calls: `plan_*()` reads the cluster and returns an `ActionPlan` that says
exactly what would change (the diff, the patch, warnings), and `apply(plan)` performs it. The
safety rules live here, not in the UI: a read-only cluster refuses every mutation before any
request is sent, production contexts require the target's name to be typed, invalid plans are
refused, and every attempt and its result goes to the audit log. Cluster errors never escape as
raw exceptions: reads raise `ClusterError` (one type, with a message meant for the SRE) and
mutations return an `ActionResult`.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from ..model import PodInfo
from ..results import ActionResult, ClusterError  # noqa: F401 - re-exported: the cluster's API
from ..textsafe import clean
from .args import Preflight
from .audit import AuditLog

# --------------------------------------------------------------------------------------------
# Actions and the API verbs they need (for the RBAC check and for hiding keys)

MUTATING_ACTIONS = ("edit", "scale", "restart", "rollback", "drain", "delete-pod", "cordon")
READ_ACTIONS = ("watch", "logs", "events", "metrics")

# action -> (verb, group, resource, subresource) tuples, all of which must be allowed
ACTION_VERBS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "watch": (("list", "", "pods", ""), ("watch", "", "pods", "")),
    "logs": (("get", "", "pods", "log"),),
    "events": (("list", "", "events", ""),),
    "metrics": (("get", "", "pods", "proxy"),),
    "edit": (("patch", "apps", "deployments", ""),),
    "scale": (("patch", "apps", "deployments", "scale"),),
    "restart": (("patch", "apps", "deployments", ""),),
    "rollback": (("patch", "apps", "deployments", ""), ("list", "apps", "replicasets", "")),
    "cordon": (("patch", "", "pods", ""),),
    "delete-pod": (("delete", "", "pods", ""),),
    "drain": (("patch", "apps", "deployments", "scale"), ("patch", "", "pods", ""), ("delete", "", "pods", "")),
}

PREVIOUS_ARGS_ANNOTATION = "kvwatch.io/previous-args"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"

LOG_FILTER = re.compile(r"kv|cache|cuda|oom|alloc|out of memory|memory", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def sanitize(text: str) -> str:
    """Cluster-supplied text made safe for a terminal: colour codes dropped (vLLM logs use them),
    any other control character shown as a visible escape (`textsafe.clean`)."""
    return clean(_ANSI.sub("", text))


# --------------------------------------------------------------------------------------------
# Plain results


@dataclass(frozen=True, slots=True)
class Target:
    kind: str  # "Deployment", "StatefulSet", "Pod"
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.name} -n {self.namespace}"


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    image: str | None
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str | None], ...] = ()  # (name, literal value or None when valueFrom)

    def as_dict(self) -> dict[str, Any]:
        """The k8s JSON shape, as `args.parse_container` reads it."""
        out: dict[str, Any] = {"name": self.name, "image": self.image}
        if self.command:
            out["command"] = list(self.command)
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = [{"name": n, "value": v} if v is not None else {"name": n, "valueFrom": {}} for n, v in self.env]
        return out


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_update: str | None = None


@dataclass(frozen=True, slots=True)
class DeploymentInfo:
    name: str
    namespace: str
    kind: str = "Deployment"
    replicas: int = 0  # desired (spec)
    ready: int = 0
    updated: int = 0
    available: int = 0
    current: int = 0  # pods that exist (status.replicas)
    generation: int = 0
    observed_generation: int = 0
    conditions: tuple[Condition, ...] = ()
    resource_version: str = ""
    containers: tuple[ContainerSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    revision: str | None = None
    selector: Mapping[str, str] = field(default_factory=dict)
    uid: str = ""
    strategy: str = "RollingUpdate"
    progress_deadline_s: int | None = None


@dataclass(frozen=True)
class ActionPlan:
    """Exactly what `apply` would do. Built by reads only; nothing has changed yet."""

    action: str  # one of MUTATING_ACTIONS
    target: Target
    summary: str  # one line for the confirm dialog title
    diff: str = ""  # unified diff (args) or a before/after block
    patch: Any = None  # JSON Patch ops (list) or a merge patch (dict), as sent
    patch_type: str = ""  # "json", "merge", "" (delete / composite)
    subresource: str = ""  # "scale" for the scale subresource
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # non-empty: apply refuses
    requires_typed_name: bool = False  # production context: type the target's name to confirm
    readonly: bool = False  # the cluster would refuse it (the UI should not have offered it)
    context: str = ""
    preflight: Preflight | None = None
    data: Mapping[str, Any] = field(default_factory=dict)  # action-specific facts for apply

    @property
    def ok(self) -> bool:
        return not self.errors and not self.readonly

    @property
    def confirm_word(self) -> str:
        return self.target.name


@dataclass(frozen=True, slots=True)
class PodRef:
    name: str
    phase: str
    ready: bool
    node: str | None = None
    reason: str = ""  # why not ready / why pending, from the cluster
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaSetInfo:
    name: str
    revision: int
    replicas: int
    ready: int
    available: int
    pods: tuple[PodRef, ...] = ()
    args_line: str = ""  # the vLLM container's args, one line, for the rollout view
    created: float | None = None


@dataclass(frozen=True, slots=True)
class RolloutStatus:
    state: str  # "done", "progressing", "stuck", "failed", "unknown"
    reason: str  # one line: why
    desired: int = 0
    updated: int = 0
    ready: int = 0
    available: int = 0
    current: int = 0
    generation: int = 0
    observed_generation: int = 0
    new_rs: ReplicaSetInfo | None = None
    old_rs: tuple[ReplicaSetInfo, ...] = ()
    elapsed_s: float | None = None
    conditions: tuple[Condition, ...] = ()

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")


@dataclass(frozen=True, slots=True)
class DrainStep:
    step: str  # check, scale-up, wait-spare, cordon, wait-idle, delete, done, cancel, uncordon
    status: str  # "running", "ok", "warn", "failed", "cancelled"
    message: str
    elapsed_s: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogLines:
    pod: str
    container: str | None
    previous: bool
    lines: tuple[str, ...]
    total: int  # lines read before filtering
    filtered: bool


@dataclass(frozen=True, slots=True)
class EventInfo:
    ts: float | None  # unix seconds of the latest occurrence
    type: str  # Normal / Warning
    reason: str
    object: str  # "Pod/name"
    message: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class Permission:
    allowed: bool
    reason: str = ""


@dataclass(frozen=True)
class Permissions:
    namespace: str
    actions: Mapping[str, Permission]

    def allowed(self, action: str) -> bool:
        p = self.actions.get(action)
        return bool(p and p.allowed)


@dataclass(frozen=True, slots=True)
class PodEvent:
    type: str  # ADDED, MODIFIED, DELETED, SYNC (full list in `pods`), ERROR (message)
    pod: PodInfo | None = None
    pods: tuple[PodInfo, ...] = ()
    message: str = ""


@dataclass(frozen=True, slots=True)
class ContextInfo:
    name: str
    cluster: str = ""
    user: str = ""
    namespace: str | None = None
    current: bool = False


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    readonly: bool = False
    production: bool = False


def policy_for(context: str, config: Any) -> ContextPolicy:
    """The policy of a kube context, from kvwatch's `Config` (its `profile_for`: exact name, then
    globs in file order) or from a mapping {"contexts": {"prod-*": {"readOnly": true, ...}}}, where
    the most specific (longest) matching glob wins."""
    if config is None:
        return ContextPolicy()
    if hasattr(config, "profile_for"):
        prof = config.profile_for(context)
        return ContextPolicy(bool(prof.readonly), bool(prof.production)) if prof is not None else ContextPolicy()
    if not config:
        return ContextPolicy()
    table = config.get("contexts", config)
    best: tuple[int, Mapping[str, Any]] | None = None
    for pattern, opts in table.items():
        if isinstance(opts, Mapping) and fnmatch(context, pattern):
            if best is None or len(pattern) > best[0]:
                best = (len(pattern), opts)
    if best is None:
        return ContextPolicy()
    opts = best[1]
    return ContextPolicy(
        readonly=bool(opts.get("readOnly", opts.get("readonly", False))),
        production=bool(opts.get("production", False)),
    )


LoadFn = Callable[[], "tuple[float, float] | None | Awaitable[tuple[float, float] | None]"]


# --------------------------------------------------------------------------------------------
# The interface


class Cluster(ABC):
    """What the UI may ask of a cluster. Subclasses implement the `_`-prefixed and abstract parts."""

    kind = "cluster"

    def __init__(
        self,
        *,
        context: str = "",
        user: str = "",
        namespace: str | None = None,
        readonly: bool = False,
        policy: ContextPolicy | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.context = context
        self.user = user
        self.namespace = namespace
        self.policy = policy or ContextPolicy()
        self._readonly_flag = readonly
        self.audit = audit if audit is not None else AuditLog()

    @property
    def readonly(self) -> bool:
        return self._readonly_flag or self.policy.readonly

    @property
    def production(self) -> bool:
        return self.policy.production

    def _flags(self) -> dict[str, Any]:
        """The context's safety flags every plan carries."""
        return {"requires_typed_name": self.production, "readonly": self.readonly, "context": self.context}

    # ---- time (the simulated cluster overrides these) ----

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    # ---- reads ----

    @abstractmethod
    async def list_pods(self, namespace: str | None = None, selector: str | None = None) -> list[PodInfo]: ...

    @abstractmethod
    def watch_pods(self, namespace: str | None = None, selector: str | None = None) -> AsyncIterator[PodEvent]: ...

    @abstractmethod
    async def get_deployment(self, namespace: str, name: str, kind: str = "Deployment") -> DeploymentInfo: ...

    @abstractmethod
    async def list_deployments(self, namespace: str) -> list[DeploymentInfo]: ...

    @abstractmethod
    async def rollout_status(self, namespace: str, name: str, kind: str = "Deployment") -> RolloutStatus: ...

    @abstractmethod
    async def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        previous: bool = False,
        tail: int = 2000,
        filtered: bool = True,
    ) -> LogLines: ...

    @abstractmethod
    async def events(self, namespace: str, limit: int = 200, involving: str | None = None) -> list[EventInfo]: ...

    @abstractmethod
    async def permissions(self, namespace: str) -> Permissions: ...

    @abstractmethod
    async def list_contexts(self) -> list[ContextInfo]: ...

    @abstractmethod
    async def list_namespaces(self) -> list[str]: ...

    @abstractmethod
    def metrics_url(self, pod: PodInfo) -> str: ...

    @abstractmethod
    async def fetch_metrics(self, pod: PodInfo, timeout: float = 5.0) -> str: ...

    # ---- plans (reads only) ----

    @abstractmethod
    async def plan_edit_args(
        self,
        namespace: str,
        name: str,
        changes: Mapping[str, Any],
        *,
        container: str | None = None,
        preset: str | None = None,
        cache_config: Mapping[str, Any] | None = None,
        gpu_total_bytes: float | None = None,
        kv_bytes_token: float | None = None,
        generation: str = "v1",
        kind: str = "Deployment",
        observed: Mapping[str, Any] | None = None,
    ) -> ActionPlan:
        """Validated args change with its exact diff and patch, presets (`args.PRESETS`) and the KV
        preflight (`cache_config`: the engine's vllm:cache_config_info labels)."""

    @abstractmethod
    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan: ...

    @abstractmethod
    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan: ...

    @abstractmethod
    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan: ...

    @abstractmethod
    async def plan_delete_pod(self, namespace: str, pod: str, grace_s: int = 60) -> ActionPlan: ...

    @abstractmethod
    async def plan_cordon(self, namespace: str, pod: str, *, undo: bool = False, label: str | None = None) -> ActionPlan: ...

    @abstractmethod
    async def plan_drain(
        self, namespace: str, pod: str, *, label: str | None = None, grace_s: int = 60
    ) -> ActionPlan: ...

    # ---- implementation hooks ----

    @abstractmethod
    async def _apply(self, plan: ActionPlan) -> ActionResult:
        """Perform a validated, confirmed plan (never called when read-only)."""

    async def _spare_pending(self, namespace: str, owner: str) -> str | None:
        """Why a new replica cannot start (e.g. no free GPU), or None."""
        return None

    # ---- mutations: the safety gate ----

    def _plan_flags(self, action: str) -> dict[str, Any]:
        return {"requires_typed_name": self.production, "readonly": self.readonly, "context": self.context}

    async def apply(self, plan: ActionPlan, *, typed_name: str | None = None) -> ActionResult:
        """Perform `plan`. Refuses (sending nothing) when read-only, invalid or unconfirmed."""
        if not self.readonly and not plan.errors and self._needs_name(plan) and typed_name != plan.target.name:
            res = ActionResult(False, f"refused: production context; type {plan.target.name!r} to confirm", None, {"kind": "unconfirmed"})
            self._audit(plan, res)
            return res
        return await self._gate(plan)

    def _needs_name(self, plan: ActionPlan) -> bool:
        return plan.requires_typed_name or self.production

    async def _gate(self, plan: ActionPlan) -> ActionResult:
        """Every mutation passes here: read-only and invalid plans stop before any request."""
        if self.readonly:
            res = ActionResult(False, f"refused: {self.context or 'this cluster'} is read-only; nothing was sent", None, {"kind": "readonly"})
        elif plan.errors:
            res = ActionResult(False, "refused: " + "; ".join(plan.errors), None, {"kind": "bad-input"})
        else:
            try:
                res = await self._apply(plan)
            except ClusterError as e:
                res = e.result(f"{plan.action} {plan.target}: ")
            except Exception as e:  # noqa: BLE001 - the dashboard must keep running
                res = ActionResult(False, f"{plan.action} {plan.target}: unexpected error: {type(e).__name__}: {e}")
        self._audit(plan, res)
        return res

    def _audit(self, plan: ActionPlan, res: ActionResult) -> None:
        self.audit.record(
            user=self.user,
            context=self.context,
            action=plan.action,
            target=str(plan.target),
            diff=plan.diff,
            ok=res.ok,
            message=res.message,
            status=res.status_code,
            patch=plan.patch,
        )

    # Convenience: plan + apply for keys that need no review beyond the confirm dialog.
    async def scale(self, namespace: str, name: str, replicas: int, *, kind: str = "Deployment", typed_name: str | None = None) -> ActionResult:
        return await self._plan_and_apply(self.plan_scale(namespace, name, replicas, kind), typed_name)

    async def restart(self, namespace: str, name: str, *, kind: str = "Deployment", typed_name: str | None = None) -> ActionResult:
        return await self._plan_and_apply(self.plan_restart(namespace, name, kind), typed_name)

    async def rollback(self, namespace: str, name: str, *, kind: str = "Deployment", typed_name: str | None = None) -> ActionResult:
        return await self._plan_and_apply(self.plan_rollback(namespace, name, kind), typed_name)

    async def delete_pod(self, namespace: str, pod: str, grace_s: int = 60, *, typed_name: str | None = None) -> ActionResult:
        return await self._plan_and_apply(self.plan_delete_pod(namespace, pod, grace_s), typed_name)

    async def _plan_and_apply(self, plan_coro: Awaitable[ActionPlan], typed_name: str | None) -> ActionResult:
        try:
            plan = await plan_coro
        except ClusterError as e:
            return e.result()
        return await self.apply(plan, typed_name=typed_name)

    # ---- drain (runbook preemption-thrash step 2), shared by every implementation ----

    async def drain(
        self,
        plan: ActionPlan,
        load: LoadFn,
        *,
        typed_name: str | None = None,
        cancel: asyncio.Event | None = None,
        spare_timeout_s: float = 900.0,
        idle_timeout_s: float = 300.0,
        poll_s: float = 2.0,
    ) -> AsyncIterator[DrainStep]:
        """Spare up, take the target out of rotation, wait for it to go idle, delete it.

        Yields a DrainStep as each step starts and ends. `load()` returns the target's live
        (running, waiting) from its metrics, or None when unknown. Setting `cancel` stops at the
        next poll and puts the target back in rotation if it was taken out; the spare replica
        stays until `plan_restore` is applied (the summary step says so).
        """
        t0 = self.now()

        def step(name: str, status: str, msg: str, **data: Any) -> DrainStep:
            return DrainStep(name, status, msg, round(self.now() - t0, 3), data)

        if self.readonly:
            res = ActionResult(False, "refused: read-only; nothing was sent", None, {"kind": "readonly"})
            self._audit(plan, res)
            yield step("check", "failed", res.message)
            return
        if plan.action != "drain" or plan.errors:
            msg = "refused: " + ("; ".join(plan.errors) if plan.errors else "not a drain plan")
            self._audit(plan, ActionResult(False, msg))
            yield step("check", "failed", msg)
            return
        if self._needs_name(plan) and typed_name != plan.target.name:
            msg = f"refused: production context; type {plan.target.name!r} to confirm"
            self._audit(plan, ActionResult(False, msg))
            yield step("check", "failed", msg)
            return
        self._audit(plan, ActionResult(True, "drain started"))
        for w in plan.warnings:
            yield step("check", "warn", w)
        inner = self._drain_run(plan, load, step, cancel, spare_timeout_s, idle_timeout_s, poll_s)
        last: DrainStep | None = None
        try:
            async for st in inner:
                last = st
                yield st
        finally:
            await inner.aclose()  # runs its clean-up now, not when garbage-collected
            if last is not None:
                ok = (last.step, last.status) == ("done", "ok")
                self._audit(plan, ActionResult(ok, f"drain {last.step} {last.status}: {last.message}"))

    async def _drain_run(
        self,
        plan: ActionPlan,
        load: LoadFn,
        step: Callable[..., DrainStep],
        cancel: asyncio.Event | None,
        spare_timeout_s: float,
        idle_timeout_s: float,
        poll_s: float,
    ) -> AsyncIterator[DrainStep]:
        ns, pod = plan.target.namespace, plan.target.name
        owner = plan.data.get("owner")
        original = plan.data.get("replicas")
        cordoned = False
        deleted = False

        def cancelled() -> bool:
            return cancel is not None and cancel.is_set()

        async def uncordon_after_cancel() -> DrainStep:
            try:
                p = await self.plan_cordon(ns, pod, undo=True, label=plan.data.get("label"))
                r = await self._gate(p)  # sub-actions were confirmed with the drain
            except ClusterError as e:
                r = e.result()
            status = "ok" if r.ok else "failed"
            return step("uncordon", status, f"put {pod} back in rotation: {r.message}")

        try:
            # 1. spare
            if owner and isinstance(original, int):
                try:
                    sp = await self.plan_scale(ns, owner, original + 1)
                except ClusterError as e:
                    yield step("scale-up", "failed", e.message)
                    return
                yield step("scale-up", "running", f"scaling {owner} {original} -> {original + 1} (spare first)")
                r = await self._gate(sp)
                if not r.ok:
                    yield step("scale-up", "failed", r.message, result=r)
                    return
                yield step("scale-up", "ok", r.message, restore_replicas=original)
                warned_pending = False
                deadline = self.now() + spare_timeout_s
                while True:
                    if cancelled():
                        yield step("cancel", "cancelled", f"cancelled while waiting for the spare; {owner} stays at {original + 1} replicas until restored", restore_replicas=original)
                        return
                    try:
                        d = await self.get_deployment(ns, owner)
                    except ClusterError as e:
                        yield step("wait-spare", "warn", e.message)
                        d = None
                    if d is not None and d.available >= original + 1 and d.ready >= original + 1:
                        yield step("wait-spare", "ok", f"spare ready: {d.ready}/{d.replicas} ready")
                        break
                    if not warned_pending:
                        why = await self._spare_pending(ns, owner)
                        if why:
                            warned_pending = True
                            yield step("wait-spare", "warn", f"spare cannot be scheduled: {why}", pending=why)
                    if self.now() >= deadline:
                        yield step("wait-spare", "failed", f"spare not ready after {spare_timeout_s:.0f}s; target left in rotation", restore_replicas=original)
                        return
                    yield step("wait-spare", "running", f"waiting for the spare ({d.ready if d else '?'}/{original + 1} ready)")
                    await self.sleep(poll_s)
            else:
                yield step("scale-up", "warn", "no owning Deployment: no spare replica is started")

            # 2. out of rotation
            try:
                cp = await self.plan_cordon(ns, pod, label=plan.data.get("label"))
            except ClusterError as e:
                yield step("cordon", "failed", e.message)
                return
            r = await self._gate(cp)
            if not r.ok:
                yield step("cordon", "failed", r.message)
                return
            cordoned = True
            yield step("cordon", "ok", f"{pod} out of rotation: {cp.summary}")

            # 3. wait for in-flight requests to finish
            deadline = self.now() + idle_timeout_s
            last: object = None
            while True:
                if cancelled():
                    yield step("cancel", "cancelled", "cancelled while waiting for the target to go idle")
                    yield await uncordon_after_cancel()
                    cordoned = False
                    return
                try:
                    cur = load()
                    if inspect.isawaitable(cur):
                        cur = await cur
                except Exception as e:  # noqa: BLE001 - an unreadable metric is "unknown", not a crash
                    if last != "error":
                        yield step("wait-idle", "warn", f"cannot read {pod}'s load: {type(e).__name__}: {e}")
                    cur, last = None, "error"
                if cur is not None:
                    running, waiting = cur
                    if running + waiting <= 0:
                        yield step("wait-idle", "ok", f"{pod} is idle (running 0, waiting 0)")
                        break
                    if cur != last:
                        yield step("wait-idle", "running", f"{pod}: running {running:g}, waiting {waiting:g}", running=running, waiting=waiting)
                    last = cur
                if self.now() >= deadline:
                    yield step("wait-idle", "warn", f"not idle after {idle_timeout_s:.0f}s; deleting anyway with the grace period")
                    break
                await self.sleep(poll_s)

            # 4. delete
            grace = int(plan.data.get("grace_s", 60))
            try:
                dp = await self.plan_delete_pod(ns, pod, grace)
            except ClusterError as e:
                yield step("delete", "failed", e.message)
                return
            r = await self._gate(dp)
            if not r.ok:
                yield step("delete", "failed", r.message)
                yield await uncordon_after_cancel()
                cordoned = False
                return
            deleted = True
            yield step("delete", "ok", f"deleted {pod} (grace period {grace}s)")
            restore = f"; restore {owner} to {original} replicas with the restore key" if owner else ""
            yield step("done", "ok", f"drained {pod}{restore}", restore_replicas=original, owner=owner)
        finally:
            if cordoned and not deleted:
                # closed from outside mid-drain: do not leave a live replica out of rotation
                try:
                    await uncordon_after_cancel()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass

    async def plan_restore(self, namespace: str, name: str, replicas: int) -> ActionPlan:
        """Scale back after a drain (the spare replica was temporary)."""
        return await self.plan_scale(namespace, name, replicas)

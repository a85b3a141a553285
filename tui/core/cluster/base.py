"""The cluster interface the UI talks to, implemented by `kube.KubeCluster` and `sim.SimCluster`.

Two halves, each a small interface: `ClusterReads` (pods, workloads, rollout status, logs,
events, permissions, contexts, namespaces, metrics) and `ClusterActions` (plans, the safety gate,
apply, audit). `Cluster` is both, plus the drain (`drain.drain`, which works through them).

Every mitigation is two calls: `plan_*()` reads the cluster and returns an `ActionPlan` that says
exactly what would change (the diff, the patch, warnings), and `apply(plan)` performs it. The
safety rules live here, not in the UI: a read-only cluster refuses every mutation before any
request is sent, production contexts require the target's name to be typed, invalid plans are
refused, and every attempt and its result goes to the audit log. Cluster errors never escape as
raw exceptions: reads raise `ClusterError` (one type, with a message meant for the SRE) and
mutations return an `ActionResult`.

The value types live in `values`; they are re-exported here, where callers import them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from abc import ABC, abstractmethod
from typing import Any, AsyncIterator, Awaitable, Mapping

from ..diagnosis.loglines import trouble_lines
from ..model import PodInfo
from . import drain as _drain
from .audit import AuditLog
from .describe import Manifest as Manifest, manifest_yaml
from .values import (  # re-exported ("X as X"): callers import these from `base`
    ACTION_VERBS as ACTION_VERBS,
    CHANGE_CAUSE_ANNOTATION as CHANGE_CAUSE_ANNOTATION,
    LOG_FILTER as LOG_FILTER,
    MUTATING_ACTIONS as MUTATING_ACTIONS,
    PREVIOUS_ARGS_ANNOTATION as PREVIOUS_ARGS_ANNOTATION,
    READ_ACTIONS as READ_ACTIONS,
    RESTARTED_AT_ANNOTATION as RESTARTED_AT_ANNOTATION,
    REVISION_ANNOTATION as REVISION_ANNOTATION,
    ActionPlan as ActionPlan,
    ActionResult as ActionResult,
    ClusterError as ClusterError,
    Condition as Condition,
    ContainerSpec as ContainerSpec,
    ContextInfo as ContextInfo,
    ContextPolicy as ContextPolicy,
    DeploymentInfo as DeploymentInfo,
    DrainStep as DrainStep,
    EditArgsRequest as EditArgsRequest,
    EventInfo as EventInfo,
    LoadFn as LoadFn,
    LogLines as LogLines,
    Permission as Permission,
    Permissions as Permissions,
    PodEvent as PodEvent,
    PodRef as PodRef,
    ReplicaSetInfo as ReplicaSetInfo,
    RolloutStatus as RolloutStatus,
    Target as Target,
    policy_for as policy_for,
    sanitize as sanitize,
)


class ClusterReads(ABC):
    """The read side: facts about the cluster, never a change. Reads raise `ClusterError`."""

    # ---- time (the simulated cluster overrides these) ----

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

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

    async def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        previous: bool = False,
        tail: int = 2000,
        filtered: bool = True,
        since_s: float | None = None,
    ) -> LogLines:
        """The pod's last `tail` log lines (its restarted container's with `previous`), made safe
        for a terminal; with `filtered`, only the lines that signal trouble (diagnosis.loglines:
        preemption warnings, CUDA OOM, engine errors, tracebacks; not vLLM's periodic stats line);
        with `since_s`, only those of the last `since_s` seconds (read so, not cut after)."""
        container, raw = await self._log_lines(namespace, pod, container, previous, tail, since_s=since_s)
        lines = [sanitize(ln) for ln in raw]
        kept = trouble_lines(lines) if filtered else lines
        return LogLines(pod, container, previous, tuple(kept), len(lines), filtered)

    @abstractmethod
    async def _log_lines(
        self, namespace: str, pod: str, container: str | None, previous: bool, tail: int,
        since_s: float | None = None,
    ) -> tuple[str | None, list[str]]:
        """(the container read, its raw log lines, of the last `since_s` seconds when given);
        raises `no_previous_logs` when `previous` is asked of a container that never restarted."""

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

    async def spare_pending(self, namespace: str, owner: str) -> str | None:
        """Why a new replica of `owner` cannot start (e.g. no free GPU), or None."""
        return None

    async def describe(self, namespace: str, pod: str) -> list[Manifest]:
        """The pod's manifest and its owner's (Deployment, StatefulSet), read-only, as YAML; an
        owner that cannot be read is a Manifest with its error (the pod's is still shown)."""
        from .convert import owner_of

        obj = await self._read_pod(namespace, pod)
        out = [Manifest("Pod", pod, manifest_yaml(obj))]
        kind, name = owner_of(obj)
        if kind and name:
            try:
                out.append(Manifest(kind, name, manifest_yaml(await self._read_owner(namespace, kind, name))))
            except ClusterError as e:
                out.append(Manifest(kind, name, error=e.message))
        return out

    async def _read_pod(self, namespace: str, pod: str) -> Mapping[str, Any]:
        """The pod as the API server returns it."""
        raise ClusterError("error", "this cluster cannot show manifests")

    async def _read_owner(self, namespace: str, kind: str, name: str) -> Mapping[str, Any]:
        """The pod's workload as the API server returns it."""
        raise ClusterError("error", "this cluster cannot show manifests")


class ClusterActions(ABC):
    """The action side: plans (reads only), then the safety gate, apply and the audit log.

    Subclasses implement the `plan_*` builders and `_apply`; everything that decides whether a
    plan may be sent lives here, once."""

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

    # ---- plans (reads only) ----

    @abstractmethod
    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        """Validated args change with its exact diff and patch, presets (`args.PRESETS`) and the KV
        preflight (`req.cache_config`: the engine's vllm:cache_config_info labels)."""

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

    # ---- mutations: the safety gate ----

    async def apply(self, plan: ActionPlan, *, typed_name: str | None = None) -> ActionResult:
        """Perform `plan`. Refuses (sending nothing) when read-only, invalid or unconfirmed."""
        if not self.readonly and not plan.errors and self.needs_typed_name(plan) and typed_name != plan.target.name:
            res = ActionResult(False, f"refused: production context; type {plan.target.name!r} to confirm", None, {"kind": "unconfirmed"})
            self.record(plan, res)
            return res
        return await self.apply_confirmed(plan)

    def needs_typed_name(self, plan: ActionPlan) -> bool:
        return plan.requires_typed_name or self.production

    async def apply_confirmed(self, plan: ActionPlan) -> ActionResult:
        """Every mutation passes here: read-only and invalid plans stop before any request.
        Sub-actions confirmed with a parent action (the drain's steps) enter here directly."""
        if self.readonly:
            res = ActionResult(False, f"refused: {self.context or 'this cluster'} is read-only; nothing was sent", None, {"kind": "readonly"})
        elif plan.errors:
            res = ActionResult(False, "refused: " + "; ".join(plan.errors), None, {"kind": "bad-input"})
        elif (why := self.audit.unwritable()) and not self.audit.unaudited_ok:
            # fail closed: a change to the cluster with no record of who made it is not made
            return ActionResult(False, f"refused: {why}; nothing was sent (fix the audit log, or pass "
                                       "--allow-unaudited to act without a record)", None, {"kind": "unaudited"})
        else:
            try:
                res = await self._apply(plan)
            except ClusterError as e:
                res = e.result(f"{plan.action} {plan.target}: ")
            except Exception as e:  # noqa: BLE001 - the dashboard must keep running
                res = ActionResult(False, f"{plan.action} {plan.target}: unexpected error: {type(e).__name__}: {e}")
        return self.record(plan, res)

    def audit_user(self) -> dict[str, Any]:
        """Who acts, as the audit log names them (the Kubernetes adapter asks the API server)."""
        return {"user": self.user}

    def data_clock(self) -> float | None:
        """The clock the metrics are stamped with when it is not the wall clock (the simulator's)."""
        return None

    def record(self, plan: ActionPlan, res: ActionResult) -> ActionResult:
        """Write the audit line; a result that could not be written says so in its message."""
        self.audit.record(
            **self.audit_user(),
            context=self.context,
            action=plan.action,
            target=str(plan.target),
            diff=plan.diff,
            ok=res.ok,
            message=res.message,
            status=res.status_code,
            patch=plan.patch,
            data_ts=self.data_clock(),
        )
        if self.audit.last_error is None:
            return res
        return dataclasses.replace(res, message=f"{res.message} (not recorded in the audit log: {self.audit.last_error})")

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

    # The drain's removal steps. A cluster without the Eviction API (the simulator) plans a
    # "delete" drain and never calls these.
    async def plan_evict(self, namespace: str, pod: str, grace_s: int | None = None) -> ActionPlan:
        return await self.plan_delete_pod(namespace, pod, 60 if grace_s is None else grace_s)

    async def plan_deletion_cost(self, namespace: str, pod: str, cost: int = -2147483648) -> ActionPlan:
        raise ClusterError("bad-input", "this cluster has no pod-deletion-cost")

    async def route_listing(self, namespace: str, pod: str) -> list[str]:
        """The EndpointSlices still listing the pod ([] when it is in none, or none are kept)."""
        return []

    async def plan_restore(self, namespace: str, name: str, replicas: int) -> ActionPlan:
        """Scale back after a drain (the spare replica was temporary)."""
        return await self.plan_scale(namespace, name, replicas)


class Cluster(ClusterReads, ClusterActions):
    """What the UI may ask of a cluster: its reads, its actions, and the drain built on both."""

    kind = "cluster"

    # the drain is a module of its own that works through the two halves; bound here as a method
    drain = _drain.drain

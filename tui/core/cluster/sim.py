"""`Cluster` over the simulated fleet, so every key works in `kvwatch demo`.

Each simulator group is a Deployment whose pods are the group's replicas. The same plan builders
as the real adapter make the diffs and patches (from a synthetic pod template), the same safety
gate and audit log apply, and actions really change the simulation: an args edit rolls replicas
one at a time with the new args (a new replica loads for minutes of simulated time, then the old
one leaves rotation, drains and goes), so the simulator's preemptions really fall; a drain moves
load to the spare; roll back restores the previous args.

Time: `now()` is the simulator clock. When the fleet runs in its own thread, `sleep()` waits
real time; when it is stepped (tests, tools), `sleep()` steps the simulation instead.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, AsyncIterator, Mapping

from ..model import PodInfo
from ..sim.args import EngineArgs
from ..sim.fleet import DEFAULT_LOAD_S, SimFleet
from . import args as A
from .audit import AuditLog
from .base import (
    ACTION_VERBS,
    CHANGE_CAUSE_ANNOTATION,
    LOG_FILTER,
    MUTATING_ACTIONS,
    PREVIOUS_ARGS_ANNOTATION,
    REVISION_ANNOTATION,
    ActionPlan,
    ActionResult,
    Cluster,
    ClusterError,
    Condition,
    ContextInfo,
    ContextPolicy,
    DeploymentInfo,
    EditArgsRequest,
    EventInfo,
    LogLines,
    Permission,
    Permissions,
    PodEvent,
    PodRef,
    ReplicaSetInfo,
    RolloutStatus,
    Target,
    sanitize,
)
from .plans import build_edit_plan, compute_rollout, container_spec

PROGRESS_DEADLINE_S = 600.0


@dataclass
class _Revision:
    number: int
    args: EngineArgs
    cause: str = ""
    started: float = 0.0
    restarted_at: str = ""

    @property
    def key(self) -> tuple[EngineArgs, str]:
        """The pod template, as its hash: a roll back to it reuses pods that already run it."""
        return (self.args, self.restarted_at)


@dataclass
class _Deployment:
    name: str
    model: str
    v0: bool
    gpu_total_bytes: int
    desired: int
    revisions: list[_Revision]
    generation: int = 1
    rv: int = 1
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str = ""

    @property
    def current(self) -> _Revision:
        return self.revisions[-1]


def _container(model: str, args: EngineArgs) -> dict[str, Any]:
    """The pod template's vLLM container for `args`: explicit KV flags, as production specs have."""
    cli = args.cli()
    if "--gpu-memory-utilization" not in cli:
        cli += ["--gpu-memory-utilization", str(args.gpu_memory_utilization)]
    return {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "command": ["vllm", "serve", model], "args": cli + ["--port", "8000"]}


def _with(args: EngineArgs, changes: Mapping[str, Any]) -> EngineArgs:
    return replace(args, **{k.replace("-", "_"): v for k, v in changes.items()})


class SimCluster(Cluster):
    kind = "simulated"

    def __init__(
        self,
        fleet: SimFleet,
        *,
        context: str = "demo",
        user: str = "demo",
        namespace: str | None = None,
        readonly: bool = False,
        policy: ContextPolicy | None = None,
        audit: AuditLog | None = None,
        load_delay_s: float = DEFAULT_LOAD_S,
        grace_s: float = 60.0,
        rotation_label: str = "serving",
        drain_value: str = "draining",
        stepped: bool | None = None,
    ) -> None:
        super().__init__(
            context=context,
            user=user,
            namespace=namespace or fleet.namespace,
            readonly=readonly,
            policy=policy,
            audit=audit,
        )
        self.fleet = fleet
        self.load_delay_s = load_delay_s
        self.grace_s = grace_s
        self.rotation_label = rotation_label
        self.drain_value = drain_value
        self._stepped = stepped
        self._deps: dict[str, _Deployment] = {}
        self._pod_key: dict[str, tuple[EngineArgs, str]] = {}
        self._replacing: dict[str, str] = {}  # old pod -> its replacement
        self._known: set[str] = set()
        self._events: list[EventInfo] = []
        self._names = itertools.count(1)
        self._uids = itertools.count(1)
        now = fleet.clock()
        for name in fleet.replica_names():
            st = fleet.status(name)
            d = self._deps.get(st.group)
            if d is None:
                r = fleet.replica(name)
                with fleet.lock:
                    model, v0, total = r.model.name, bool(r.v0), int(r.gpu_spec.total_bytes)
                d = self._deps[st.group] = _Deployment(
                    st.group, model, v0, total, 0, [_Revision(1, fleet.engine_args(name), "", now)], uid=f"sim-{st.group}"
                )
            d.desired += 1
            self._pod_key[name] = d.current.key
            self._known.add(name)
        self._task: asyncio.Task | None = None

    # ---- time and the reconcile loop ----

    @property
    def stepped(self) -> bool:
        if self._stepped is not None:
            return self._stepped
        return getattr(self.fleet, "_thread", None) is None

    def now(self) -> float:
        return self.fleet.clock()

    async def sleep(self, seconds: float) -> None:
        if self.stepped:
            self.fleet.advance(seconds)
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(seconds / self.fleet.speed)
        self.sync()

    def _ensure_task(self) -> None:
        """While the fleet runs by itself, reconcile in the background (rollouts keep moving)."""
        if self.stepped or (self._task is not None and not self._task.done()):
            return
        try:
            self._task = asyncio.get_running_loop().create_task(self._loop())
        except RuntimeError:
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                self.sync()
            except Exception as e:  # noqa: BLE001 - a reconcile bug must not stop the demo
                self._event("Warning", "ReconcileError", "Deployment/-", f"{type(e).__name__}: {e}")
            await asyncio.sleep(0.25)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _event(self, typ: str, reason: str, obj: str, message: str) -> None:
        self._events.append(EventInfo(self.now(), typ, reason, obj, message))
        del self._events[:-500]

    def _group_pods(self, group: str) -> list[str]:
        return [n for n in self.fleet.replica_names() if self.fleet.status(n).group == group]

    def sync(self) -> None:
        """One pass of the Deployment + ReplicaSet controllers over the simulation."""
        names = set(self.fleet.replica_names())
        for gone in self._known - names:
            self._event("Normal", "Killing", f"Pod/{gone}", "Stopping container vllm")
            self._pod_key.pop(gone, None)
        for old, new in list(self._replacing.items()):
            if old not in names or new not in names:
                self._replacing.pop(old, None)
        self._known = set(names)
        for d in self._deps.values():
            self._sync_one(d)
        self._known = set(self.fleet.replica_names())

    def _sync_one(self, d: _Deployment) -> None:
        f = self.fleet
        cur = d.current
        pods = self._group_pods(d.name)
        status = {n: f.status(n) for n in pods}
        # replacements of an abandoned revision (rolled back, or failing): drop them, the old stays
        for old, new in list(self._replacing.items()):
            if new in status and self._pod_key.get(new) != cur.key:
                f.remove_replica(new)
                self._replacing.pop(old)
                pods.remove(new)
                status.pop(new)
        replacements = set(self._replacing.values())
        outgoing = set(self._replacing)
        stale = [n for n in pods if self._pod_key.get(n) != cur.key and n not in outgoing]
        rolling = any(status[n].state == "loading" for n in replacements if n in status)
        failed_new = any(status[n].state == "failed" for n in pods if self._pod_key.get(n) == cur.key)
        # roll one replica at a time (maxSurge 1, maxUnavailable 0): no new start while one loads
        if stale and not rolling and not failed_new:
            stale.sort(key=lambda n: (status[n].state == "ready", status[n].created))
            old = stale[0]
            if status[old].state != "ready":
                f.remove_replica(old)  # a replica that never served is replaced outright
                self._event("Normal", "Killing", f"Pod/{old}", "Stopping container vllm")
            else:
                new = self._new_name(d, cur)
                f.replace_replica(old, new, cur.args, self.load_delay_s, self.grace_s)
                self._pod_key[new] = cur.key
                self._replacing[old] = new
                self._event("Normal", "ScalingReplicaSet", f"Deployment/{d.name}", f"Started {new} (revision {cur.number}) to replace {old}")
            pods = self._group_pods(d.name)
        # replica count: pods being replaced count once, through their replacement
        live = [n for n in pods if n not in self._replacing]
        if len(live) < d.desired:
            for _ in range(d.desired - len(live)):
                new = self._new_name(d, cur)
                f.add_replica(new, cur.args, d.name, self.load_delay_s)
                self._pod_key[new] = cur.key
                self._event("Normal", "ScalingReplicaSet", f"Deployment/{d.name}", f"Scaled up: started {new}")
        elif len(live) > d.desired:
            st = {n: f.status(n) for n in live}
            order = sorted(live, key=lambda n: (st[n].state == "ready", self._pod_key.get(n) == cur.key, -st[n].created))
            for n in order[: len(live) - d.desired]:
                f.remove_replica(n)
                for old, new in list(self._replacing.items()):
                    if new == n:
                        self._replacing.pop(old)
                self._event("Normal", "ScalingReplicaSet", f"Deployment/{d.name}", f"Scaled down: stopped {n}")

    def _new_name(self, d: _Deployment, rev: _Revision) -> str:
        return f"{d.name}-r{rev.number}-{next(self._names):x}"

    # ---- reads ----

    def _dep(self, namespace: str, name: str) -> _Deployment:
        d = self._deps.get(name)
        if d is None or namespace not in (self.namespace, None, ""):
            raise ClusterError("not-found", f'not found: deployments.apps "{name}" not found', 404)
        return d

    def _pod_info(self, name: str) -> PodInfo:
        st = self.fleet.status(name)
        phase, reason, code = "Running", None, None
        if st.state == "failed":
            phase, reason, code = "CrashLoopBackOff", "Error", 1
        labels = {"app": st.group, self.rotation_label: "true" if st.in_rotation else self.drain_value}
        return PodInfo(
            namespace=self.namespace or "",
            name=name,
            node=st.node,
            phase=phase,
            ready=st.state == "ready",
            restarts=1 if st.state == "failed" else 0,
            last_termination_reason=reason,
            last_exit_code=code,
            owner_kind="Deployment",
            owner_name=st.group,
            labels=labels,
            pod_ip="127.0.0.1",
        )

    async def list_pods(self, namespace: str | None = None, selector: str | None = None) -> list[PodInfo]:
        self._ensure_task()
        self.sync()
        pods = [self._pod_info(n) for n in self.fleet.replica_names()]
        if selector:
            want = dict(kv.split("=", 1) for kv in selector.split(",") if "=" in kv)
            pods = [p for p in pods if all(p.labels.get(k) == v for k, v in want.items())]
        return pods

    async def watch_pods(self, namespace: str | None = None, selector: str | None = None) -> AsyncIterator[PodEvent]:
        seen: dict[str, PodInfo] = {}
        first = True
        while True:
            now = {p.name: p for p in await self.list_pods(namespace, selector)}
            if first:
                yield PodEvent("SYNC", pods=tuple(now.values()))
                first = False
            else:
                for n, p in now.items():
                    if n not in seen:
                        yield PodEvent("ADDED", pod=p)
                    elif p != seen[n]:
                        yield PodEvent("MODIFIED", pod=p)
                for n, p in seen.items():
                    if n not in now:
                        yield PodEvent("DELETED", pod=p)
            seen = now
            await self.sleep(1.0)

    def _template(self, d: _Deployment, rev: _Revision | None = None) -> dict[str, Any]:
        return _container(d.model, (rev or d.current).args)

    def _dep_dict(self, d: _Deployment) -> dict[str, Any]:
        """The Deployment as the API server would return it (for the shared plan builders)."""
        ann = dict(d.annotations)
        ann[REVISION_ANNOTATION] = str(d.current.number)
        return {
            "metadata": {"name": d.name, "namespace": self.namespace, "resourceVersion": str(d.rv), "generation": d.generation, "annotations": ann, "uid": d.uid},
            "spec": {"replicas": d.desired, "template": {"metadata": {"labels": {"app": d.name}}, "spec": {"containers": [self._template(d)]}}},
        }

    def _info(self, d: _Deployment) -> DeploymentInfo:
        pods = self._group_pods(d.name)
        st = {n: self.fleet.status(n) for n in pods}
        ready = sum(1 for n in pods if st[n].state == "ready")
        updated = sum(1 for n in pods if self._pod_key.get(n) == d.current.key)
        complete = updated == d.desired and len(pods) == d.desired and ready == d.desired
        elapsed = self.now() - d.current.started
        if complete:
            prog = Condition("Progressing", "True", "NewReplicaSetAvailable", "the new revision has successfully progressed")
        elif elapsed > PROGRESS_DEADLINE_S:
            prog = Condition("Progressing", "False", "ProgressDeadlineExceeded", f"revision {d.current.number} has timed out progressing")
        else:
            prog = Condition("Progressing", "True", "ReplicaSetUpdated", f"revision {d.current.number} is progressing")
        avail = Condition("Available", str(ready >= d.desired), "MinimumReplicasAvailable" if ready >= d.desired else "MinimumReplicasUnavailable")
        ann = {**d.annotations, REVISION_ANNOTATION: str(d.current.number)}
        return DeploymentInfo(
            name=d.name,
            namespace=self.namespace or "",
            replicas=d.desired,
            ready=ready,
            updated=updated,
            available=ready,
            current=len(pods),
            generation=d.generation,
            observed_generation=d.generation,
            conditions=(avail, prog),
            resource_version=str(d.rv),
            containers=(container_spec(self._template(d)),),
            annotations=ann,
            revision=str(d.current.number),
            selector={"app": d.name},
            uid=d.uid,
            progress_deadline_s=int(PROGRESS_DEADLINE_S),
        )

    async def get_deployment(self, namespace: str, name: str, kind: str = "Deployment") -> DeploymentInfo:
        self._ensure_task()
        self.sync()
        return self._info(self._dep(namespace, name))

    async def list_deployments(self, namespace: str) -> list[DeploymentInfo]:
        self.sync()
        return [self._info(d) for d in self._deps.values()]

    async def rollout_status(self, namespace: str, name: str, kind: str = "Deployment") -> RolloutStatus:
        self._ensure_task()
        self.sync()
        d = self._dep(namespace, name)
        info = self._info(d)
        pods = self._group_pods(d.name)
        # pods belong to the newest revision with their template (a roll back reuses one)
        rev_of: dict[tuple[EngineArgs, str], int] = {r.key: r.number for r in d.revisions}
        by_rev: dict[int, list[str]] = {}
        for n in pods:
            by_rev.setdefault(rev_of.get(self._pod_key.get(n), 0), []).append(n)

        def rs(rev: _Revision) -> ReplicaSetInfo:
            mine = by_rev.get(rev.number, [])
            refs = []
            for n in mine:
                p = self._pod_info(n)
                st = self.fleet.status(n)
                why = "" if st.state == "ready" else ("model loading" if st.state == "loading" else sanitize(st.error or "failed"))
                refs.append(PodRef(n, p.phase or "?", bool(p.ready), p.node, why, p.restarts))
            ready = sum(1 for r in refs if r.ready)
            want = d.desired if rev is d.current else len(mine)
            line = " ".join(_container(d.model, rev.args)["args"])
            return ReplicaSetInfo(f"{d.name}-r{rev.number}", rev.number, want, ready, ready, tuple(refs), line, rev.started)

        new = rs(d.current)
        olds = tuple(rs(r) for r in d.revisions[:-1] if by_rev.get(r.number) and rev_of[r.key] == r.number)
        return compute_rollout(info, new, olds, [], self.now())

    async def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        previous: bool = False,
        tail: int = 2000,
        filtered: bool = True,
    ) -> LogLines:
        try:
            lines = [sanitize(x) for x in self.fleet.logs(pod, tail)]
        except KeyError:
            raise ClusterError("not-found", f'not found: pods "{pod}" not found', 404) from None
        if previous:
            st = self.fleet.status(pod)
            if st.state != "failed":
                raise ClusterError("not-found", f"{pod}: no previous (restarted) container to read logs from", 400)
        kept = [x for x in lines if LOG_FILTER.search(x)] if filtered else lines
        return LogLines(pod, container or "vllm", previous, tuple(kept), len(lines), filtered)

    async def events(self, namespace: str, limit: int = 200, involving: str | None = None) -> list[EventInfo]:
        self.sync()
        evs = list(self._events)
        for n in self.fleet.replica_names():
            st = self.fleet.status(n)
            if st.state == "failed":
                evs.append(EventInfo(self.now(), "Warning", "BackOff", f"Pod/{n}", sanitize(f"Back-off restarting failed container vllm: {st.error}")))
        if involving:
            evs = [e for e in evs if e.object.endswith("/" + involving)]
        evs.sort(key=lambda e: e.ts or 0.0, reverse=True)
        return evs[:limit]

    async def permissions(self, namespace: str) -> Permissions:
        return Permissions(
            namespace,
            {a: Permission(False, "read-only") if self.readonly and a in MUTATING_ACTIONS else Permission(True) for a in ACTION_VERBS},
        )

    async def list_contexts(self) -> list[ContextInfo]:
        return [ContextInfo(self.context, "simulated", self.user, self.namespace, True)]

    async def list_namespaces(self) -> list[str]:
        return [self.namespace or ""]

    def metrics_url(self, pod: PodInfo) -> str:
        return next((t.metrics_url for t in self.fleet.targets() if t.name == pod.name), "")

    async def fetch_metrics(self, pod: PodInfo, timeout: float = 5.0) -> str:
        url = self.metrics_url(pod)
        if not url:
            raise ClusterError("unreachable", f"{pod.name}: the simulated fleet is not serving")
        import httpx

        try:
            async with httpx.AsyncClient(timeout=timeout) as c:
                r = await c.get(url)
        except httpx.HTTPError as e:
            raise ClusterError("unreachable", f"{pod.name}: {type(e).__name__}") from None
        if r.status_code != 200:
            raise ClusterError("server", f"{pod.name}: /metrics returned HTTP {r.status_code}: {sanitize(r.text[:200])}", r.status_code)
        return r.text

    # ---- plans ----

    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        self.sync()
        d = self._dep(req.namespace, req.name)
        # a simulated group is always a Deployment; its GPU and engine generation are known here
        req = replace(
            req,
            kind="Deployment",
            gpu_total_bytes=req.gpu_total_bytes or d.gpu_total_bytes,
            generation="v0" if d.v0 else req.generation,
        )
        plan = build_edit_plan(self._dep_dict(d), req, **self._flags())
        if not plan.ok or not plan.data.get("changes"):
            return plan
        # The simulator knows vLLM's start-up arithmetic exactly: use it as the preflight.
        new_args = _with(d.current.args, plan.data["changes"])
        try:
            kv = self.fleet.kv_plan(new_args, d.name)
            err = kv.error
        except ValueError as e:
            kv, err = None, f"ValueError: {e}"
        if err:
            pf = A.Preflight("fail", (f"vLLM would refuse to start and the pod would crash-loop: {err}",))
            return replace(plan, preflight=pf, warnings=plan.warnings + pf.messages)
        assert kv is not None
        msg = f"KV pool {kv.kv_cache_size_tokens:,} tokens: {kv.max_concurrency:.1f} full-length ({kv.max_model_len:,}) sequences at once"
        return replace(plan, preflight=A.Preflight("ok", (msg,), None, kv.kv_cache_size_tokens))

    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan:
        d = self._dep(namespace, name)
        target = Target("Deployment", namespace, name)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            return ActionPlan("scale", target, "scale", errors=(f"replicas must be a whole number >= 0, not {replicas!r}",), **self._flags())
        ops = [{"op": "test", "path": "/spec/replicas", "value": d.desired}, {"op": "replace", "path": "/spec/replicas", "value": replicas}]
        warnings = ("each new replica loads the model for minutes before it serves",) if replicas > d.desired else ()
        return ActionPlan(
            "scale", target, f"scale {target}: {d.desired} -> {replicas} replicas", diff=f"-replicas: {d.desired}\n+replicas: {replicas}",
            patch=ops, patch_type="json", subresource="scale", warnings=warnings, data={"from": d.desired, "to": replicas}, **self._flags(),
        )

    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        d = self._dep(namespace, name)
        stamp = f"{self.now():.0f}"
        return ActionPlan(
            "restart", Target("Deployment", namespace, name), f"rollout restart deployment/{name}",
            diff=f"+kubectl.kubernetes.io/restartedAt: {stamp}",
            patch={"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": stamp}}}}},
            patch_type="merge", warnings=(f"restarts all {d.desired} replicas one by one; each reloads the model",),
            data={"resourceVersion": str(d.rv), "restarted_at": stamp}, **self._flags(),
        )

    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        d = self._dep(namespace, name)
        target = Target("Deployment", namespace, name)
        prev = next((r for r in reversed(d.revisions[:-1]) if r.key != d.current.key), None)
        if prev is None:
            return ActionPlan("rollback", target, "roll back", errors=(f"{target} has no revision before {d.current.number} with other args",), **self._flags())
        diff = A.args_diff(self._template(d), self._template(d, prev), f"deployment/{name}/vllm")
        return ActionPlan(
            "rollback", target, f"roll back {target}: revision {d.current.number} -> {prev.number}", diff=diff,
            patch=[{"op": "test", "path": "/spec/template", "value": {"args": self._template(d)["args"]}},
                   {"op": "replace", "path": "/spec/template", "value": {"args": self._template(d, prev)["args"]}}],
            patch_type="json", data={"from_revision": d.current.number, "to_revision": prev.number, "resourceVersion": str(d.rv)}, **self._flags(),
        )

    def _pod(self, namespace: str, pod: str) -> PodInfo:
        if namespace not in (self.namespace, None, "") or pod not in self.fleet.replica_names():
            raise ClusterError("not-found", f'not found: pods "{pod}" not found', 404)
        return self._pod_info(pod)

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
        steps = [
            f"1. scale deployment/{d.name} {d.desired} -> {d.desired + 1}; wait until the spare is ready",
            f"2. label pod/{pod} {key}={self.drain_value} (out of rotation)",
            "3. wait until its running + waiting reaches 0",
            f"4. delete pod/{pod} --grace-period={grace_s}",
            f"then: restore deployment/{d.name} to {d.desired} replicas (restore key)",
        ]
        return ActionPlan(
            "drain", Target("Pod", namespace, pod), f"drain pod/{pod}", diff="\n".join(steps), errors=errors,
            warnings=(f"the spare loads the model for ~{self.load_delay_s:.0f} simulated seconds",),
            data={"owner": d.name, "replicas": d.desired, "label": key, "grace_s": grace_s}, **self._flags(),
        )

    # ---- apply ----

    def _conflict(self, plan: ActionPlan, d: _Deployment) -> ActionResult | None:
        rv = plan.data.get("resourceVersion")
        if rv is not None and rv != str(d.rv):
            return ActionResult(
                False,
                f"refused: {plan.target} changed since it was read; nothing was overwritten. Review the new state and plan again",
                409,
                {"kind": "conflict", "current": self._info(d), "current_args": self._template(d)["command"] + self._template(d)["args"]},
            )
        return None

    def _new_revision(self, d: _Deployment, args: EngineArgs, cause: str, restarted_at: str = "") -> _Revision:
        rev = _Revision(max(r.number for r in d.revisions) + 1, args, cause, self.now(), restarted_at)
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
                    new_args = _with(d.current.args, plan.data["changes"])
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

    def revisions(self, name: str) -> list[dict[str, Any]]:
        """Revision history (the rollout view's `history`): number, args line, change cause."""
        d = self._deps[name]
        return [{"revision": r.number, "args": " ".join(_container(d.model, r.args)["args"]), "cause": r.cause} for r in d.revisions]

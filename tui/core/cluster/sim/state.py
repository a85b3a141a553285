"""The simulated cluster's state and controllers: Deployments with revision histories over the
simulator's replicas, one reconcile pass (`sync`) that rolls, scales and replaces replicas as the
Deployment and ReplicaSet controllers would, the simulated clock, and the API-shaped views
(`_dep_dict`, `_info`, `_pod_info`) the reads and plans share.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ...model import PodInfo
from ...sim.args import EngineArgs
from ...sim.fleet import DEFAULT_LOAD_S, SimFleet
from ..audit import AuditLog
from ..base import Cluster
from ..plans import HASH_LABEL, container_spec
from . import sglang
from ..values import REVISION_ANNOTATION, ClusterError, Condition, ContextPolicy, DeploymentInfo, EventInfo


PROGRESS_DEADLINE_S = 600.0


@dataclass
class SimRevision:
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
class SimDeployment:
    name: str
    model: str
    v0: bool
    gpu_total_bytes: int
    desired: int
    revisions: list[SimRevision]
    generation: int = 1
    rv: int = 1
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    sglang: bool = False  # its pods run SGLang (flags, container and metric names)
    scaled_at: float = 0.0  # the last scale: like the Deployment controller, it restarts the progress clock

    @property
    def current(self) -> SimRevision:
        return self.revisions[-1]


def container_for(model: str, args: EngineArgs, sglang_pods: bool = False) -> dict[str, Any]:
    """The pod template's vLLM container for `args`: explicit KV flags, as production specs have."""
    if sglang_pods:
        return sglang.container(model, args)
    cli = args.cli()
    if "--gpu-memory-utilization" not in cli:
        cli += ["--gpu-memory-utilization", str(args.gpu_memory_utilization)]
    return {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "command": ["vllm", "serve", model], "args": cli + ["--port", "8000"]}


def with_changes(args: EngineArgs, changes: Mapping[str, Any], sglang_pods: bool = False) -> EngineArgs:
    if sglang_pods:
        return replace(args, **{sglang.field_for(k): v for k, v in changes.items()})
    return replace(args, **{k.replace("-", "_"): v for k, v in changes.items()})


class SimState(Cluster):
    """The simulated Deployments, their controllers and the simulated clock."""

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
        self._deps: dict[str, SimDeployment] = {}
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
                d = self._deps[st.group] = SimDeployment(
                    st.group, model, v0, total, 0, [SimRevision(1, fleet.engine_args(name), "", now)], uid=f"sim-{st.group}",
                    sglang=bool(r.sglang),
                )
            d.desired += 1
            self._pod_key[name] = d.current.key
            self._known.add(name)
        self._task: asyncio.Task[Any] | None = None

    @property
    def stepped(self) -> bool:
        if self._stepped is not None:
            return self._stepped
        return getattr(self.fleet, "_thread", None) is None

    def now(self) -> float:
        return self.fleet.clock()

    def data_clock(self) -> float | None:
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

    def _sync_one(self, d: SimDeployment) -> None:
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

    def _new_name(self, d: SimDeployment, rev: SimRevision) -> str:
        return f"{d.name}-r{rev.number}-{next(self._names):x}"

    def _dep(self, namespace: str, name: str) -> SimDeployment:
        d = self._deps.get(name)
        if d is None or namespace not in (self.namespace, None, ""):
            raise ClusterError("not-found", f'not found: deployments.apps "{name}" not found', 404)
        return d

    def _pod(self, namespace: str, pod: str) -> PodInfo:
        if namespace not in (self.namespace, None, "") or pod not in self.fleet.replica_names():
            raise ClusterError("not-found", f'not found: pods "{pod}" not found', 404)
        return self._pod_info(pod)

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
            started_at=st.created,
        )

    def _template(self, d: SimDeployment, rev: SimRevision | None = None) -> dict[str, Any]:
        return container_for(d.model, (rev or d.current).args, d.sglang)

    def _pod_template(self, d: SimDeployment, rev: SimRevision, hashed: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"labels": {"app": d.name, **({HASH_LABEL: f"r{rev.number}"} if hashed else {})}}
        if rev.restarted_at:
            meta["annotations"] = {"kubectl.kubernetes.io/restartedAt": rev.restarted_at}
        return {"metadata": meta, "spec": {"containers": [self._template(d, rev)]}}

    def _dep_dict(self, d: SimDeployment) -> dict[str, Any]:
        """The Deployment as the API server would return it (for the shared plan builders)."""
        ann = dict(d.annotations)
        ann[REVISION_ANNOTATION] = str(d.current.number)
        return {
            "metadata": {"name": d.name, "namespace": self.namespace, "resourceVersion": str(d.rv), "generation": d.generation, "annotations": ann, "uid": d.uid},
            "spec": {"replicas": d.desired, "template": {"metadata": {"labels": {"app": d.name}}, "spec": {"containers": [self._template(d)]}}},
        }

    def _info(self, d: SimDeployment) -> DeploymentInfo:
        pods = self._group_pods(d.name)
        st = {n: self.fleet.status(n) for n in pods}
        ready = sum(1 for n in pods if st[n].state == "ready")
        updated = sum(1 for n in pods if self._pod_key.get(n) == d.current.key)
        complete = updated == d.desired and len(pods) == d.desired and ready == d.desired
        elapsed = self.now() - max(d.current.started, d.scaled_at)
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

    def revisions(self, name: str) -> list[dict[str, Any]]:
        """Revision history (the rollout view's `history`): number, args line, change cause."""
        d = self._deps[name]
        return [{"revision": r.number, "args": " ".join(container_for(d.model, r.args, d.sglang)["args"]), "cause": r.cause}
                for r in d.revisions]

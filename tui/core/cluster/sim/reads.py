"""The simulated cluster's read side: pods, Deployments, rollout status, logs, events,
permissions, contexts and /metrics, from the simulator's state."""

from __future__ import annotations

import re

from typing import Any, AsyncIterator, Mapping

from ...model import PodInfo
from ...sim.args import EngineArgs
from ...sim.replica import fmt_ts
from ..plans import compute_rollout
from ..values import (
    ACTION_VERBS,
    MUTATING_ACTIONS,
    ClusterError,
    ContextInfo,
    DeploymentInfo,
    EventInfo,
    Permission,
    Permissions,
    PodEvent,
    PodRef,
    ReplicaSetInfo,
    RolloutStatus,
    no_previous_logs,
    sanitize,
)
from .state import SimRevision, SimState, container_for


class SimReads(SimState):
    """The read side over the simulation."""

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

    async def get_deployment(self, namespace: str, name: str, kind: str = "Deployment") -> DeploymentInfo:
        self._ensure_task()
        self.sync()
        return self._info(self._dep(namespace, name))

    async def list_deployments(self, namespace: str) -> list[DeploymentInfo]:
        self.sync()
        return [self._info(d) for d in self._deps.values()]

    async def _read_pod(self, namespace: str, pod: str) -> Mapping[str, Any]:
        """The pod as the API server would return it: its revision's template, owned by that
        revision's ReplicaSet (so it resolves to its Deployment as a real pod does)."""
        self.sync()
        p = self._pod(namespace, pod)
        d = self._dep(namespace, p.owner_name or "")
        rev = next((r for r in d.revisions if r.key == self._pod_key.get(pod)), d.current)
        tmpl = self._pod_template(d, rev, hashed=True)
        meta: dict[str, Any] = {"name": pod, "namespace": p.namespace, "labels": {**tmpl["metadata"]["labels"], **p.labels}}
        if "annotations" in tmpl["metadata"]:
            meta["annotations"] = tmpl["metadata"]["annotations"]
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{d.name}-r{rev.number}",
                                    "controller": True}]
        status = {"phase": p.phase, "podIP": p.pod_ip,
                  "containerStatuses": [{"name": "vllm", "ready": p.ready, "restartCount": p.restarts}]}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": {"nodeName": p.node, **tmpl["spec"]}, "status": status}

    async def _read_owner(self, namespace: str, kind: str, name: str) -> Mapping[str, Any]:
        if kind != "Deployment":
            raise ClusterError("not-found", f"the demo has no {kind} {name}", 404)
        self.sync()
        d = self._dep(namespace, name)
        dep = self._dep_dict(d)
        dep["spec"]["template"] = self._pod_template(d, d.current)
        info = self._info(d)
        status = {"replicas": info.current, "readyReplicas": info.ready, "updatedReplicas": info.updated}
        return {"apiVersion": "apps/v1", "kind": "Deployment", **dep, "status": status}

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
            key = self._pod_key.get(n)
            by_rev.setdefault(rev_of.get(key, 0) if key is not None else 0, []).append(n)

        def rs(rev: SimRevision) -> ReplicaSetInfo:
            mine = by_rev.get(rev.number, [])
            refs = []
            for n in mine:
                p = self._pod_info(n)
                st = self.fleet.status(n)
                why = "" if st.state == "ready" else ("model loading" if st.state == "loading" else sanitize(st.error or "failed"))
                refs.append(PodRef(n, p.phase or "?", bool(p.ready), p.node, why, p.restarts))
            ready = sum(1 for r in refs if r.ready)
            want = d.desired if rev is d.current else len(mine)
            line = " ".join(container_for(d.model, rev.args, d.sglang)["args"])
            return ReplicaSetInfo(f"{d.name}-r{rev.number}", rev.number, want, ready, ready, tuple(refs), line, rev.started)

        new = rs(d.current)
        olds = tuple(rs(r) for r in d.revisions[:-1] if by_rev.get(r.number) and rev_of[r.key] == r.number)
        return compute_rollout(info, new, olds, [], self.now())

    async def _log_lines(
        self, namespace: str, pod: str, container: str | None, previous: bool, tail: int,
        since_s: float | None = None,
    ) -> tuple[str | None, list[str]]:
        try:
            lines = list(self.fleet.logs(pod, tail))
            if since_s is not None:
                lines = lines_since(lines, self.fleet.clock() - since_s, self.fleet.clock())
        except KeyError:
            raise ClusterError("not-found", f'not found: pods "{pod}" not found', 404) from None
        if previous and self.fleet.status(pod).state != "failed":
            raise no_previous_logs(pod)
        return container or "vllm", lines

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


_STAMP = re.compile(r"\b(\d\d-\d\d \d\d:\d\d:\d\d)\b")


def lines_since(lines: list[str], cut: float, now: float) -> list[str]:
    """The simulated log's lines stamped at or after `cut` (as the API server's sinceSeconds).
    Stamps are "MM-DD HH:MM:SS" (vLLM's, in UTC on the simulated clock); a line without one (a
    traceback's) goes with the line before it. A stamp after `now` is last year's."""
    low, high = fmt_ts(cut), fmt_ts(now)
    out: list[str] = []
    keep = False
    for line in lines:
        m = _STAMP.search(line)
        if m is not None:
            stamp = m.group(1)
            keep = low <= stamp <= high if low <= high else (stamp >= low or stamp <= high)
        if keep:
            out.append(line)
    return out

"""The Kubernetes adapter's read side: pods, workloads, rollout status, logs, events, RBAC,
contexts, namespaces and /metrics. Nothing here changes the cluster.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as _dt
import math
from typing import Any, Mapping

from ...model import PodInfo
from ..plans import (
    GPU_RESOURCES,
    HASH_LABEL,
    compute_rollout,
    containers_of,
    deployment_info,
    pending_reason,
    pod_ref,
    selector_string,
    ts,
    vllm_index,
)
from ..rollout import daemonset_rollout, statefulset_rollout
from ..values import (
    ACTION_VERBS,
    MUTATING_ACTIONS,
    REVISION_ANNOTATION,
    WRITE_VERBS,
    ClusterError,
    ContextInfo,
    DeploymentInfo,
    EventInfo,
    Permission,
    Permissions,
    ReplicaSetInfo,
    RolloutStatus,
    no_previous_logs,
    sanitize,
)
from .transport import KubeTransport


class KubeReads(KubeTransport):
    """The read side over the API server."""

    async def list_pods(self, namespace: str | None = None, selector: str | None = None) -> list[PodInfo]:
        sel = selector if selector is not None else self.selector
        kw = {"label_selector": sel} if sel else {}
        if self.all_namespaces and namespace is None:
            data = await self._list(self.core.list_pod_for_all_namespaces, **kw)
        else:
            data = await self._list(self.core.list_namespaced_pod, self._ns(namespace), **kw)
        return [self._to_info(p) for p in data.get("items") or [] if self._keep(p, sel)]

    def metrics_url(self, pod: PodInfo) -> str:
        port = self._ports.get((pod.namespace, pod.name), self.port or 8000)
        if self.via == "direct":
            ip = pod.pod_ip or ""
            host = f"[{ip}]" if ":" in ip else ip
            return f"http://{host}:{port}/metrics"
        return f"{self.host.rstrip('/')}/api/v1/namespaces/{pod.namespace}/pods/{pod.name}:{port}/proxy/metrics"

    async def fetch_metrics(self, pod: PodInfo, timeout: float = 5.0) -> str:
        """The pod's /metrics page, through the API server's pod proxy or from the pod IP."""
        port = self._ports.get((pod.namespace, pod.name), self.port or 8000)
        if self.via == "direct":
            if not pod.pod_ip:
                raise ClusterError("unreachable", f"{pod.name} has no pod IP yet")
            import httpx

            try:
                async with httpx.AsyncClient(timeout=timeout) as c:
                    r = await c.get(self.metrics_url(pod))
            except httpx.TimeoutException:
                raise ClusterError("timeout", f"{pod.name}: /metrics timed out") from None
            except httpx.HTTPError as e:
                raise ClusterError("unreachable", f"{pod.name}: {type(e).__name__}") from None
            if r.status_code != 200:
                raise ClusterError("server", f"{pod.name}: /metrics returned HTTP {r.status_code}", r.status_code)
            return r.text
        text: str = await self._call(
            self.core.connect_get_namespaced_pod_proxy_with_path,
            f"{pod.name}:{port}",
            pod.namespace,
            "metrics",
            _text=True,
            _request_timeout=timeout,
            _pool=self._scrape_pool,  # as many threads as the budget lets requests be open: none waits here
        )
        return text

    async def get_deployment(self, namespace: str, name: str, kind: str = "Deployment") -> DeploymentInfo:
        return deployment_info(await self._read_workload(namespace, name, kind), kind)

    async def list_deployments(self, namespace: str) -> list[DeploymentInfo]:
        data = await self._call(self.apps.list_namespaced_deployment, self._ns(namespace))
        return [deployment_info(d) for d in data.get("items") or []]

    async def _read_pod(self, namespace: str, pod: str) -> Mapping[str, Any]:
        obj: dict[str, Any] = await self._call(self.core.read_namespaced_pod, pod, self._ns(namespace))
        return obj

    async def _read_owner(self, namespace: str, kind: str, name: str) -> Mapping[str, Any]:
        return await self._read_workload(self._ns(namespace), name, kind)  # Deployments and StatefulSets

    async def _replica_sets(self, dep: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = dep.get("metadata") or {}
        sel = selector_string(((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        data = await self._call(self.apps.list_namespaced_replica_set, meta.get("namespace"), label_selector=sel)
        uid = meta.get("uid")
        out = []
        for rs in data.get("items") or []:
            refs = (rs.get("metadata") or {}).get("ownerReferences") or []
            if uid and refs and not any(r.get("uid") == uid for r in refs):
                continue
            out.append(rs)
        out.sort(key=lambda r: int(((r.get("metadata") or {}).get("annotations") or {}).get(REVISION_ANNOTATION, 0) or 0))
        return out

    async def rollout_status(self, namespace: str, name: str, kind: str = "Deployment") -> RolloutStatus:
        if kind == "DaemonSet":
            return daemonset_rollout(await self._call(self.apps.read_namespaced_daemon_set, name, namespace))
        dep = await self._read_workload(namespace, name, kind)
        info = deployment_info(dep, kind)
        sel = selector_string(info.selector)
        pods_data = await self._call(self.core.list_namespaced_pod, namespace, label_selector=sel) if sel else {"items": []}
        pods = pods_data.get("items") or []
        if kind != "Deployment":
            return self._sts_status(dep, info, pods)
        rss = await self._replica_sets(dep)
        template = copy.deepcopy((dep.get("spec") or {}).get("template") or {})
        new_rs = None
        for rs in rss:
            t = copy.deepcopy((rs.get("spec") or {}).get("template") or {})
            ((t.get("metadata") or {}).get("labels") or {}).pop(HASH_LABEL, None)
            if t == template or (info.revision and (rs["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) == info.revision):
                new_rs = rs
        now = _dt.datetime.now(_dt.timezone.utc).timestamp()

        def rs_info(rs: Mapping[str, Any]) -> ReplicaSetInfo:
            m = rs.get("metadata") or {}
            st = rs.get("status") or {}
            h = (m.get("labels") or {}).get(HASH_LABEL)
            mine = [p for p in pods if (p.get("metadata", {}).get("labels") or {}).get(HASH_LABEL) == h]
            cs = containers_of(((rs.get("spec") or {}).get("template") or {}).get("spec") or {})
            vi = vllm_index(cs)
            line = " ".join(str(x) for x in (cs[vi].get("command") or []) + (cs[vi].get("args") or [])) if vi is not None else ""
            return ReplicaSetInfo(
                name=str(m.get("name")),
                revision=int((m.get("annotations") or {}).get(REVISION_ANNOTATION, 0) or 0),
                replicas=int((rs.get("spec") or {}).get("replicas") or 0),
                ready=int(st.get("readyReplicas") or 0),
                available=int(st.get("availableReplicas") or 0),
                pods=tuple(pod_ref(p) for p in mine),
                args_line=sanitize(line),
                created=ts(m.get("creationTimestamp")),
            )

        new_info = rs_info(new_rs) if new_rs else None
        old_infos = tuple(rs_info(r) for r in rss if r is not new_rs and ((r.get("spec") or {}).get("replicas") or (r.get("status") or {}).get("replicas")))
        st = compute_rollout(info, new_info, old_infos, pods, now)
        if (dep.get("spec") or {}).get("paused") and st.state != "done":
            # a paused Deployment does not roll out until resumed; its progress deadline is not checked meanwhile
            st = dataclasses.replace(st, reason=f"paused (kubectl rollout resume continues it): {st.reason}")
        return st

    def _sts_status(self, sts: Mapping[str, Any], info: DeploymentInfo, pods: list[dict[str, Any]]) -> RolloutStatus:
        return statefulset_rollout(sts, pods)

    async def _log_lines(
        self, namespace: str, pod: str, container: str | None, previous: bool, tail: int,
        since_s: float | None = None,
    ) -> tuple[str | None, list[str]]:
        if container is None:
            p = await self._call(self.core.read_namespaced_pod, pod, namespace)
            cs = containers_of(p.get("spec") or {})
            vi = vllm_index(cs)
            container = cs[vi].get("name") if vi is not None else (cs[0].get("name") if cs else None)
        kw: dict[str, Any] = {"tail_lines": tail, "previous": previous}
        if since_s is not None:  # the API server cuts the log: a huge one is never sent whole
            kw["since_seconds"] = max(1, math.ceil(since_s))
        if container:
            kw["container"] = container
        try:
            text = await self._call(self.core.read_namespaced_pod_log, pod, namespace, _text=True, **kw)
        except ClusterError as e:
            if previous and e.status == 400:
                raise no_previous_logs(pod) from None
            raise
        return container, text.splitlines()

    async def events(self, namespace: str, limit: int = 200, involving: str | None = None) -> list[EventInfo]:
        kw: dict[str, Any] = {"field_selector": f"involvedObject.name={involving}"} if involving else {}
        data = await self._call(self.core.list_namespaced_event, self._ns(namespace), **kw)
        out = []
        for e in data.get("items") or []:
            series = e.get("series") or {}
            stamps = [
                ts(series.get("lastObservedTime")),
                ts(e.get("lastTimestamp")),
                ts(e.get("eventTime")),
                ts(e.get("firstTimestamp")),
                ts((e.get("metadata") or {}).get("creationTimestamp")),
            ]
            when = next((s for s in stamps if s is not None), None)
            obj = e.get("involvedObject") or e.get("regarding") or {}
            out.append(
                EventInfo(
                    when,
                    str(e.get("type") or ""),
                    sanitize(str(e.get("reason") or "")),
                    sanitize(f"{obj.get('kind', '')}/{obj.get('name', '')}"),
                    sanitize(str(e.get("message") or e.get("note") or "")),
                    int(e.get("count") or series.get("count") or 1),
                )
            )
        out.sort(key=lambda ev: ev.ts or 0.0, reverse=True)
        return out[:limit]

    async def _review(self, namespace: str, verb: str, group: str, resource: str, sub: str) -> Permission:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                    "subresource": sub,
                }
            },
        }
        try:
            res = await self._call(self.authz.create_self_subject_access_review, body)
        except ClusterError as e:
            return Permission(False, f"cannot check {verb} {resource}: {e.message}")
        st = res.get("status") or {}
        what = f"{verb} {resource}{'/' + sub if sub else ''}"
        if st.get("allowed"):
            return Permission(True, "")
        why = sanitize(str(st.get("reason") or st.get("evaluationError") or ""))
        return Permission(False, f"RBAC does not allow {what}" + (f" ({why})" if why else ""))

    async def may(self, namespace: str, action: str, kind: str | None = None) -> Permission:
        """Whether RBAC lets this user do one action (its verbs only, SelfSubjectAccessReview),
        asked before any write so a denied one sends none. Never asked under read-only."""
        if self.readonly:
            return Permission(False, "read-only")
        verbs = ACTION_VERBS.get(f"{action}/{kind}") or ACTION_VERBS.get(action) or ()
        results = await asyncio.gather(*(self._review(self._ns(namespace), *v) for v in verbs))
        return next((r for r in results if not r.allowed), Permission(True))

    async def permissions(self, namespace: str) -> Permissions:
        """Which keys this user may use here, checked with SelfSubjectAccessReview per verb.

        Read-only: mutating actions are denied without asking the API server."""
        ns = self._ns(namespace)

        def refused(action: str, verbs: tuple[Any, ...]) -> bool:
            return self.readonly and (action in MUTATING_ACTIONS or any(v[0] in WRITE_VERBS for v in verbs))

        checks: dict[tuple[str, str, str, str], Permission] = {}
        wanted = {v for action, verbs in ACTION_VERBS.items() if not refused(action, verbs) for v in verbs}
        results = await asyncio.gather(*(self._review(ns, *v) for v in sorted(wanted)))
        checks = dict(zip(sorted(wanted), results, strict=True))
        out: dict[str, Permission] = {}
        for action, verbs in ACTION_VERBS.items():
            if refused(action, verbs):
                out[action] = Permission(False, "read-only")
                continue
            denied = [checks[v] for v in verbs if not checks[v].allowed]
            out[action] = denied[0] if denied else Permission(True)
        return Permissions(ns, out)

    async def list_contexts(self) -> list[ContextInfo]:
        from kubernetes import config

        def read() -> list[ContextInfo]:
            try:
                contexts, active = config.list_kube_config_contexts(config_file=self.kubeconfig)
            except Exception as e:  # noqa: BLE001 - no kubeconfig (in-cluster) or a broken one
                raise ClusterError("bad-input", f"cannot read kubeconfig: {type(e).__name__}") from None
            cur = (active or {}).get("name")
            return [
                ContextInfo(
                    c["name"],
                    str((c.get("context") or {}).get("cluster") or ""),
                    str((c.get("context") or {}).get("user") or ""),
                    (c.get("context") or {}).get("namespace"),
                    c["name"] == cur,
                )
                for c in contexts
            ]

        return await asyncio.to_thread(read)

    async def list_namespaces(self) -> list[str]:
        data = await self._call(self.core.list_namespace)
        return sorted(str((n.get("metadata") or {}).get("name")) for n in data.get("items") or [])

    async def spare_pending(self, namespace: str, owner: str) -> str | None:
        try:
            dep = await self._read_workload(namespace, owner, "Deployment")
            sel = selector_string(((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
            pods = await self._call(self.core.list_namespaced_pod, namespace, label_selector=sel)
        except ClusterError:
            return None
        for p in pods.get("items") or []:
            why = pending_reason(p)
            if why:
                gpu = next((g for g in GPU_RESOURCES if g in why), None)
                return f"{p['metadata']['name']} Pending: {why}" + (f" (no free {gpu})" if gpu else "")
        return None

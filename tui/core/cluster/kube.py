"""`Cluster` over a real API server with the official `kubernetes` client.

The client is synchronous; every call runs in a worker thread (`asyncio.to_thread`) and comes back
as plain dicts (`_preload_content=False`), so unknown fields survive a read-modify-write (roll back
patches a whole pod template) and nothing depends on the client's model classes. Credentials come
from kubeconfig or the in-cluster service account only, and no message built here contains them.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import json
import os
import socket
import threading
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

from ..model import PodInfo
from . import args as A
from .audit import AuditLog
from .base import (
    ACTION_VERBS,
    LOG_FILTER,
    MUTATING_ACTIONS,
    RESTARTED_AT_ANNOTATION,
    REVISION_ANNOTATION,
    ActionPlan,
    ActionResult,
    Cluster,
    ClusterError,
    ContextInfo,
    ContextPolicy,
    DeploymentInfo,
    EditArgsRequest,
    EventInfo,
    LogLines,
    Permission,
    Permissions,
    PodEvent,
    ReplicaSetInfo,
    RolloutStatus,
    Target,
    policy_for,
    sanitize,
)
from .plans import (
    DEFAULT_ROTATION_LABEL,
    GPU_RESOURCES,
    HASH_LABEL,
    ROTATION_ANNOTATION,
    build_edit_plan,
    build_rollback_plan,
    compute_rollout,
    containers_of,
    deployment_info,
    esc,
    grace_warnings,
    metrics_port,
    owner_of,
    pending_reason,
    pod_info,
    pod_ref,
    selector_string,
    ts,
    vllm_index,
)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


# --------------------------------------------------------------------------------------------
# Error mapping


def _status_message(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            data = json.loads(body)
            if isinstance(data, Mapping) and data.get("message"):
                return sanitize(str(data["message"]))[:500]
        except ValueError:
            return sanitize(body.strip().splitlines()[0])[:200] if body.strip() else ""
    return ""


def map_error(exc: BaseException, host: str = "") -> ClusterError:
    """Any failure of a client call -> a ClusterError with a message for the SRE."""
    from kubernetes.client.exceptions import ApiException
    from urllib3 import exceptions as u3

    if isinstance(exc, ClusterError):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status or 0
        msg = _status_message(exc.body) or (exc.reason or "")
        if status == 401:
            return ClusterError("unauthorized", "unauthorized: the API server rejected the credentials (expired token?)", 401)
        if status == 403:
            return ClusterError("forbidden", f"forbidden: {msg or 'RBAC denies this'}", 403)
        if status == 404:
            return ClusterError("not-found", f"not found: {msg or 'no such object'}", 404)
        if status == 409:
            return ClusterError("conflict", f"conflict: {msg or 'the object was modified'}", 409)
        if status == 422:
            kind = "conflict" if "test" in msg.lower() else "invalid"
            return ClusterError(kind, f"rejected: {msg or 'invalid request'}", 422)
        if status == 429:
            return ClusterError("server", "throttled by the API server (429); retry shortly", 429)
        if status >= 500:
            return ClusterError("server", f"API server error {status}: {msg or exc.reason or 'internal error'}", status)
        return ClusterError("error", f"API error {status}: {msg or exc.reason}", status or None)
    where = f" ({host})" if host else ""
    if isinstance(exc, u3.MaxRetryError):
        reason = exc.reason
        # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: refused is not a timeout
        if isinstance(reason, u3.NewConnectionError):
            return ClusterError("unreachable", f"API server unreachable{where}")
        if isinstance(reason, (u3.ReadTimeoutError, u3.ConnectTimeoutError)):
            return ClusterError("timeout", f"API server timed out{where}")
        if isinstance(reason, u3.SSLError):
            return ClusterError("unreachable", f"TLS error talking to the API server{where}")
        return ClusterError("unreachable", f"API server unreachable{where}")
    if isinstance(exc, u3.NewConnectionError):
        return ClusterError("unreachable", f"API server unreachable{where}")
    if isinstance(exc, (u3.ReadTimeoutError, u3.ConnectTimeoutError, socket.timeout, TimeoutError)):
        return ClusterError("timeout", f"API server timed out{where}")
    if isinstance(exc, (u3.ProtocolError, u3.NewConnectionError, ConnectionError)):
        return ClusterError("unreachable", f"API server connection lost{where}")
    if isinstance(exc, u3.HTTPError):
        return ClusterError("unreachable", f"HTTP error talking to the API server{where}: {type(exc).__name__}")
    return ClusterError("error", f"unexpected error: {type(exc).__name__}: {sanitize(str(exc))[:200]}")


# --------------------------------------------------------------------------------------------


class KubeCluster(Cluster):
    kind = "kubernetes"

    def __init__(
        self,
        api_client: Any,
        *,
        context: str = "",
        user: str = "",
        namespace: str = "default",
        all_namespaces: bool = False,
        selector: str | None = None,
        port: int | None = None,
        via: str = "proxy",
        readonly: bool = False,
        policy: ContextPolicy | None = None,
        policy_config: Any = None,  # kvwatch's Config, or a {"contexts": {...}} mapping
        audit: AuditLog | None = None,
        request_timeout: float = 10.0,
        watch_timeout_s: int = 60,
        kubeconfig: str | None = None,
        rotation_label: str | None = None,
        drain_value: str = "draining",
    ) -> None:
        if via not in ("proxy", "direct"):
            raise ClusterError("bad-input", f"--via must be proxy or direct, not {via!r}")
        super().__init__(
            context=context,
            user=user,
            namespace=namespace,
            readonly=readonly,
            policy=policy or policy_for(context, policy_config),
            audit=audit,
        )
        from kubernetes import client

        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.authz = client.AuthorizationV1Api(api_client)
        self.host = str(getattr(api_client.configuration, "host", "") or "")
        self.all_namespaces = all_namespaces
        self.selector = selector
        self.port = port
        self.via = via
        self.policy_config = policy_config
        self.request_timeout = request_timeout
        self.watch_timeout_s = watch_timeout_s
        self.kubeconfig = kubeconfig
        self.rotation_label = rotation_label
        self.drain_value = drain_value
        self._ports: dict[tuple[str, str], int] = {}

    # ---- construction ----

    @classmethod
    def connect(
        cls,
        *,
        context: str | None = None,
        kubeconfig: str | None = None,
        namespace: str | None = None,
        in_cluster: bool | None = None,
        **kw: Any,
    ) -> "KubeCluster":
        """From kubeconfig (KUBECONFIG / ~/.kube/config) or, inside a pod, the service account."""
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        cfg = client.Configuration()
        user = ""
        ctx_name = context or ""
        ns = namespace
        try:
            use_incluster = in_cluster
            if use_incluster is None:
                use_incluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not (
                    kubeconfig or os.environ.get("KUBECONFIG") or os.path.exists(os.path.expanduser("~/.kube/config"))
                )
            if use_incluster:
                config.load_incluster_config(client_configuration=cfg)
                ctx_name = ctx_name or "in-cluster"
                user = "serviceaccount"
                if ns is None:
                    try:
                        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
                            ns = f.read().strip()
                    except OSError:
                        ns = None
            else:
                contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
                chosen = next((c for c in contexts if c["name"] == context), None) if context else active
                if context and chosen is None:
                    raise ClusterError("bad-input", f"no context {context!r} in kubeconfig")
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
                if chosen:
                    ctx_name = chosen["name"]
                    user = str((chosen.get("context") or {}).get("user") or "")
                    ns = ns or (chosen.get("context") or {}).get("namespace")
        except ClusterError:
            raise
        except (ConfigException, OSError, ValueError, TypeError) as e:
            # the message names files and fields, never their contents
            raise ClusterError("bad-input", f"cannot load Kubernetes config: {type(e).__name__}: {sanitize(str(e).splitlines()[0] if str(e) else '')[:200]}") from None
        cfg.retries = 1
        return cls(client.ApiClient(cfg), context=ctx_name, user=user, namespace=ns or "default", kubeconfig=kubeconfig, **kw)

    def with_namespace(self, namespace: str | None, all_namespaces: bool = False) -> "KubeCluster":
        other = copy.copy(self)
        other.namespace = namespace or self.namespace
        other.all_namespaces = all_namespaces
        return other

    def with_context(self, context: str) -> "KubeCluster":
        return KubeCluster.connect(
            context=context,
            kubeconfig=self.kubeconfig,
            selector=self.selector,
            port=self.port,
            via=self.via,
            readonly=self._readonly_flag,
            policy_config=self.policy_config,
            audit=self.audit,
            request_timeout=self.request_timeout,
            rotation_label=self.rotation_label,
            drain_value=self.drain_value,
        )

    # ---- calls ----

    def _sync(self, fn: Callable[..., Any], args: tuple, kw: dict, text: bool = False) -> Any:
        kw.setdefault("_request_timeout", self.request_timeout)
        kw["_preload_content"] = False
        try:
            resp = fn(*args, **kw)
            data = resp.data
        except Exception as e:  # noqa: BLE001 - mapped to one typed error
            raise map_error(e, self.host) from None
        if text:
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise ClusterError("server", "API server sent a response that is not JSON") from None

    async def _call(self, fn: Callable[..., Any], *args: Any, _text: bool = False, **kw: Any) -> Any:
        return await asyncio.to_thread(self._sync, fn, args, kw, _text)

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace or "default"

    def _workload(self, kind: str) -> tuple[Callable, Callable, Callable, Callable]:
        if kind == "Deployment":
            return (
                self.apps.read_namespaced_deployment,
                self.apps.patch_namespaced_deployment,
                self.apps.read_namespaced_deployment_scale,
                self.apps.patch_namespaced_deployment_scale,
            )
        if kind == "StatefulSet":
            return (
                self.apps.read_namespaced_stateful_set,
                self.apps.patch_namespaced_stateful_set,
                self.apps.read_namespaced_stateful_set_scale,
                self.apps.patch_namespaced_stateful_set_scale,
            )
        raise ClusterError("bad-input", f"kvwatch manages Deployments and StatefulSets, not {kind}")

    async def _read_workload(self, namespace: str, name: str, kind: str) -> dict:
        return await self._call(self._workload(kind)[0], name, namespace)

    # ---- discovery ----

    def _keep(self, pod: Mapping[str, Any], selector: str | None) -> bool:
        if selector:
            return True
        return any(A.is_vllm_container(c) for c in containers_of(pod.get("spec") or {}))

    def _to_info(self, pod: Mapping[str, Any]) -> PodInfo:
        info = pod_info(pod)
        self._ports[(info.namespace, info.name)] = self.port or metrics_port(pod)
        return info

    async def list_pods(self, namespace: str | None = None, selector: str | None = None) -> list[PodInfo]:
        sel = selector if selector is not None else self.selector
        kw = {"label_selector": sel} if sel else {}
        if self.all_namespaces and namespace is None:
            data = await self._call(self.core.list_pod_for_all_namespaces, **kw)
        else:
            data = await self._call(self.core.list_namespaced_pod, self._ns(namespace), **kw)
        return [self._to_info(p) for p in data.get("items") or [] if self._keep(p, sel)]

    async def watch_pods(self, namespace: str | None = None, selector: str | None = None) -> AsyncIterator[PodEvent]:
        """Pod changes as they happen: a SYNC with the full list, then ADDED/MODIFIED/DELETED.

        A new SYNC follows every re-list (expired resourceVersion, API server restart), so the
        consumer can drop pods it did not see again. Errors come as ERROR events, never raised.
        """
        from kubernetes.watch.watch import iter_resp_lines

        sel = selector if selector is not None else self.selector
        ns = None if (self.all_namespaces and namespace is None) else self._ns(namespace)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[PodEvent] = asyncio.Queue()
        stop = threading.Event()
        current: dict[str, Any] = {}

        def emit(ev: PodEvent) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, ev)
            except RuntimeError:  # loop closed
                stop.set()

        def list_fn(**kw: Any) -> Any:
            if sel:
                kw["label_selector"] = sel
            if ns is None:
                return self.core.list_pod_for_all_namespaces(**kw)
            return self.core.list_namespaced_pod(ns, **kw)

        def run() -> None:
            rv: str | None = None
            backoff = 0.5
            known: set[tuple[str, str]] = set()
            while not stop.is_set():
                try:
                    if rv is None:
                        data = self._sync(list_fn, (), {})
                        rv = str((data.get("metadata") or {}).get("resourceVersion") or "")
                        pods = [p for p in data.get("items") or [] if self._keep(p, sel)]
                        infos = tuple(self._to_info(p) for p in pods)
                        known = {(i.namespace, i.name) for i in infos}
                        emit(PodEvent("SYNC", pods=infos))
                    resp = list_fn(
                        watch=True,
                        resource_version=rv,
                        timeout_seconds=self.watch_timeout_s,
                        allow_watch_bookmarks=True,
                        _preload_content=False,
                        _request_timeout=(self.request_timeout, self.watch_timeout_s + 5),
                    )
                    current["resp"] = resp
                    for line in iter_resp_lines(resp):
                        if stop.is_set():
                            break
                        ev = json.loads(line)
                        typ, obj = ev.get("type"), ev.get("object") or {}
                        if typ == "ERROR":
                            if obj.get("code") == 410:
                                rv = None  # expired: re-list
                                break
                            emit(PodEvent("ERROR", message=f"watch: {sanitize(str(obj.get('message') or obj))[:200]}"))
                            rv = None
                            stop.wait(backoff)
                            backoff = min(backoff * 2, 30.0)
                            break
                        new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if new_rv:
                            rv = str(new_rv)
                        backoff = 0.5
                        if typ == "BOOKMARK":
                            continue
                        key = ((obj.get("metadata") or {}).get("namespace"), (obj.get("metadata") or {}).get("name"))
                        if typ != "DELETED" and not self._keep(obj, sel):
                            continue
                        if typ == "DELETED" and key not in known:
                            continue
                        info = self._to_info(obj)
                        if typ == "DELETED":
                            known.discard(key)
                            self._ports.pop(key, None)
                        else:
                            known.add(key)
                        emit(PodEvent(str(typ), pod=info))
                except ClusterError as e:
                    emit(PodEvent("ERROR", message=e.message))
                    rv = None
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 30.0)
                except Exception as e:  # noqa: BLE001 - a watch thread must not die silently
                    if stop.is_set():
                        break
                    emit(PodEvent("ERROR", message=map_error(e, self.host).message))
                    rv = None
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 30.0)
                finally:
                    r = current.pop("resp", None)
                    if r is not None:
                        try:
                            r.release_conn()
                        except Exception:  # noqa: BLE001
                            pass

        thread = threading.Thread(target=run, name="kvwatch-pod-watch", daemon=True)
        thread.start()
        try:
            while True:
                yield await queue.get()
        finally:
            stop.set()
            r = current.get("resp")
            if r is not None:
                try:
                    r.shutdown() if hasattr(r, "shutdown") else r.close()
                except Exception:  # noqa: BLE001 - unblocks the reader thread
                    pass

    def metrics_url(self, pod: PodInfo) -> str:
        port = self._ports.get((pod.namespace, pod.name), self.port or 8000)
        if self.via == "direct":
            ip = pod.pod_ip or ""
            host = f"[{ip}]" if ":" in ip else ip
            return f"http://{host}:{port}/metrics"
        return f"{self.host.rstrip('/')}/api/v1/namespaces/{pod.namespace}/pods/{pod.name}:{port}/proxy/metrics"

    async def exec_in_pod(self, namespace: str, pod: str, container: str | None, argv: Sequence[str]) -> str:
        """Run a read-only command (nvidia-smi) in a pod through the exec API; its stdout+stderr.

        pods/exec is a `create` verb, so it is refused under --readonly like any other write."""
        if self.readonly:
            raise ClusterError("readonly", "read-only: pods/exec (in-pod nvidia-smi) is not sent")
        from kubernetes.stream import stream

        kw: dict[str, Any] = {"command": list(argv), "stderr": True, "stdin": False, "stdout": True, "tty": False}
        if container:
            kw["container"] = container

        def run() -> str:
            return stream(self.core.connect_get_namespaced_pod_exec, pod, namespace, **kw)

        try:
            return await asyncio.to_thread(run)
        except Exception as e:  # noqa: BLE001 - the transport's failure becomes the sampler's message
            raise ClusterError("server", f"exec in {pod}: {type(e).__name__}: {sanitize(str(e))[:160]}") from None

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
        return await self._call(
            self.core.connect_get_namespaced_pod_proxy_with_path,
            f"{pod.name}:{port}",
            pod.namespace,
            "metrics",
            _text=True,
            _request_timeout=timeout,
        )

    # ---- workloads ----

    async def get_deployment(self, namespace: str, name: str, kind: str = "Deployment") -> DeploymentInfo:
        return deployment_info(await self._read_workload(namespace, name, kind), kind)

    async def list_deployments(self, namespace: str) -> list[DeploymentInfo]:
        data = await self._call(self.apps.list_namespaced_deployment, self._ns(namespace))
        return [deployment_info(d) for d in data.get("items") or []]

    async def _replica_sets(self, dep: Mapping[str, Any]) -> list[dict]:
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
        return compute_rollout(info, new_info, old_infos, pods, now)

    def _sts_status(self, sts: Mapping[str, Any], info: DeploymentInfo, pods: list[dict]) -> RolloutStatus:
        st = sts.get("status") or {}
        refs = tuple(pod_ref(p) for p in pods)
        pending = [pending_reason(p) for p in pods]
        pending = [p for p in pending if p]
        if info.generation > info.observed_generation:
            state, reason = "progressing", "waiting for the StatefulSet spec update to be observed"
        elif pending:
            state, reason = "stuck", f"pods cannot be scheduled: {pending[0]}"
        elif st.get("currentRevision") == st.get("updateRevision") and info.ready >= info.replicas:
            state, reason = "done", f"{info.ready}/{info.replicas} ready"
        else:
            state, reason = "progressing", f"{info.updated}/{info.replicas} updated, {info.ready} ready"
        rs = ReplicaSetInfo(str(st.get("updateRevision") or ""), 0, info.replicas, info.ready, info.available, refs)
        return RolloutStatus(state, reason, info.replicas, info.updated, info.ready, info.available, info.current, info.generation, info.observed_generation, rs, (), None, info.conditions)

    # ---- logs, events, RBAC, contexts ----

    async def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        previous: bool = False,
        tail: int = 2000,
        filtered: bool = True,
    ) -> LogLines:
        if container is None:
            p = await self._call(self.core.read_namespaced_pod, pod, namespace)
            cs = containers_of(p.get("spec") or {})
            vi = vllm_index(cs)
            container = cs[vi].get("name") if vi is not None else (cs[0].get("name") if cs else None)
        kw: dict[str, Any] = {"tail_lines": tail, "previous": previous}
        if container:
            kw["container"] = container
        try:
            text = await self._call(self.core.read_namespaced_pod_log, pod, namespace, _text=True, **kw)
        except ClusterError as e:
            if previous and e.status == 400:
                raise ClusterError("not-found", f"{pod}: no previous (restarted) container to read logs from", 400) from None
            raise
        lines = [sanitize(ln) for ln in text.splitlines()]
        kept = [ln for ln in lines if LOG_FILTER.search(ln)] if filtered else lines
        return LogLines(pod, container, previous, tuple(kept), len(lines), filtered)

    async def events(self, namespace: str, limit: int = 200, involving: str | None = None) -> list[EventInfo]:
        kw = {"field_selector": f"involvedObject.name={involving}"} if involving else {}
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

    async def permissions(self, namespace: str) -> Permissions:
        """Which keys this user may use here, checked with SelfSubjectAccessReview per verb.

        Read-only: mutating actions are denied without asking the API server."""
        ns = self._ns(namespace)
        checks: dict[tuple[str, str, str, str], Permission] = {}
        wanted = {v for action, verbs in ACTION_VERBS.items() if not (self.readonly and action in MUTATING_ACTIONS) for v in verbs}
        results = await asyncio.gather(*(self._review(ns, *v) for v in sorted(wanted)))
        checks = dict(zip(sorted(wanted), results))
        out: dict[str, Permission] = {}
        for action, verbs in ACTION_VERBS.items():
            if self.readonly and action in MUTATING_ACTIONS:
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

    # ---- plans ----

    async def plan_edit_args(self, req: EditArgsRequest) -> ActionPlan:
        dep = await self._read_workload(req.namespace, req.name, req.kind)
        return build_edit_plan(dep, req, **self._flags())

    async def plan_scale(self, namespace: str, name: str, replicas: int, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            return ActionPlan("scale", target, "scale", errors=(f"replicas must be a whole number >= 0, not {replicas!r}",), **self._flags())
        scale = await self._call(self._workload(kind)[2], name, namespace)
        cur = int((scale.get("spec") or {}).get("replicas") or 0)
        ops = [
            {"op": "test", "path": "/spec/replicas", "value": cur},
            {"op": "replace", "path": "/spec/replicas", "value": replicas},
        ]
        warnings = []
        if replicas > cur:
            warnings.append("each new replica needs free GPUs and loads the model for minutes; watch for Pending pods")
        if replicas == 0:
            warnings.append("0 replicas: the model stops serving")
        return ActionPlan(
            "scale",
            target,
            f"scale {target}: {cur} -> {replicas} replicas",
            diff=f"-replicas: {cur}\n+replicas: {replicas}",
            patch=ops,
            patch_type="json",
            subresource="scale",
            warnings=tuple(warnings),
            data={"from": cur, "to": replicas},
            **self._flags(),
        )

    async def plan_restart(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        dep = await self._read_workload(namespace, name, kind)
        info = deployment_info(dep, kind)
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}}}}
        old = ((dep.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations", {}).get(RESTARTED_AT_ANNOTATION)
        diff = (f"-{RESTARTED_AT_ANNOTATION}: {old}\n" if old else "") + f"+{RESTARTED_AT_ANNOTATION}: {now}"
        warnings = [f"restarts all {info.replicas} replicas one by one; each reloads the model (minutes)"]
        if info.strategy == "RollingUpdate":
            warnings.append("a RollingUpdate needs a free GPU for the surge pod; without one the rollout stalls")
        return ActionPlan(
            "restart",
            Target(kind, namespace, name),
            f"rollout restart {kind.lower()}/{name}",
            diff=diff,
            patch=patch,
            patch_type="merge",
            warnings=tuple(warnings),
            data={"restarted_at": now},
            **self._flags(),
        )

    async def plan_rollback(self, namespace: str, name: str, kind: str = "Deployment") -> ActionPlan:
        target = Target(kind, namespace, name)
        if kind != "Deployment":
            return ActionPlan("rollback", target, "roll back", errors=("roll back is supported for Deployments; edit the args instead",), **self._flags())
        dep = await self._read_workload(namespace, name, kind)
        rss = await self._replica_sets(dep)
        return build_rollback_plan(dep, rss, **self._flags())

    async def plan_delete_pod(self, namespace: str, pod: str, grace_s: int = 60) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        uid = (p.get("metadata") or {}).get("uid")
        info = pod_info(p)
        warnings = []
        if info.owner_kind is None:
            warnings.append("the pod has no owner: nothing will recreate it")
        return ActionPlan(
            "delete-pod",
            Target("Pod", namespace, pod),
            f"delete pod/{pod} --grace-period={grace_s}",
            diff=f"-pod/{pod} (uid {uid})",
            patch={"gracePeriodSeconds": grace_s, "preconditions": {"uid": uid}},
            warnings=tuple(warnings),
            data={"uid": uid, "grace_s": grace_s},
            **self._flags(),
        )

    async def _choose_label(self, namespace: str, pod: Mapping[str, Any], label: str | None) -> tuple[str, list[str]]:
        """The label that puts the pod in rotation: configured, else one a Service selects on
        that the owner does not (changing an owner-selected label orphans the pod)."""
        notes: list[str] = []
        if label or self.rotation_label:
            return str(label or self.rotation_label), notes
        labels = (pod.get("metadata") or {}).get("labels") or {}
        owner_keys = {HASH_LABEL}
        kind, owner = owner_of(pod)
        try:
            if kind == "Deployment" and owner:
                dep = await self._read_workload(namespace, owner, "Deployment")
                owner_keys |= set((((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}))
            svcs = await self._call(self.core.list_namespaced_service, namespace)
        except ClusterError as e:
            notes.append(f"cannot find the Service selecting this pod ({e.message}); using label {DEFAULT_ROTATION_LABEL!r}")
            return DEFAULT_ROTATION_LABEL, notes
        shared: list[str] = []
        for s in svcs.get("items") or []:
            selector = (s.get("spec") or {}).get("selector") or {}
            if selector and all(labels.get(k) == v for k, v in selector.items()):
                free = [k for k in selector if k not in owner_keys]
                if free:
                    notes.append(f"Service {s['metadata']['name']} selects {free[0]}={selector[free[0]]}")
                    return free[0], notes
                shared.extend(selector)
        if shared:
            notes.append(
                f"the Service selects only on labels the {kind} also selects ({', '.join(sorted(set(shared)))}); "
                f"using {DEFAULT_ROTATION_LABEL!r}, which no Service selects: configure a rotation label"
            )
        else:
            notes.append(f"no Service selects this pod; using label {DEFAULT_ROTATION_LABEL!r} (for an external router)")
        return DEFAULT_ROTATION_LABEL, notes

    async def plan_cordon(self, namespace: str, pod: str, *, undo: bool = False, label: str | None = None) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        meta = p.get("metadata") or {}
        labels = meta.get("labels") or {}
        ann = meta.get("annotations") or {}
        target = Target("Pod", namespace, pod)
        flags = self._flags()
        ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": meta.get("uid")}]
        if undo:
            saved = ann.get(ROTATION_ANNOTATION)
            if not saved:
                return ActionPlan("cordon", target, f"put {pod} back in rotation", errors=("the pod was not taken out of rotation by kvwatch",), **flags)
            try:
                rec = json.loads(saved)
                key, old = rec["label"], rec.get("value")
            except (ValueError, KeyError, TypeError):
                return ActionPlan("cordon", target, "uncordon", errors=(f"unreadable {ROTATION_ANNOTATION} annotation",), **flags)
            path = f"/metadata/labels/{esc(key)}"
            if key in labels:
                ops.append({"op": "test", "path": path, "value": labels[key]})
            ops.append({"op": "replace" if key in labels else "add", "path": path, "value": old} if old is not None else {"op": "remove", "path": path})
            ops.append({"op": "remove", "path": f"/metadata/annotations/{esc(ROTATION_ANNOTATION)}"})
            return ActionPlan(
                "cordon",
                target,
                f"label pod/{pod} {key}={old} (back in rotation)",
                diff=f"-{key}: {labels.get(key)}\n" + (f"+{key}: {old}" if old is not None else ""),
                patch=ops,
                patch_type="json",
                data={"label": key, "value": old, "undo": True},
                **flags,
            )
        key, notes = await self._choose_label(namespace, p, label)
        old = labels.get(key)
        if old == self.drain_value:
            return ActionPlan("cordon", target, "cordon", errors=(f"{pod} is already out of rotation ({key}={old})",), **flags)
        path = f"/metadata/labels/{esc(key)}"
        if not labels:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        if old is not None:
            ops.append({"op": "test", "path": path, "value": old})
        ops.append({"op": "replace" if old is not None else "add", "path": path, "value": self.drain_value})
        record = json.dumps({"label": key, "value": old}, separators=(",", ":"))
        if not ann:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {ROTATION_ANNOTATION: record}})
        else:
            ops.append({"op": "add", "path": f"/metadata/annotations/{esc(ROTATION_ANNOTATION)}", "value": record})
        return ActionPlan(
            "cordon",
            target,
            f"label pod/{pod} {key}={self.drain_value} (out of rotation)",
            diff=(f"-{key}: {old}\n" if old is not None else "") + f"+{key}: {self.drain_value}",
            patch=ops,
            patch_type="json",
            warnings=tuple(notes),
            data={"label": key, "value": old, "undo": False},
            **flags,
        )

    async def plan_drain(self, namespace: str, pod: str, *, label: str | None = None, grace_s: int = 60) -> ActionPlan:
        p = await self._call(self.core.read_namespaced_pod, pod, namespace)
        info = pod_info(p)
        target = Target("Pod", namespace, pod)
        warnings: list[str] = []
        errors: list[str] = []
        replicas = None
        owner = info.owner_name if info.owner_kind == "Deployment" else None
        if owner:
            try:
                replicas = (await self.get_deployment(namespace, owner)).replicas
            except ClusterError as e:
                errors.append(f"cannot read the owning Deployment {owner}: {e.message}")
        elif info.owner_kind:
            warnings.append(f"owned by a {info.owner_kind}: no spare is started, capacity drops by one while draining")
        key, notes = await self._choose_label(namespace, p, label)
        warnings.extend(notes)
        warnings.extend(grace_warnings(p, grace_s))
        if (p.get("metadata") or {}).get("labels", {}).get(key) == self.drain_value:
            errors.append(f"{pod} is already out of rotation ({key}={self.drain_value})")
        steps = []
        if owner and replicas is not None:
            steps.append(f"1. scale deployment/{owner} {replicas} -> {replicas + 1}; wait until the spare is ready")
        steps += [
            f"2. label pod/{pod} {key}={self.drain_value} (out of rotation)",
            "3. wait until its running + waiting reaches 0",
            f"4. delete pod/{pod} --grace-period={grace_s}",
        ]
        if owner and replicas is not None:
            steps.append(f"then: restore deployment/{owner} to {replicas} replicas (restore key)")
        return ActionPlan(
            "drain",
            target,
            f"drain pod/{pod}",
            diff="\n".join(steps),
            warnings=tuple(warnings),
            errors=tuple(errors),
            data={"owner": owner, "replicas": replicas, "label": key, "grace_s": grace_s},
            **self._flags(),
        )

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

    # ---- apply ----

    async def _apply(self, plan: ActionPlan) -> ActionResult:
        t = plan.target
        if plan.action in ("edit", "restart", "rollback"):
            _, patch_fn, _, _ = self._workload(t.kind)
            return await self._patch(plan, patch_fn, t.name, t.namespace)
        if plan.action == "scale":
            _, _, _, scale_fn = self._workload(t.kind)
            return await self._patch(plan, scale_fn, t.name, t.namespace)
        if plan.action == "cordon":
            return await self._patch(plan, self.core.patch_namespaced_pod, t.name, t.namespace)
        if plan.action == "delete-pod":
            body = dict(plan.patch or {})
            grace = int(plan.data.get("grace_s", 60))
            await self._call(self.core.delete_namespaced_pod, t.name, t.namespace, body=body, grace_period_seconds=grace, dry_run="All")
            await self._call(self.core.delete_namespaced_pod, t.name, t.namespace, body=body, grace_period_seconds=grace)
            return ActionResult(True, f"deleted pod/{t.name} (grace period {grace}s)", 200)
        return ActionResult(False, f"cannot apply a {plan.action!r} plan directly")

    async def _patch(self, plan: ActionPlan, fn: Callable, name: str, namespace: str) -> ActionResult:
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
        }[plan.action]
        return ActionResult(True, f"{plan.target}: {what}", 200, details)

    async def _refused(self, plan: ActionPlan, e: ClusterError, prefix: str) -> ActionResult:
        if e.kind != "conflict":
            return e.result(f"{plan.action} {plan.target}: {prefix}")
        details: dict[str, Any] = {"kind": "conflict"}
        msg = f"refused: {plan.target} changed since it was read; nothing was overwritten. Review the new state and plan again"
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



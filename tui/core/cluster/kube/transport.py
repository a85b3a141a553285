"""The Kubernetes adapter's transport: the official client, its calls in worker threads as plain
dicts, and construction from kubeconfig or the in-cluster service account.

The client is synchronous; every call runs in a worker thread (one pool for reads, plans and
patches, one for pod-proxy scrapes, so an action never waits behind scrapes) and comes back as
plain dicts (`_preload_content=False`), so unknown fields survive a read-modify-write (roll back
patches a whole pod template) and nothing depends on the client's model classes. Credentials come
from kubeconfig or the in-cluster service account only, and no message built here contains them.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping

from ...model import PodInfo
from .. import args as A
from ..audit import AuditLog
from ..base import Cluster
from ..plans import containers_of, metrics_port, pod_info
from ..values import ClusterError, ContextPolicy, policy_for, sanitize
from .errors import map_error


FIELD_MANAGER = "kvwatch"
LIST_PAGE = 500  # items per list page (kubectl's --chunk-size default)
WRITE_PREFIXES = ("create_", "patch_", "replace_")


class KubeTransport(Cluster):
    """The client, its calls, construction and the pod discovery filter the other parts share."""

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
        proxy_rps: float = 40.0,
        proxy_concurrency: int = 8,
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
        # the pod-proxy budget (`sources.budget`): ClusterSource spaces the scrapes, these threads send them
        self.proxy_rps = proxy_rps
        self.proxy_concurrency = proxy_concurrency
        # two thread pools: reads, plans and patches never queue behind scrapes (nor scrapes behind the default pool)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="kvwatch-api")
        self._scrape_pool = ThreadPoolExecutor(max_workers=max(1, proxy_concurrency), thread_name_prefix="kvwatch-scrape")
        self._reload_auth: Callable[[], None] | None = None  # set by connect(): load the credentials again
        self._auth_lock = threading.RLock()
        self._auth_gen = 0  # bumped by each re-authentication

    @classmethod
    def connect(
        cls,
        *,
        context: str | None = None,
        kubeconfig: str | None = None,
        namespace: str | None = None,
        in_cluster: bool | None = None,
        **kw: Any,
    ) -> "KubeTransport":
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
        # room for both thread pools' connections (urllib3 would open and discard extras, with a warning each)
        cfg.connection_pool_maxsize = max(int(cfg.connection_pool_maxsize or 0), 8 + int(kw.get("proxy_concurrency", 8)) + 4)
        out = cls(client.ApiClient(cfg), context=ctx_name, user=user, namespace=ns or "default", kubeconfig=kubeconfig, **kw)
        if use_incluster:
            out._reload_auth = lambda: config.load_incluster_config(client_configuration=cfg)  # re-reads the rotated token file
        else:
            # load_kube_config runs the user's exec plugin (or reads its token) again (kubernetes/config/kube_config.py
            # KubeConfigLoader._load_authentication -> _load_from_exec_plugin)
            out._reload_auth = lambda: config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        out._serialise_refresh(cfg)
        return out

    def _serialise_refresh(self, cfg: Any) -> None:
        """The client calls `refresh_api_key_hook` before every request and runs the exec plugin
        when the token has expired (kube_config.py _set_config._refresh_api_key): without a lock
        every scrape thread would run the plugin at once."""
        hook = getattr(cfg, "refresh_api_key_hook", None)
        if hook is None:
            return

        def serialised(c: Any) -> None:
            with self._auth_lock:
                hook(c)

        cfg.refresh_api_key_hook = serialised

    def _reauthenticate(self, seen_gen: int) -> bool:
        """After a 401: load the credentials again, once for all the requests that failed with
        the same credentials (`seen_gen`); True when a retry may succeed."""
        if self._reload_auth is None:
            return False
        with self._auth_lock:
            if self._auth_gen != seen_gen:  # another thread already re-authenticated
                return True
            try:
                self._reload_auth()
            except Exception:  # noqa: BLE001 - the plugin failed: the 401 stands, with its own message
                return False
            self._auth_gen += 1
            self._serialise_refresh(self.api.configuration)
            return True

    def with_namespace(self, namespace: str | None, all_namespaces: bool = False) -> "KubeTransport":
        other = copy.copy(self)
        other.namespace = namespace or self.namespace
        other.all_namespaces = all_namespaces
        return other

    def with_context(self, context: str) -> "KubeTransport":
        return type(self).connect(
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
            proxy_rps=self.proxy_rps,
            proxy_concurrency=self.proxy_concurrency,
        )

    def _sync(self, fn: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any], text: bool = False) -> Any:
        kw.setdefault("_request_timeout", self.request_timeout)
        name = getattr(fn, "__name__", "")
        if name.startswith(WRITE_PREFIXES) and "review" not in name:  # reviews persist nothing
            # managedFields name kvwatch as the writer (kubectl sends fieldManager=kubectl-client-side-apply etc.);
            # the generated client's create_*/patch_*/replace_* all take field_manager (kubernetes/client/api/*_api.py)
            kw.setdefault("field_manager", FIELD_MANAGER)
        kw["_preload_content"] = False
        for attempt in (0, 1):
            gen = self._auth_gen
            try:
                resp = fn(*args, **kw)
                data = resp.data
                break
            except Exception as e:  # noqa: BLE001 - mapped to one typed error
                err = map_error(e, self.host)
                # a 401 (token revoked or expired early): one re-authentication through kubeconfig, then one retry
                if err.kind == "unauthorized" and not attempt and self._reauthenticate(gen):
                    continue
                raise err from None
        if text:
            return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data or "")
        try:
            return json.loads(data) if data else {}
        except ValueError:
            raise ClusterError("server", "API server sent a response that is not JSON") from None

    def _list_sync(self, fn: Callable[..., Any], args: tuple[Any, ...] = (), kw: dict[str, Any] | None = None) -> dict[str, Any]:
        """A whole list in pages of `LIST_PAGE` (`limit` / `continue`), each page its own request
        with its own timeout; a continue token that expired (410) restarts the list once."""
        # k8s.io/apimachinery pkg/apis/meta/v1/types.go ListOptions.Limit/Continue; kubectl and client-go's pager
        # (k8s.io/client-go/tools/pager/pager.go) page at 500 and fall back to a full list on 410 Expired
        for attempt in (0, 1):
            items: list[Any] = []
            token: str | None = None
            try:
                while True:
                    page_kw = dict(kw or {}, limit=LIST_PAGE)
                    if token:
                        page_kw["_continue"] = token
                    data = self._sync(fn, args, page_kw)
                    items.extend(data.get("items") or [])
                    meta = data.get("metadata") or {}
                    token = meta.get("continue") or None
                    if not token:
                        return {**data, "items": items, "metadata": {k: v for k, v in meta.items() if k not in ("continue", "remainingItemCount")}}
            except ClusterError as e:
                if e.status != 410 or attempt:
                    raise
        raise AssertionError("unreachable")

    async def _list(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> dict[str, Any]:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(self._list_sync, fn, args, kw))

    async def _call(self, fn: Callable[..., Any], *args: Any, _text: bool = False, _pool: ThreadPoolExecutor | None = None, **kw: Any) -> Any:
        pool = _pool or self._pool
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(self._sync, fn, args, kw, _text))

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace or "default"

    def _workload(self, kind: str) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
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

    async def _read_workload(self, namespace: str, name: str, kind: str) -> dict[str, Any]:
        obj: dict[str, Any] = await self._call(self._workload(kind)[0], name, namespace)
        return obj

    # ---- pod discovery, shared by the list and the watch ----

    def _keep(self, pod: Mapping[str, Any], selector: str | None) -> bool:
        if selector:
            return True
        return any(A.is_vllm_container(c) for c in containers_of(pod.get("spec") or {}))

    def _to_info(self, pod: Mapping[str, Any]) -> PodInfo:
        info = pod_info(pod)
        self._ports[(info.namespace, info.name)] = self.port or metrics_port(pod)
        return info

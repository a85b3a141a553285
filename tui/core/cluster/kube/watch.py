"""The pod watch: a paged list, then watch from its resourceVersion, in a worker thread. A
broken or failed watch resumes from the last resourceVersion seen (BOOKMARKs keep it fresh); only
410 Gone re-lists. Errors back off and come as events, never raised.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, AsyncIterator

from ..values import PodEvent, sanitize
from .errors import map_error
from .transport import KubeTransport


class KubeWatch(KubeTransport):
    """The pod watch over the API server."""

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
                gen = self._auth_gen
                try:
                    if rv is None:
                        data = self._list_sync(list_fn)
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
                            # k8s.io/client-go tools/cache/reflector.go watchHandler: 410 Gone (Expired) -> re-list;
                            # any other error -> watch again from the last resourceVersion
                            if obj.get("code") == 410:
                                rv = None
                                break
                            emit(PodEvent("ERROR", message=f"watch: {sanitize(str(obj.get('message') or obj))[:200]}"))
                            stop.wait(backoff)
                            backoff = min(backoff * 2, 30.0)
                            break
                        new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if new_rv:
                            rv = str(new_rv)
                        backoff = 0.5
                        if typ == "BOOKMARK":
                            continue
                        meta = obj.get("metadata") or {}
                        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
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
                except Exception as e:  # noqa: BLE001 - a watch thread must not die silently
                    if stop.is_set():
                        break
                    err = map_error(e, self.host)
                    emit(PodEvent("ERROR", message=err.message))
                    if err.status == 410:
                        rv = None  # the resourceVersion itself is gone: re-list
                    if err.kind == "unauthorized":
                        self._reauthenticate(gen)  # new credentials for the next try, after the back-off
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

"""`:ctx` and `:ns`: list the kube contexts / namespaces, or watch another one.

The switch itself is the app's `switch_cluster` (a new source; old rows forgotten); this module
checks the name, builds the cluster for it and reports each outcome as a flash."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable, Protocol

from tui.core.textsafe import clean

if TYPE_CHECKING:  # only for annotations: the cluster package loads with a cluster
    from textual.notifications import SeverityLevel
    from tui.core.cluster.base import Cluster


class SwitchHost(Protocol):
    """What the switcher needs from the app."""

    def notify(self, message: str, *, title: str = ..., severity: SeverityLevel = ..., timeout: float | None = ...,
               markup: bool = ...) -> None: ...

    async def switch_cluster(self, cluster: Cluster) -> Any: ...


class ContextSwitcher:
    def __init__(self, app: SwitchHost, on_error: Callable[[str, BaseException], None],
                 on_switched: Callable[[], None]) -> None:
        self.app = app
        self.on_error = on_error  # (title, exception): flashed by the screen
        self.on_switched = on_switched  # e.g. ask RBAC again for the new cluster

    async def context(self, cluster: Cluster, name: str | None) -> None:
        try:
            contexts = await cluster.list_contexts()
        except Exception as e:  # noqa: BLE001
            self.on_error(":ctx", e)
            return
        if not name:
            listing = ", ".join(("*" if c.name == cluster.context else "") + c.name for c in contexts)
            self.app.notify(clean(listing or "no contexts"), title="contexts", timeout=8, markup=False)
            return
        if name == cluster.context:
            self.app.notify(f"already on context {clean(name)}", timeout=3, markup=False)
            return
        if name not in {c.name for c in contexts}:
            self.app.notify(f":ctx: no context {clean(name)!r} (known: {clean(', '.join(c.name for c in contexts))})",
                            severity="error", timeout=8, markup=False)
            return
        with_context = getattr(cluster, "with_context", None)
        if with_context is None:
            self.app.notify(f":ctx: the {cluster.kind} cluster has one context", severity="warning", timeout=5)
            return
        try:
            new = await asyncio.to_thread(with_context, name)
        except Exception as e:  # noqa: BLE001
            self.on_error(":ctx", e)
            return
        await self._swap(new, f"context {name}")

    async def namespace(self, cluster: Cluster, name: str | None) -> None:
        if not name:
            try:
                names = await cluster.list_namespaces()
            except Exception as e:  # noqa: BLE001
                self.on_error(":ns", e)
                return
            self.app.notify(clean(", ".join(names) or "none"), title=f"namespaces (now {clean(cluster.namespace or '')})",
                            timeout=8, markup=False)
            return
        with_namespace = getattr(cluster, "with_namespace", None)
        if with_namespace is None:
            if name == cluster.namespace:
                self.app.notify(f"already on namespace {clean(name)}", timeout=3, markup=False)
            else:
                self.app.notify(f":ns: the {cluster.kind} cluster has one namespace: {clean(cluster.namespace or '')}",
                                severity="warning", timeout=5, markup=False)
            return
        await self._swap(with_namespace(name), f"namespace {name}")

    async def _swap(self, new: Cluster, what: str) -> None:
        """Watch another context / namespace through the app; old rows are forgotten."""
        self.app.notify(f"switching to {clean(what)}...", timeout=3, markup=False)
        src = await self.app.switch_cluster(new)
        self.on_switched()
        self.app.notify(f"now watching {clean(new.context)}/{clean(new.namespace or '')}"
                        + (f" ({clean(src.last_error)})" if src.last_error else ""), timeout=5, markup=False)

"""The permission gate: which mitigation keys may be used now, and why not.

A key is offered only when it may be used: never in replay, never without a cluster, mutating keys
never when read-only (`--readonly` or the context's profile), and never when RBAC (checked up
front with SelfSubjectAccessReview) denies the verbs. Screens ask `why_not`; the app owns one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from tui.core.model import ReplicaView
from tui.core.results import ClusterError
from tui.core.textsafe import clean

if TYPE_CHECKING:  # the cluster package loads with a cluster, not with `--url`
    from tui.core.cluster.base import Cluster, Permissions

# screen action -> (cluster action whose RBAC verbs it needs, or None for cluster reads)
NEEDS: dict[str, str | None] = {
    "edit_args": "edit",
    "drain": "drain",
    "rollout_status": None,
    "rollout_restart": "restart",
    "scale": "scale",
    "rollback": "rollback",
    "logs": "logs",
    "events": "events",
    "describe": "describe",
}


class GateHost(Protocol):
    """What the gate reads from the app."""

    mode: str  # "live" or "replay"
    readonly: bool

    def current_cluster(self) -> Cluster | None: ...


class Gate:
    """Which mitigation keys may be used now, and why not. One per app (`app.mitigation_gate`)."""

    def __init__(self, app: GateHost) -> None:
        self.app = app
        self.perms: dict[str, Permissions] = {}
        self.failed: dict[str, str] = {}  # namespace -> why the RBAC check failed
        self._loading: set[str] = set()
        self._cluster_id: int | None = None

    def cluster(self) -> Cluster | None:
        c = self.app.current_cluster()
        if c is not None and id(c) != self._cluster_id:  # context / namespace switched
            self._cluster_id = id(c)
            self.perms.clear()
            self.failed.clear()
        return c

    def namespace(self, view: ReplicaView | None = None) -> str:
        if view is not None and view.pod is not None and view.pod.namespace:
            return view.pod.namespace
        c = self.cluster()
        return (c.namespace if c is not None else None) or "default"

    def readonly(self) -> bool:
        c = self.cluster()
        return bool(self.app.readonly or (c is not None and c.readonly))

    @staticmethod
    def kind(view: ReplicaView | None) -> str | None:
        """The kind of workload the keys act on for this row (its RBAC entry may differ)."""
        return view.pod.owner_kind if view is not None and view.pod is not None else None

    def why_not(self, action: str, namespace: str | None = None, kind: str | None = None) -> str | None:
        """None when `action` (a key action of NEEDS) may be used on a workload of `kind`; else the reason."""
        if self.app.mode == "replay":
            return "replay: a recording has no cluster to act on"
        c = self.cluster()
        if c is None:
            return "no cluster: kvwatch is watching endpoints given directly (use a kubeconfig, or kvwatch demo)"
        from tui.core.cluster.values import MUTATING_ACTIONS

        need = NEEDS.get(action)
        mutating = need in MUTATING_ACTIONS
        if mutating and self.readonly():
            return "read-only (--readonly, or the context is read-only in the config): nothing can be changed"
        if need is None:
            return None
        ns = namespace or self.namespace()
        perms = self.perms.get(ns)
        if perms is None:
            if ns in self.failed:
                return f"RBAC check failed: {self.failed[ns]}" if mutating else None
            return "checking RBAC permissions..." if mutating else None
        p = (perms.actions.get(f"{need}/{kind}") if kind else None) or perms.actions.get(need)  # e.g. "edit/StatefulSet"
        if p is not None and not p.allowed:
            return clean(p.reason or f"RBAC does not allow {need}")
        return None

    async def load(self, namespace: str, force: bool = False) -> bool:
        """Ask the cluster what this user may do in `namespace`; True when it changed anything.
        `force` asks again (RBAC changes, an API server that was unreachable comes back)."""
        c = self.cluster()
        if c is None or (namespace in self.perms and not force) or namespace in self._loading:
            return False
        self._loading.add(namespace)
        try:
            self.perms[namespace] = await c.permissions(namespace)
            self.failed.pop(namespace, None)
        except ClusterError as e:
            self.failed[namespace] = e.message
        except Exception as e:  # noqa: BLE001 - an RBAC check must not take the dashboard down
            self.failed[namespace] = f"{type(e).__name__}: {e}"
        finally:
            self._loading.discard(namespace)
        return True

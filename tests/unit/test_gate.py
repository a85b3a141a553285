"""The permission gate (tui/gate.py) reads the app only through mode, readonly and
current_cluster(): replay, no cluster, read-only and RBAC each hide keys, with the reason."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.unit.test_cluster_sim import make
from tui.core.cluster.base import Cluster
from tui.gate import NEEDS, Gate


@dataclass
class Host:
    mode: str = "live"
    readonly: bool = False
    cluster: Cluster | None = None

    def current_cluster(self) -> Cluster | None:
        return self.cluster


def test_replay_and_no_cluster_hide_every_key() -> None:
    assert all("replay" in Gate(Host(mode="replay")).why_not(a) for a in NEEDS)
    assert all("no cluster" in Gate(Host()).why_not(a) for a in NEEDS)


async def test_read_only_hides_mutating_keys_only_and_rbac_answers_the_rest(tmp_path: Path) -> None:
    _f, cluster = make(tmp_path)
    gate = Gate(Host(readonly=True, cluster=cluster))
    ns = gate.namespace()
    assert "read-only" in gate.why_not("drain", ns)
    assert gate.why_not("rollout_status", ns) is None  # a read
    gate = Gate(Host(cluster=cluster))
    assert gate.why_not("drain", ns) == "checking RBAC permissions..."
    assert await gate.load(ns) and not await gate.load(ns)  # asked once, unless forced
    assert all(gate.why_not(a, ns) is None for a in NEEDS)


def test_a_statefulset_row_is_gated_by_its_own_rbac_entry() -> None:
    from tui.core.cluster.base import Permission, Permissions

    class FakeCluster:
        readonly = False

    gate = Gate(Host(cluster=FakeCluster()))  # type: ignore[arg-type]
    gate.cluster()
    gate.perms["ns"] = Permissions("ns", {"edit": Permission(True), "edit/StatefulSet": Permission(False, "RBAC does not allow patch statefulsets")})
    assert gate.why_not("edit_args", "ns", "Deployment") is None
    assert gate.why_not("edit_args", "ns", "StatefulSet") == "RBAC does not allow patch statefulsets"

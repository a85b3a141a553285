"""The demo's metrics Source: the simulated fleet's replicas as pods of a `SimCluster`.

Rows are keyed by the simulated pod name and follow the cluster: a rollout's new replicas and a
drain's spare appear, deleted ones go (`take_removed`, for `Monitor.forget`). Pages come straight
from each replica's port with its DCGM page, as `DirectSource` reads them, so the GPU columns and
the node-fault diagnosis work as with `--url`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..model import Scrape
from .direct import DirectSource, Target

if TYPE_CHECKING:  # the demo's cluster: a source never imports the cluster package at run time
    from ..cluster.sim import SimCluster


class DemoSource:
    def __init__(self, cluster: SimCluster, *, timeout: float = 2.0, label: str = "") -> None:
        self.cluster = cluster
        self.fleet = cluster.fleet
        self.label = label
        self._direct = DirectSource([], timeout=timeout, clock=self.fleet.clock)
        self._known: set[str] = set()
        self._removed: set[str] = set()

    @property
    def sim_speed(self) -> float:
        """Simulated seconds per real second: the header labels the clock "sim" with it."""
        return self.fleet.speed

    @property
    def description(self) -> str:
        n = len(self._known) or len(self.fleet.replica_names())
        return f"demo: {n} simulated replicas" + (f" · {self.label}" if self.label else "")

    async def start(self) -> None:
        await self._direct.start()

    def take_removed(self) -> set[str]:
        out, self._removed = self._removed, set()
        return out

    async def poll(self) -> list[Scrape]:
        pods = {p.name: p for p in await self.cluster.list_pods()}
        targets = [t for t in self.fleet.targets() if t.metrics_url and t.name in pods]
        self._direct.set_targets(Target(t.name, t.metrics_url, gpu_url=t.gpu_url or None, group=t.group) for t in targets)
        self._removed |= self._known - set(pods)
        self._removed -= set(pods)
        self._known = set(pods)
        return [replace(s, pod=pods.get(s.replica)) for s in await self._direct.poll()]

    async def close(self) -> None:
        self.cluster.close()
        await self._direct.close()

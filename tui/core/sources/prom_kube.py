"""Prometheus for metrics and history, the API server for pods and actions (issue: fleet scale).

Rows come from Prometheus (named by their `pod` label); the pod watch adds restarts, the last
termination reason and the owner, and the cluster behind it makes the mitigation keys work.
"""

from __future__ import annotations

from typing import Any

from dataclasses import replace

from ..model import Scrape
from .prometheus import PrometheusSource
from .kube import ClusterSource


class PrometheusWithCluster:
    def __init__(self, prom: PrometheusSource, pods: ClusterSource) -> None:
        self.prom = prom
        self.pods = pods
        self.cluster = pods.cluster  # the app's mitigation keys act through this

    @property
    def description(self) -> str:
        c = self.cluster
        return f"{self.prom.description} · pods from {c.kind} {c.context}"

    async def start(self) -> None:
        await self.prom.start()
        await self.pods.start()  # only its pod watch is used: Prometheus does the scraping

    async def backfill(self, **kw: Any) -> list[Scrape]:
        return [self._join(s) for s in await self.prom.backfill(**kw)]

    async def poll(self) -> list[Scrape]:
        return [self._join(s) for s in await self.prom.poll()]

    def _join(self, s: Scrape) -> Scrape:
        pod = self.pods.lookup(s.replica)
        if pod is None:
            return s
        return replace(s, pod=pod, group=pod.owner_name or s.group)

    def take_removed(self) -> set[str]:
        return self.pods.take_removed()

    async def close(self) -> None:
        try:
            await self.prom.close()
        finally:
            await self.pods.close()

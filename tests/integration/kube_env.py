"""Shared fixture for the Kubernetes adapter tests: the extended kmock emulator on 127.0.0.1,
a realistic vLLM Deployment + Service, and KubeClusters pointed at it through the official client."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

import kmock
import pytest_asyncio

from tests.k8s_emulator import KubeEmulator, client_for, vllm_deployment, vllm_service
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.kube import KubeCluster

NS = "serving"


@dataclass
class Env:
    emu: KubeEmulator
    srv: kmock.Server
    audit: AuditLog
    tmp: Path

    def cluster(self, **kw: Any) -> KubeCluster:
        kw.setdefault("context", "kind-test")
        kw.setdefault("user", "sre")
        kw.setdefault("namespace", NS)
        kw.setdefault("audit", self.audit)
        return KubeCluster(client_for(self.srv), **kw)

    def pods(self, ns: str = NS, app: str = "llama") -> list[dict]:
        return sorted(
            (p for p in self.emu.items("pods", ns) if p["metadata"]["labels"].get("app") == app),
            key=lambda p: p["metadata"]["name"],
        )

    def deployment(self, name: str = "llama", ns: str = NS) -> dict:
        d = self.emu.get("deployments", ns, name)
        assert d is not None
        return d

    def vllm(self, name: str = "llama", ns: str = NS) -> dict:
        return self.deployment(name, ns)["spec"]["template"]["spec"]["containers"][0]

    def writes(self) -> list:
        return [c for c in self.emu.calls if c.writes]

    def same_pod_in(self, *namespaces: str, page: str) -> "KubeCluster":
        """A one-replica StatefulSet `vllm` serving `page` in each namespace (two `vllm-0`s), and
        a cluster watching all namespaces."""
        from tests.k8s_emulator import vllm_statefulset

        for ns in namespaces:
            self.emu.add(vllm_statefulset("vllm", ns=ns, replicas=1))
            self.emu.pod_metrics[(ns, "vllm-0")] = page
        return self.cluster(all_namespaces=True, namespace=None, watch_timeout_s=2)


async def make_env(tmp_path: Path, **emu_kw: Any) -> AsyncIterator[Env]:
    async with KubeEmulator(**emu_kw) as emu, kmock.Server(emu) as srv:
        emu.add(vllm_deployment())
        emu.add(vllm_service())
        emu.calls.clear()
        yield Env(emu, srv, AuditLog(tmp_path / "state" / "audit.jsonl"), tmp_path)


@pytest_asyncio.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async for e in make_env(tmp_path):
        yield e

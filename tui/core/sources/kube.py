"""A metrics `Source` over a cluster: the pods come from a watch, the pages from each pod.

`kvwatch -n NS [-l SEL] [--via proxy|direct]` polls this. Pods appear, restart and disappear as
the watch reports them (each Scrape carries its PodInfo and owner as the group). Pages are read
through the API server's pod proxy (works from a bastion outside the pod network) or, with
`--via direct`, from the pod IPs by the same `DirectSource` that `--url` uses.

Through the proxy every page costs the API server a request, so scrapes keep to a budget
(`budget.RequestBudget`: `--proxy-rps`, `--proxy-concurrency`): each poll scrapes the pods whose
last scrape is at least one budget period old (pods / rps seconds), oldest first, so a large
namespace is spread over several polls instead of arriving at the API server all at once; a pod
not due keeps its last values, unchanged, until its turn.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Protocol

from .. import engines
from ..metrics.parser import not_metrics_reason
from ..model import PodInfo, Scrape
from ..results import ClusterError
from .budget import DEFAULT_PROXY_CONCURRENCY, RequestBudget
from .direct import DirectSource, Target
from .gpu.nvidia_smi import NvidiaSmiExec

if TYPE_CHECKING:
    from ..cluster.base import PodEvent


class PodCluster(Protocol):
    """What this source needs from a cluster (`cluster.base.Cluster` satisfies it): the pod
    watch and each pod's metrics page. Reads raise `ClusterError`. A protocol, so sources never
    import the cluster package and the cluster's actions stay beside the metrics flow."""

    kind: str
    context: str
    namespace: str | None

    def watch_pods(self, namespace: str | None = None, selector: str | None = None) -> AsyncIterator["PodEvent"]: ...

    def metrics_url(self, pod: PodInfo) -> str: ...

    async def fetch_metrics(self, pod: PodInfo, timeout: float = 5.0) -> str: ...

NOT_SERVING = frozenset({"Pending", "Unschedulable", "ContainerCreating", "PodInitializing", "Terminating", "Succeeded", "Failed"})


class ClusterSource:
    def __init__(
        self,
        cluster: PodCluster,
        *,
        namespace: str | None = None,
        selector: str | None = None,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.time,
        keep_raw: bool = True,
        first_list_timeout: float = 10.0,
        gpu_exec: "NvidiaSmiExec | None" = None,
    ) -> None:
        self.cluster = cluster
        # opt-in: nvidia-smi inside each pod (the runbooks' method) when no exporter exists; it
        # rate-limits itself, runs in the background and never delays a poll
        self.gpu_exec = gpu_exec
        self._gpu_tasks: dict[str, asyncio.Task[Any]] = {}
        self.namespace = namespace
        self.selector = selector
        self.timeout = timeout
        self.clock = clock
        self.keep_raw = keep_raw
        self.first_list_timeout = first_list_timeout
        self.pods: dict[str, PodInfo] = {}  # by replica key (`key`)
        self.last_error: str | None = None
        self._removed: set[str] = set()
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._direct: DirectSource | None = None
        self._budget: RequestBudget | None = None
        self._started: dict[str, float] = {}  # replica key -> when its last proxied scrape was sent (monotonic)
        if getattr(cluster, "via", "proxy") == "direct":
            self._direct = DirectSource([], timeout=timeout, clock=clock, keep_raw=keep_raw)
        elif getattr(cluster, "proxy_rps", None):
            self._budget = RequestBudget(cluster.proxy_rps, getattr(cluster, "proxy_concurrency", DEFAULT_PROXY_CONCURRENCY))  # type: ignore[attr-defined]

    @property
    def qualified(self) -> bool:
        """Under -A two namespaces may each have a `vllm-0`: replicas are keyed namespace/name."""
        return bool(getattr(self.cluster, "all_namespaces", False)) and not self.namespace

    def key(self, pod: PodInfo) -> str:
        """The replica's name everywhere (history, JSON, recordings, selection): the pod name in
        one namespace, namespace/name across all of them."""
        return f"{pod.namespace}/{pod.name}" if self.qualified else pod.name

    def lookup(self, name: str) -> PodInfo | None:
        """The pod of a replica key, or of a bare pod name (Prometheus rows carry only `pod`)."""
        return self.pods.get(name) or next((p for p in self.pods.values() if p.name == name), None)

    @property
    def description(self) -> str:
        where = "all namespaces" if getattr(self.cluster, "all_namespaces", False) and not self.namespace else (self.namespace or self.cluster.namespace or "")
        via = getattr(self.cluster, "via", "")
        text = f"{self.cluster.kind} {self.cluster.context}/{where}: {len(self.pods)} vLLM pods" + (f" via {via}" if via else "")
        return text + (f" ({self.last_error})" if self.last_error else "")

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())
        try:
            await asyncio.wait_for(self._synced.wait(), self.first_list_timeout)
        except asyncio.TimeoutError:
            pass  # poll() says why

    async def _watch(self) -> None:
        async for ev in self.cluster.watch_pods(self.namespace, self.selector):
            if ev.type == "SYNC":
                fresh = {self.key(p): p for p in ev.pods}
                self._removed |= set(self.pods) - set(fresh)
                self.pods = fresh
                self.last_error = None
                self._synced.set()
            elif ev.type in ("ADDED", "MODIFIED") and ev.pod is not None:
                self.pods[self.key(ev.pod)] = ev.pod
                self._removed.discard(self.key(ev.pod))
            elif ev.type == "DELETED" and ev.pod is not None:
                if self.pods.pop(self.key(ev.pod), None) is not None:
                    self._removed.add(self.key(ev.pod))
            elif ev.type == "ERROR":
                self.last_error = ev.message

    def take_removed(self) -> set[str]:
        """Pods deleted since the last call (for `Monitor.forget`)."""
        out, self._removed = self._removed, set()
        for k in out:
            self._started.pop(k, None)
        return out

    async def poll(self) -> list[Scrape]:
        if not self._synced.is_set():
            raise ClusterError("unreachable", f"no pod list from the cluster yet: {self.last_error or 'waiting for the API server'}")
        ts = self.clock()
        pods = list(self.pods.values())
        idle = [p for p in pods if p.phase in NOT_SERVING or (self._direct is not None and not p.pod_ip)]
        live = [p for p in pods if p not in idle]
        out = [Scrape(ts=ts, replica=self.key(p), error=f"pod {p.phase or 'has no IP'}", pod=p, group=p.owner_name) for p in idle]
        if self._direct is not None:
            by_name = {self.key(p): p for p in live}
            self._direct.set_targets(Target(self.key(p), self.cluster.metrics_url(p), group=p.owner_name) for p in live)
            for s in await self._direct.poll():
                out.append(replace(s, pod=by_name.get(s.replica), ts=ts))
        else:
            out.extend(await asyncio.gather(*(self._scrape(p, ts) for p in self._due(live))))
        if self.gpu_exec is not None:
            out = [self._with_gpu(s) for s in out]
        return out

    def _with_gpu(self, s: Scrape) -> Scrape:
        pod = s.pod
        if pod is None or not s.ok or s.gpu is not None or self.gpu_exec is None:
            return s
        task = self._gpu_tasks.get(s.replica)
        if task is None or task.done():
            self._gpu_tasks[s.replica] = asyncio.get_running_loop().create_task(
                self.gpu_exec.sample(pod.namespace, pod.name))
        gpu = self.gpu_exec.peek(pod.namespace, pod.name)
        return replace(s, gpu=gpu) if gpu is not None else s

    def _due(self, live: list[PodInfo]) -> list[PodInfo]:
        """The pods to scrape this poll: all of them when the budget sends them all within a
        second; else those whose last scrape was sent a budget period (len(live) / rps) ago or
        more, oldest first."""
        gap = self._budget.period_for(len(live)) if self._budget is not None else 0.0
        if gap <= 1.0:  # the whole fleet fits in a second of budget: every poll scrapes every pod
            return live
        now = time.monotonic()
        due = [p for p in live if now - self._started.get(self.key(p), -1e9) >= gap]
        due.sort(key=lambda p: self._started.get(self.key(p), -1e9))
        return due

    async def _scrape(self, pod: PodInfo, ts: float) -> Scrape:
        if self._budget is None:
            return await self._scrape_now(pod, ts)
        async with self._budget.slot():  # waiting for a turn is not part of the request's timeout
            self._started[self.key(pod)] = time.monotonic()
            return await self._scrape_now(pod, ts)

    async def _scrape_now(self, pod: PodInfo, ts: float) -> Scrape:
        t0 = time.perf_counter()
        made = partial(Scrape, ts=ts, replica=self.key(pod), pod=pod, group=pod.owner_name)
        try:
            async with asyncio.timeout(self.timeout):
                text = await self.cluster.fetch_metrics(pod, self.timeout)
        except TimeoutError:
            return made(error=f"timeout after {float(self.timeout)}s", latency_s=time.perf_counter() - t0)
        except ClusterError as e:
            return made(error=e.message, latency_s=time.perf_counter() - t0)
        latency = time.perf_counter() - t0
        reason = not_metrics_reason(text)
        if reason is not None:
            return made(error=reason, latency_s=latency)
        sample, bad = engines.read_page(text)
        if bad is not None:  # as the direct source: only an engine-less page keeps its text
            raw = text if self.keep_raw and bad == engines.NO_ENGINE_METRICS else None
            return made(error=bad, raw=raw, latency_s=latency)
        raw = text if self.keep_raw else None
        return made(sample=sample, raw=raw, latency_s=latency)

    async def close(self) -> None:
        for t in self._gpu_tasks.values():
            t.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing
                pass
            self._task = None
        if self._direct is not None:
            await self._direct.close()

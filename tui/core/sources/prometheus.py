"""Read a whole fleet from a Prometheus-compatible server with a few queries per refresh.

Per refresh, whatever the fleet size, concurrently: the raw vLLM gauges/counters with each
replica's scrape time and API-server CPU (one folded query), server-side rates (one folded
query) and the GPU exporters' series (one query); in the background every `quantiles_every_s`,
server-side histogram quantiles (one query per histogram family); `vllm:cache_config_info`
every few minutes. Only the first is essential: if it fails the source is unusable and poll
raises SourceError; if another fails, the replicas come back without those values and
`warnings` says why.

`backfill()` runs the same queries as range queries so the screen opens with the last minutes
already drawn.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any, Callable, Mapping

from ..history import SERIES, SPARK_POINTS
from ..model import Scrape
from .base import SourceError
from .gpu import dcgm
from .gpu.dcgm import GpuAllocation
from .promclient import BearerToken, PromClient, Series
from .prommap import (
    Key,
    Naming,
    build_scrapes,
    cache_configs,
    group_derived,
    group_derived_range,
    group_scalars,
    group_scalars_range,
    pod_labels,
)
from .promql import QUANTILE_GROUPS, QUANTILES, RATES, FleetQueries, parse_match, quantiles_query, rates_query
from ..textsafe import clean

__all__ = ["PrometheusSource", "add_arguments", "from_args", "GpuAllocation", "SourceError"]

CACHE_CONFIG_EVERY_S = 300.0  # engine config labels change only on restart
CONFIG_RETRY_S = 30.0  # sooner when a replica has none yet (new pod, or fetched before its first scrape)
GONE_AFTER_S = 600.0  # stop reporting a vanished replica after this long


class PrometheusSource:
    """Source over the Prometheus HTTP API. See the module doc for the queries it runs."""

    def __init__(
        self,
        url: str,
        match: str | None = None,
        *,
        token_env: str | None = None,
        token_file: str | None = None,
        ca_file: str | None = None,
        insecure: bool = False,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
        rate_window_s: float = 60.0,
        gpu: bool = True,
        gpu_match: str | None = None,
        gpu_allocations: Callable[[], Mapping[str, GpuAllocation]] | None = None,
        quantiles_every_s: float = 15.0,
        max_mib: float = 64.0,
    ) -> None:
        self.match = parse_match(match)
        self.gpu_match = parse_match(gpu_match)
        token = BearerToken(token_env, token_file) if (token_env or token_file) else None
        self.client = PromClient(url, token=token, ca_file=ca_file, insecure=insecure, timeout=timeout,
                                 max_mib=max_mib)
        self.clock = clock
        self.rate_window_s = rate_window_s
        self.queries = FleetQueries.build(self.match, rate_window_s)
        self.gpu_query = dcgm.gpu_query(self.gpu_match) if gpu else None
        self.gpu_allocations = gpu_allocations
        self.description = f"prometheus {self.client.display}" + (f" {{{clean(self.match)}}}" if self.match else "")
        self.warnings: tuple[str, ...] = ()  # partial failures of the last poll, for the header
        self.pending: frozenset[str] = frozenset()  # replicas a partial answer left out: shown stale
        self._naming = Naming()
        self._configs: dict[Key, dict[str, str]] = {}
        self._configs_tried_at = -1e18
        self._configs_missing = False
        self._last_seen: dict[str, float] = {}  # replica -> last poll time it had series
        self._emitted: dict[str, float] = {}  # replica -> Prometheus scrape time last returned
        self.quantiles_every_s = quantiles_every_s
        self._quantile_task: asyncio.Task[Any] | None = None
        self._quantiles: dict[Key, dict[str, float]] = {}
        self._quantiles_at = -1e18
        self._quantile_warnings: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"PrometheusSource({self.description!r})"

    async def start(self) -> None:
        """Fail fast on a wrong URL, credentials or TLS setup (raises SourceError)."""
        await self.client.query("vector(1)")

    async def close(self) -> None:
        task, self._quantile_task = self._quantile_task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass  # closing: its result no longer matters
        await self.client.close()

    # -- live ---------------------------------------------------------------------------------

    async def poll(self) -> list[Scrape]:
        t0 = time.perf_counter()
        at = self.clock()
        q = self.queries
        want_configs = at - self._configs_tried_at >= CACHE_CONFIG_EVERY_S or (
            self._configs_missing and at - self._configs_tried_at >= CONFIG_RETRY_S
        )
        self._start_quantiles(at)
        jobs = [
            self.client.query(q.scalars, at),
            self.client.query(q.rates, at),
            self.client.query(self.gpu_query, at) if self.gpu_query else _nothing(),
            self.client.query(q.cache_config, at) if want_configs else _nothing(),
        ]
        scalars, rates, gpu, configs = await asyncio.gather(*jobs, return_exceptions=True)
        if isinstance(scalars, BaseException):
            if isinstance(scalars, SourceError):
                raise scalars
            raise SourceError(f"Prometheus query failed: {clean(str(scalars)) or type(scalars).__name__}")
        warnings = list(self._quantile_warnings)
        for what, res in (("", scalars), ("rates: ", rates), ("GPU series: ", gpu)):
            warnings.extend(f"Prometheus warns ({what}{w})" if what else f"Prometheus warns: {w}"
                            for w in getattr(res, "warnings", ()))
        # A partial answer (a store or a shard did not answer) says so in its warnings: what it
        # leaves out is unknown, not gone
        partial = bool(getattr(scalars, "warnings", ()))
        if partial:
            warnings.insert(0, "partial answer from Prometheus: replicas it left out are shown stale")
        derived_series: list[Series] = []
        if isinstance(rates, BaseException):
            warnings.append(f"rates unavailable: {clean(str(rates))}")
        else:
            derived_series.extend(rates)
        if want_configs:
            self._configs_tried_at = at
        if isinstance(configs, BaseException):
            warnings.append(f"engine config unavailable: {clean(str(configs))}")
        elif configs:
            self._configs = cache_configs(configs)

        replicas = group_scalars(scalars)
        self._configs_missing = any(k not in self._configs for k in replicas)  # new pods: fetch again soon
        derived, down = group_derived(derived_series)
        for key, vals in self._quantiles.items():
            derived.setdefault(key, {}).update(vals)
        self._naming.observe(replicas)
        gpus = {}
        if isinstance(gpu, BaseException):
            warnings.append(f"GPU series unavailable: {clean(str(gpu))}")
        elif gpu:
            gpus = dcgm.join_series(gpu, pod_labels(replicas, self._naming), self._allocations(warnings))
        if not replicas:
            sel = f"{{{self.match}}}" if self.match else "(no --match)"
            warnings.append(f"no vLLM series match {clean(sel)} at {self.client.display}")
        latency = time.perf_counter() - t0
        fresh = build_scrapes(at, replicas, derived, self._naming, gpus, self._configs, latency)
        out = self._new_only(fresh)
        present = {s.replica for s in fresh}
        if partial:
            self.pending = frozenset(n for n in self._last_seen if n not in present)
            for name in present:
                self._last_seen[name] = at
        else:
            self.pending = frozenset()
            out.extend(self._gone(at, present, down))
        self.warnings = tuple(warnings)
        return out

    def _start_quantiles(self, at: float) -> None:
        """Refresh the latency quantiles in the background, at most every `quantiles_every_s`.

        histogram_quantile over every bucket of every replica is by far the dearest query
        (~2 s of Prometheus CPU for 1024 replicas); its 60 s window makes a value a few seconds
        old as good as a fresh one, so it never holds up a refresh. One query per histogram
        family lets the server evaluate them in parallel.
        """
        task = self._quantile_task
        if task is not None and not task.done():
            return
        if at - self._quantiles_at < self.quantiles_every_s:
            return
        self._quantiles_at = at
        try:
            self._quantile_task = asyncio.get_running_loop().create_task(self._fetch_quantiles(at))
        except RuntimeError:  # no running loop: nothing to schedule on
            self._quantile_task = None

    async def _fetch_quantiles(self, at: float) -> None:
        texts = [quantiles_query(self.match, self.rate_window_s, fields) for fields in QUANTILE_GROUPS]
        results = await asyncio.gather(*(self.client.query(t, at) for t in texts), return_exceptions=True)
        series: list[Series] = []
        errors = []
        for res in results:
            if isinstance(res, BaseException):
                errors.append(clean(str(res)) or type(res).__name__)
            else:
                series.extend(res)
        quantiles, _ = group_derived(series)
        self._quantiles = quantiles
        self._quantile_warnings = (f"latency quantiles unavailable: {errors[0]}",) if errors else ()

    def _new_only(self, scrapes: list[Scrape]) -> list[Scrape]:
        """Drop replicas Prometheus has not scraped again since the last poll.

        kvwatch usually polls faster than Prometheus scrapes; repeating an unchanged sample
        would read as "no progress" (a false stall) and fill the sparklines with copies.
        """
        out = []
        for s in scrapes:
            if self._emitted.get(s.replica) == s.ts:
                continue
            self._emitted[s.replica] = s.ts
            out.append(s)
        return out

    def _allocations(self, warnings: list[str]) -> Mapping[str, GpuAllocation]:
        if self.gpu_allocations is None:
            return {}
        try:
            return self.gpu_allocations() or {}
        except Exception as e:  # the caller's mapping must not stop the metrics
            warnings.append(f"GPU allocation lookup failed: {clean(str(e))}")
            return {}

    def _gone(self, at: float, present: set[str], down: set[Key]) -> list[Scrape]:
        """Error scrapes for replicas seen before that have no series now."""
        down_names = {self._naming.name(k) for k in down}
        for name in present:
            self._last_seen[name] = at
        out = []
        for name, seen_at in list(self._last_seen.items()):
            if name in present:
                continue
            self._emitted.pop(name, None)
            if at - seen_at > GONE_AFTER_S:
                del self._last_seen[name]
                continue
            why = (
                "Prometheus cannot scrape it (up == 0)"
                if name in down_names
                else "no series in Prometheus any more (pod gone or target not scraped)"
            )
            out.append(Scrape(ts=at, replica=name, error=why))
        return out

    # -- history ------------------------------------------------------------------------------

    async def backfill(self, window_s: float = 600.0, step_s: float | None = None) -> list[Scrape]:
        """The last `window_s` seconds as scrapes every `step_s`, oldest first.

        Only what the sparklines draw is fetched for the past (gauges, rates, p95 TTFT, GPU
        memory/compute), keeping the answer small for large fleets. A failure of anything but
        the gauges leaves those values out.
        """
        end = self.clock()
        step = step_s or max(1.0, window_s / SPARK_POINTS)
        start = end - window_s
        spark = tuple(SERIES)
        rates = rates_query(self.match, self.rate_window_s, tuple(f for f in RATES if f in spark))
        quants = quantiles_query(self.match, self.rate_window_s, tuple(f for f in QUANTILES if f in spark))
        jobs = [
            self.client.query_range(self.queries.scalars, start, end, step),
            self.client.query_range(rates, start, end, step) if rates else _nothing(),
            self.client.query_range(quants, start, end, step) if quants else _nothing(),
            self.client.query_range(dcgm.gpu_query(self.gpu_match, dcgm.SPARK_FIELDS), start, end, step)
            if self.gpu_query
            else _nothing(),
        ]
        scalars, r, qn, gpu = await asyncio.gather(*jobs, return_exceptions=True)
        if isinstance(scalars, BaseException):
            if isinstance(scalars, SourceError):
                raise scalars
            raise SourceError(f"Prometheus range query failed: {clean(str(scalars))}")
        derived_at = group_derived_range([x for res in (r, qn) if not isinstance(res, BaseException) for x in res])
        grouped = group_scalars_range(scalars)
        all_keys: set[Key] = {k for reps in grouped.values() for k in reps}
        self._naming.observe(all_keys)
        gpus_at: dict[float, dict[str, Any]] = {}
        if gpu and not isinstance(gpu, BaseException):
            gpus_at = dcgm.join_range(gpu, pod_labels(all_keys, self._naming), self._allocations([]))
        out: list[Scrape] = []
        for ts in sorted(grouped):
            # A step finer than the scrape interval repeats samples: keep each scrape once.
            out.extend(self._new_only(build_scrapes(ts, grouped[ts], derived_at.get(ts, {}), self._naming,
                                                    gpus_at.get(ts), self._configs)))
        out.sort(key=lambda s: s.ts)
        for s in out:
            self._last_seen[s.replica] = end
        return out


async def _nothing() -> list[Series]:
    return []


# -- CLI wiring -------------------------------------------------------------------------------


# Declared in a light module: the CLI builds its parser without importing this one (httpx).
from .prom_args import add_arguments  # noqa: E402,F401


def from_args(
    args: argparse.Namespace,
    *,
    clock: Callable[[], float] = time.time,
    gpu_allocations: Callable[[], Mapping[str, GpuAllocation]] | None = None,
) -> PrometheusSource:
    """Build the source from parsed CLI flags (see add_arguments); raises SourceError."""
    return PrometheusSource(
        args.prometheus,
        getattr(args, "match", None),
        token_env=getattr(args, "prom_token_env", None),
        token_file=getattr(args, "prom_token_file", None),
        ca_file=getattr(args, "prom_ca", None),
        insecure=bool(getattr(args, "prom_insecure", False)),
        timeout=float(getattr(args, "prom_timeout", 10.0) or 10.0),
        max_mib=float(getattr(args, "prom_max_mib", 64.0) or 64.0),
        rate_window_s=float(getattr(args, "prom_rate_window", 60.0) or 60.0),
        gpu=not getattr(args, "no_gpu", False),
        gpu_match=getattr(args, "gpu_match", None),
        clock=clock,
        gpu_allocations=gpu_allocations,
    )

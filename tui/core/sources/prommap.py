"""Prometheus query results -> one Scrape per replica (pure functions, tested on recorded JSON).

A replica is a `pod` label value, else an `instance` (the scrape target). The raw gauge/counter
series become a Sample in canonical names, exactly as a direct scrape would, so the shared
history code needs nothing special; values Prometheus already derived (rates, quantiles) ride
along in Scrape.derived and take precedence over the history's own derivation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..metrics import names
from ..metrics.extract import V0_MARKERS, V1_MARKERS
from ..model import EngineSample, GpuSample, PodInfo, Sample, Scrape
from .promclient import Series
from .promql import PROCESS_CPU, SAMPLE_TS, TAG, UP_DOWN
from ..textsafe import clean

# canonical name -> position of each exposed alias (lower wins), from names.SCALARS order
_ALIAS: dict[str, tuple[str, int]] = {}
for _canon, _exposed in names.SCALARS.items():
    for _i, _n in enumerate(_exposed):
        _ALIAS.setdefault(_n, (_canon, _i))

Key = tuple[str, str, str]  # ("pod", namespace or "", pod) or ("instance", "", instance)


def replica_key(labels: Mapping[str, str]) -> Key | None:
    pod = labels.get("pod")
    if pod:
        return ("pod", labels.get("namespace", ""), pod)
    inst = labels.get("instance")
    return ("instance", "", inst) if inst else None


class Naming:
    """Stable display names: the pod (or instance); `namespace/pod` only when two namespaces
    share a pod name. Once qualified a name stays qualified, so rows do not jump."""

    def __init__(self) -> None:
        self._pods: dict[str, set[str]] = {}
        self._qualified: set[str] = set()

    def observe(self, keys: Iterable[Key]) -> None:
        for _, ns, pod in keys:
            seen = self._pods.setdefault(pod, set())
            seen.add(ns)
            if len(seen) > 1:
                self._qualified.add(pod)

    def name(self, key: Key) -> str:
        _, ns, pod = key
        return clean(f"{ns}/{pod}" if pod in self._qualified and ns else pod, 120)


@dataclass(slots=True)
class _Replica:
    engines: dict[str, dict[str, tuple[int, float]]] = field(default_factory=dict)  # eng -> canon -> (alias rank, v)
    present: set[str] = field(default_factory=set)
    model_name: str | None = None
    saw_engine: bool = False
    sample_ts: float | None = None  # when Prometheus scraped these values
    process_cpu: float | None = None


# What one scalar series is, worked out once from its labels (a range result reuses it for
# every point): (key, engine, name, canonical or waiting-reason or tag, alias rank, model_name)
_Info = tuple[Key, str, str, str, int, "str | None"]
_TAGGED, _REASON, _SKIP = 0, 1, 2  # markers in the rank slot for non-alias series


def _classify(labels: Mapping[str, str]) -> _Info | None:
    key = replica_key(labels)
    if key is None:
        return None
    tag = labels.get(TAG)
    if tag is not None:
        return (key, "", "", tag, -1 - _TAGGED, None)
    name = labels.get("__name__", "")
    eng = labels.get("engine")
    eng_key = "\0" + (eng or "") if eng is not None else ""  # "\0" marks "had an engine label"
    if name == names.WAITING_BY_REASON:
        reason = labels.get("reason")
        slot = "waiting_" + reason if reason in ("capacity", "deferred") else ""
        return (key, eng_key, name, slot, -1 - _REASON, labels.get("model_name"))
    alias = _ALIAS.get(name)
    if alias is None:
        return (key, eng_key, name, "", -1 - _SKIP, labels.get("model_name"))
    return (key, eng_key, name, alias[0], alias[1], labels.get("model_name"))


def _accumulate(out: dict[Key, _Replica], tagged: list[Any], info: _Info, v: float) -> None:
    if v != v:
        return
    key, eng_key, name, slot, rank, model = info
    if rank == -1 - _TAGGED:
        tagged.append((key, slot, v))
        return
    r = out.get(key)
    if r is None:
        r = out[key] = _Replica()
    r.present.add(name)
    if r.model_name is None and model:
        r.model_name = model
    if eng_key:
        r.saw_engine = True
    ev = r.engines.get(eng_key[1:])
    if ev is None:
        ev = r.engines[eng_key[1:]] = {}
    if rank == -1 - _REASON:
        if slot:
            ev[slot] = (0, ev.get(slot, (0, 0.0))[1] + v)
        return
    if rank < 0:
        return
    old = ev.get(slot)
    # Prefer the newer alias; the same alias twice (two scrape jobs of one pod): the max.
    if old is None or rank < old[0] or (rank == old[0] and v > old[1]):
        ev[slot] = (rank, v)


def _finish(out: dict[Key, _Replica], tagged: list[Any]) -> dict[Key, _Replica]:
    for key, tag, v in tagged:
        r = out.get(key)
        if r is None:
            continue  # scrape time or CPU of a target without vLLM series
        if tag == SAMPLE_TS:
            r.sample_ts = v if r.sample_ts is None else max(r.sample_ts, v)
        elif tag == PROCESS_CPU:
            r.process_cpu = v if r.process_cpu is None else max(r.process_cpu, v)
    return out


def group_scalars(series: Iterable[Series]) -> dict[Key, _Replica]:
    """Raw gauge/counter series -> per replica, per engine canonical values (alias order kept)."""
    out: dict[Key, _Replica] = {}
    tagged: list[Any] = []
    for s in series:
        info = _classify(s.labels)
        if info is not None:
            _accumulate(out, tagged, info, s.value)
    return _finish(out, tagged)


def group_scalars_range(series: Iterable[Series]) -> dict[float, dict[Key, _Replica]]:
    """A range result of the scalars query -> timestamp -> what group_scalars gives for it."""
    per_ts: dict[float, tuple[dict[Key, _Replica], list[Any]]] = {}
    for s in series:
        info = _classify(s.labels)
        if info is None:
            continue
        for ts, v in s.points:
            slot = per_ts.get(ts)
            if slot is None:
                slot = per_ts[ts] = ({}, [])
            _accumulate(slot[0], slot[1], info, v)
    return {ts: _finish(out, tagged) for ts, (out, tagged) in sorted(per_ts.items())}


def _generation(r: _Replica) -> str:
    if r.saw_engine or not r.present.isdisjoint(V1_MARKERS):
        return "v1"
    if not r.present.isdisjoint(V0_MARKERS):
        return "v0"
    return "unknown"


def to_sample(r: _Replica, cache_config: Mapping[str, str] | None = None) -> Sample:
    engines = {
        eng: EngineSample(values={c: v for c, (_, v) in vals.items()}, hists={})
        for eng, vals in r.engines.items()
    }
    return Sample(
        engines=engines,
        generation=_generation(r),
        model_name=clean(r.model_name, 200) if r.model_name else None,
        cache_config=dict(cache_config or {}),
        process_cpu_seconds=r.process_cpu,
    )


def group_derived(series: Iterable[Series]) -> tuple[dict[Key, dict[str, float]], set[Key]]:
    """Folded derived queries -> per replica {ReplicaMetrics field: value}, and targets with up == 0.

    NaN (a quantile with no observations, a ratio over zero) is left out: "no data", not 0.
    Several series for one replica and field (two scrape jobs) keep the largest value.
    """
    derived: dict[Key, dict[str, float]] = {}
    down: set[Key] = set()
    for s in series:
        tag = s.labels.get(TAG)
        key = replica_key(s.labels)
        if not tag or key is None:
            continue
        if tag == UP_DOWN:
            down.add(key)
            continue
        _put(derived, key, tag, s.value)
    return derived, down


def group_derived_range(series: Iterable[Series]) -> dict[float, dict[Key, dict[str, float]]]:
    """A range result of folded derived queries -> timestamp -> what group_derived gives for it."""
    per_ts: dict[float, dict[Key, dict[str, float]]] = {}
    for s in series:
        tag = s.labels.get(TAG)
        key = replica_key(s.labels)
        if not tag or key is None or tag == UP_DOWN:
            continue
        for ts, v in s.points:
            d = per_ts.get(ts)
            if d is None:
                d = per_ts[ts] = {}
            _put(d, key, tag, v)
    return per_ts


def _put(derived: dict[Key, dict[str, float]], key: Key, tag: str, v: float) -> None:
    if not math.isfinite(v):
        return
    d = derived.get(key)
    if d is None:
        d = derived[key] = {}
    if tag not in d or v > d[tag]:
        d[tag] = v


def cache_configs(series: Iterable[Series]) -> dict[Key, dict[str, str]]:
    """vllm:cache_config_info labels per replica (engine "0" or the first engine wins)."""
    out: dict[Key, tuple[str, dict[str, str]]] = {}
    skip = {"__name__", "engine", "model_name", "job", "instance", "pod", "namespace", "container",
            "endpoint", "service", "server"}
    for s in series:
        key = replica_key(s.labels)
        if key is None:
            continue
        eng = s.labels.get("engine", "")
        if key in out and out[key][0] <= eng:
            continue
        out[key] = (eng, {clean(k, 60): clean(v, 120) for k, v in s.labels.items() if k not in skip})
    return {k: v for k, (_, v) in out.items()}


def build_scrapes(
    ts: float,  # used where Prometheus gave no scrape time for a replica
    replicas: Mapping[Key, _Replica],
    derived: Mapping[Key, Mapping[str, float]],
    naming: Naming,
    gpus: Mapping[str, GpuSample] | None = None,
    configs: Mapping[Key, Mapping[str, str]] | None = None,
    latency_s: float | None = None,
) -> list[Scrape]:
    out = []
    for key, r in replicas.items():
        name = naming.name(key)
        kind, ns, pod = key
        out.append(
            Scrape(
                ts=r.sample_ts if r.sample_ts is not None else ts,
                replica=name,
                sample=to_sample(r, (configs or {}).get(key)),
                gpu=(gpus or {}).get(name),
                pod=PodInfo(namespace=clean(ns, 120), name=clean(pod, 120)) if kind == "pod" and ns else None,
                latency_s=latency_s,
                derived=dict(derived.get(key, {})),
            )
        )
    return out


def pod_labels(keys: Iterable[Key], naming: Naming) -> dict[str, tuple[str | None, str | None]]:
    """Replica name -> (namespace, pod) as the GPU join wants them."""
    return {naming.name(k): (k[1] or None, k[2] if k[0] == "pod" else None) for k in keys}

"""GPU signals from exporter series in Prometheus, joined to the replicas they serve.

NVIDIA: DCGM exporter (`DCGM_FI_*`, names in metrics.names.DCGM). AMD: device-metrics-exporter
(`gpu_*`, lower-case). Join order, per replica:

1. pod label: the exporter's kubelet pod-resources mapping labels each GPU with the pod using it
   (`exported_pod`/`exported_namespace` when Prometheus renamed them to keep the exporter's own
   target labels);
2. node + GPU UUID, or node + device index/name, from an allocation the caller supplies
   (the pod's node and the GPUs the kubelet gave it);
3. node alone when the replica is the only one on its node (whole-node tensor parallelism).

The join used is recorded in GpuSample.join so the screen can say how a GPU row was matched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ...metrics import names
from ...metrics.extract import to_gpu
from ...metrics.parser import Page
from ...model import GpuDevice, GpuProcess, GpuSample
from ..promclient import Series
from . import reasons

_MIB = 1024.0 * 1024.0
_BLANK = 9.0e18  # DCGM "no value" sentinels sit near 2**63

# AMD device-metrics-exporter series -> field. VRAM in MiB (amdsmi's unit); activity in %.
AMD = {
    "gpu_used_vram": "vram_used_mib",
    "gpu_free_vram": "vram_free_mib",
    "gpu_total_vram": "vram_total_mib",
    "gpu_gfx_activity": "util_pct",
    "gpu_junction_temperature": "temperature_c",
    "gpu_edge_temperature": "edge_temperature_c",
    "gpu_ecc_uncorrect_total": "ecc_uncorrected",
    "gpu_package_power": "power_w",  # MI3xx
    "gpu_power_usage": "power_w",
}
# Violation residency (% of time throttled, recent window) -> throttle reason when > 0.
AMD_THROTTLE = {
    "gpu_violation_processor_hot_residency_percentage": reasons.PROCHOT,
    "gpu_violation_socket_thermal_residency_percentage": reasons.SOCKET_THERMAL,
    "gpu_violation_vr_thermal_residency_percentage": reasons.VR_THERMAL,
    "gpu_violation_hbm_thermal_residency_percentage": reasons.HBM_THERMAL,
    "gpu_violation_ppt_residency_percentage": reasons.PPT,
}

# Fields the back-fill needs (sparklines: memory and compute only).
SPARK_FIELDS = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "gpu_used_vram",
    "gpu_total_vram",
    "gpu_free_vram",
    "gpu_gfx_activity",
)

HOST_LABELS = ("Hostname", "hostname", "node", "kubernetes_node", "nodename")
# Labels kept by the query's aggregation: identity, placement and pod mapping.
KEEP_LABELS = (
    "__name__", "gpu", "UUID", "uuid", "device", "modelName", "GPU_I_ID", *HOST_LABELS,
    "pod", "namespace", "container", "exported_pod", "exported_namespace", "exported_container",
    "gpu_id", "gpu_uuid", "serial_number", "card_model", "gpu_partition_id",
)


def metric_names(fields: Iterable[str] | None = None) -> tuple[str, ...]:
    every = (*names.DCGM, *AMD, *AMD_THROTTLE)
    return tuple(n for n in every if fields is None or n in fields)


def gpu_query(match: str = "", fields: Iterable[str] | None = None) -> str:
    """One query for every GPU field of both vendors, only the labels the join needs."""
    regex = "|".join(metric_names(fields))
    sel = "{" + ",".join(x for x in (f'__name__=~"{regex}"', match) if x) + "}"
    return f"max by ({', '.join(KEEP_LABELS)}) ({sel})"


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    """Where a replica's GPUs are: its node and, when known, which devices it was given."""

    node: str
    uuids: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()  # GPU index ("0") or device name ("nvidia0")


@dataclass(slots=True)
class DeviceRows:
    """All series of one physical GPU (or MIG instance) at one instant."""

    vendor: str  # "nvidia" | "amd"
    host: str | None
    uuid: str | None
    index: str
    device: str | None
    pod: str | None
    namespace: str | None
    rows: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)


def _first(labels: Mapping[str, str], keys: Iterable[str]) -> str | None:
    for k in keys:
        v = labels.get(k)
        if v:
            return v
    return None


def index_devices(series: Iterable[tuple[dict[str, str], float]]) -> list[DeviceRows]:
    """Group (labels, value) rows by GPU. Rows without a known metric name are ignored."""
    devs: dict[tuple[Any, ...], DeviceRows] = {}
    for labels, value in series:
        name = labels.get("__name__", "")
        if name in names.DCGM:
            vendor = "nvidia"
            uuid = labels.get("UUID") or labels.get("uuid")
            index = labels.get("gpu", "")
            part = labels.get("GPU_I_ID", "")
        elif name in AMD or name in AMD_THROTTLE:
            vendor = "amd"
            uuid = labels.get("gpu_uuid") or labels.get("serial_number")
            index = labels.get("gpu_id", "")
            part = labels.get("gpu_partition_id", "")
        else:
            continue
        host = _first(labels, HOST_LABELS)
        key = (vendor, host, uuid or index, part)
        d = devs.get(key)
        if d is None:
            d = devs[key] = DeviceRows(
                vendor=vendor,
                host=host,
                uuid=uuid,
                index=index,
                device=labels.get("device"),
                pod=labels.get("exported_pod") or labels.get("pod") or None,
                namespace=labels.get("exported_namespace") or labels.get("namespace") or None,
            )
        d.rows.setdefault(name, []).append((labels, value))
    return list(devs.values())


def to_sample(devs: list[DeviceRows], join: str) -> GpuSample | None:
    """One replica's devices as a GpuSample (NVIDIA through the shared DCGM page mapping)."""
    nvidia: dict[str, list[Any]] = {}
    out: list[GpuDevice] = []
    for d in devs:
        if d.vendor == "nvidia":
            for name, rows in d.rows.items():
                nvidia.setdefault(name, []).extend(rows)
        else:
            dev = _amd_device(d)
            if dev is not None:
                out.append(dev)
    if nvidia:
        g = to_gpu(Page(samples=nvidia), source="dcgm")
        if g is not None:
            out[:0] = g.devices
    if not out:
        return None
    source = "dcgm" if nvidia else "amd-exporter"
    return GpuSample(devices=tuple(out), source=source, join=join)


def _amd_device(d: DeviceRows) -> GpuDevice | None:
    f: dict[str, float] = {}
    active: list[str] = []
    name = container = None
    for metric, rows in d.rows.items():
        for labels, v in rows:
            if v != v or abs(v) >= _BLANK:
                continue
            name = name or labels.get("card_model")
            container = container or labels.get("exported_container") or labels.get("container")
            if metric in AMD_THROTTLE:
                if v > 0 and AMD_THROTTLE[metric] not in active:
                    active.append(AMD_THROTTLE[metric])
            else:
                f[AMD[metric]] = v
    if not f and not active:
        return None
    used, total = f.get("vram_used_mib"), f.get("vram_total_mib")
    if total is None and used is not None and "vram_free_mib" in f:
        total = used + f["vram_free_mib"]
    return GpuDevice(
        index=d.index,
        uuid=d.uuid,
        name=name,
        memory_used_bytes=used * _MIB if used is not None else None,
        memory_total_bytes=total * _MIB if total is not None else None,
        util_pct=f.get("util_pct"),
        throttle_reasons=tuple(active),
        ecc_uncorrected=f.get("ecc_uncorrected"),
        temperature_c=f.get("temperature_c", f.get("edge_temperature_c")),
        power_w=f.get("power_w"),
        # the exporter's pod mapping: the pod using this GPU (no PIDs in exporter series)
        processes=(GpuProcess(pod=d.pod, namespace=d.namespace, container=container or None),) if d.pod else (),
    )


def assign(
    devs: list[DeviceRows],
    replicas: Mapping[str, tuple[str | None, str | None]],
    allocations: Mapping[str, GpuAllocation] | None = None,
) -> dict[str, tuple[str, list[DeviceRows]]]:
    """replica name -> (join used, its devices). `replicas` gives each one's (namespace, pod)."""
    by_pod: dict[tuple[str | None, str], list[DeviceRows]] = {}
    by_pod_only: dict[str, list[DeviceRows]] = {}
    by_uuid: dict[tuple[str | None, str], DeviceRows] = {}
    by_index: dict[tuple[str | None, str], list[DeviceRows]] = {}
    by_host: dict[str | None, list[DeviceRows]] = {}
    for d in devs:
        if d.pod:
            by_pod.setdefault((d.namespace, d.pod), []).append(d)
            by_pod_only.setdefault(d.pod, []).append(d)
        if d.uuid:
            by_uuid[(d.host, d.uuid)] = d
        by_index.setdefault((d.host, d.index), []).append(d)
        if d.device:
            by_index.setdefault((d.host, d.device), []).append(d)
        by_host.setdefault(d.host, []).append(d)

    allocations = allocations or {}
    per_node: dict[str, int] = {}
    for a in allocations.values():
        per_node[a.node] = per_node.get(a.node, 0) + 1

    out: dict[str, tuple[str, list[DeviceRows]]] = {}
    for name, (ns, pod) in replicas.items():
        found: list[DeviceRows] = []
        how = ""
        if pod:
            found = by_pod.get((ns, pod), []) if ns else by_pod_only.get(pod, [])
            if not found and ns:
                found = by_pod.get((None, pod), [])
            how = "pod label"
        alloc = allocations.get(name)
        if not found and alloc is not None:
            if alloc.uuids:
                found = [by_uuid[(alloc.node, u)] for u in alloc.uuids if (alloc.node, u) in by_uuid]
                how = "node+uuid"
            if not found and alloc.devices:
                seen: dict[int, DeviceRows] = {}
                for dv in alloc.devices:
                    for d in by_index.get((alloc.node, dv), []):
                        seen[id(d)] = d
                found = list(seen.values())
                how = "node+device"
            if not found and not alloc.uuids and not alloc.devices and per_node.get(alloc.node) == 1:
                found = list(by_host.get(alloc.node, []))
                how = "node (only replica on it)"
        if found:
            out[name] = (how, found)
    return out


def join(
    devs: list[DeviceRows],
    replicas: Mapping[str, tuple[str | None, str | None]],
    allocations: Mapping[str, GpuAllocation] | None = None,
) -> dict[str, GpuSample]:
    """replica name -> its GPUs (see assign for the join order)."""
    out: dict[str, GpuSample] = {}
    for name, (how, found) in assign(devs, replicas, allocations).items():
        g = to_sample(found, how)
        if g is not None:
            out[name] = g
    return out


def join_series(
    series: Iterable[Series],
    replicas: Mapping[str, tuple[str | None, str | None]],
    allocations: Mapping[str, GpuAllocation] | None = None,
) -> dict[str, GpuSample]:
    """Instant-query result -> replica name -> GpuSample."""
    return join(index_devices((s.labels, s.value) for s in series), replicas, allocations)


def join_range(
    series: Iterable[Series],
    replicas: Mapping[str, tuple[str | None, str | None]],
    allocations: Mapping[str, GpuAllocation] | None = None,
) -> dict[float, dict[str, GpuSample]]:
    """Range-query result -> timestamp -> replica name -> GpuSample.

    Labels do not change along a series, so devices are indexed and joined once; only the
    values are looked up per timestamp.
    """
    series = list(series)
    points: list[dict[float, float]] = [dict(s.points) for s in series]
    # Index with each row's value slot holding its series number.
    plan = assign(index_devices((s.labels, i) for i, s in enumerate(series)), replicas, allocations)
    stamps = sorted({ts for p in points for ts in p})
    out: dict[float, dict[str, GpuSample]] = {ts: {} for ts in stamps}
    for name, (how, devs) in plan.items():
        for ts in stamps:
            at = [
                DeviceRows(d.vendor, d.host, d.uuid, d.index, d.device, d.pod, d.namespace, {
                    metric: [(labels, points[int(i)][ts]) for labels, i in rows if ts in points[int(i)]]
                    for metric, rows in d.rows.items()
                })
                for d in devs
            ]
            g = to_sample(at, how)
            if g is not None:
                out[ts][name] = g
    return out

"""What the GPU panel (`u`) shows for one replica: its GPUs as the last scrape carried them, where
they came from, and, when there are none, why (said, never drawn as zeros).

Pure: reads a Monitor's history and the source's own attributes (duck-typed: the core never
imports a screen, and a source is never asked to do anything). Throttle reasons are decoded to
words here so every screen says them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import GpuDevice, GpuSample
from .textsafe import clean

# throttle reason names (metrics.names.THROTTLE_BITS, sources.gpu.reasons) -> words
THROTTLE_WORDS = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "HW slowdown",
    "sw_thermal_slowdown": "thermal (software)",
    "hw_thermal_slowdown": "thermal (hardware)",
    "hw_power_brake_slowdown": "HW power brake",
    "prochot_thermal": "thermal (PROCHOT)",
    "ppt_power_cap": "power cap (PPT)",
    "socket_thermal": "thermal (socket)",
    "vr_thermal": "thermal (voltage regulator)",
    "hbm_thermal": "thermal (HBM)",
}

SOURCE_WORDS = {
    "dcgm": "DCGM exporter",
    "amd-exporter": "AMD device-metrics-exporter",
    "nvml": "local NVML",
    "amdsmi": "local amdsmi",
    "nvidia-smi": "nvidia-smi in the pod",
    "record": "recording",
}


def throttle_words(reasons: tuple[str, ...]) -> list[str]:
    """Each active reason in words; an unknown name is shown as it came, cleaned."""
    return [THROTTLE_WORDS.get(r) or clean(r, 40) for r in reasons]


@dataclass(frozen=True, slots=True)
class GpuPanel:
    replica: str
    devices: tuple[GpuDevice, ...]  # empty: see `absent`
    source: str  # where the devices came from, in words ("DCGM exporter (simulated)")
    join: str  # how they were matched to the replica ("pod label", ...)
    node: str | None
    age_s: float | None  # seconds since the scrape they came from (None: no scrape)
    stale: bool  # the replica's last scrape failed: these are the last good scrape's
    absent: str | None  # why there are no devices; None when there are


def simulated(source: Any) -> bool:
    """The demo's source: a simulated fleet (its clock runs at `sim_speed`)."""
    return getattr(source, "sim_speed", None) is not None


def why_absent(source: Any, replica: str, namespace: str | None, pod: str | None) -> str:
    """Why the source gave this replica no GPU, from what the source is (one line)."""
    if source is None:
        return "no source"
    if hasattr(source, "ports") and hasattr(source, "gpus"):  # --gpu local (LocalGpuSource)
        if replica not in source.ports:
            return "not served on this host: local NVML reads only this node's GPUs"
        return f"local {clean(str(source.gpu_source))} listed no GPU for it on the last refresh"
    if hasattr(source, "gpu_query"):  # Prometheus
        if source.gpu_query is None:
            return "GPU series are off (--no-gpu)"
        where = f" (pod {clean(pod)} in {clean(namespace or '?')})" if pod else ""
        return f"no DCGM series for this pod in Prometheus{where}: no pod label, allocation or node matched"
    if hasattr(source, "gpu_exec"):  # Kubernetes discovery
        ex = source.gpu_exec
        if ex is None:
            return "no DCGM exporter scraped for this pod, and nvidia-smi in the pod is off (--gpu-exec)"
        err = ex.last_error(namespace, pod) if namespace and pod else None
        return f"nvidia-smi in the pod: {clean(err)}" if err else "nvidia-smi in the pod has not answered yet"
    direct = getattr(source, "_direct", source)
    targets = getattr(direct, "targets", None)
    if isinstance(targets, tuple):
        t = next((t for t in targets if getattr(t, "name", None) == replica), None)
        if t is not None and not getattr(t, "gpu_url", None):
            return "no DCGM exporter page given for this replica (--gpu-url)"
        if t is not None:
            return f"the DCGM page {clean(t.gpu_url)} was unreadable or had no series for it"
    return f"the source ({clean(str(getattr(source, 'description', '?')), 60)}) gave no GPU series for it"


def panel_for(monitor: Any, replica: str, now: float) -> GpuPanel:
    """The panel of `replica` from the monitor's last refresh."""
    h = monitor.histories.get(replica)  # only its last good scrape: no copy of its points
    last_ok = getattr(h, "last_ok", None)
    stale = h is not None and h.last_error is not None
    view = next((r for r in monitor.state.replicas if r.name == replica), None)
    pod = view.pod if view is not None else None
    node = pod.node if pod is not None else None
    source = monitor.source
    sim = " (simulated)" if simulated(source) else ""
    gpu: GpuSample | None = last_ok.gpu if last_ok is not None else None
    age = now - last_ok.ts if last_ok is not None else None
    if gpu is None or not gpu.devices:
        if h is None:
            why = "the monitor does not know this replica"
        elif last_ok is None:
            why = "no good scrape of this replica yet"
        else:
            why = why_absent(source, replica, pod.namespace if pod else None, pod.name if pod else None)
        return GpuPanel(replica, (), "", "", node, age, stale, why)
    src = SOURCE_WORDS.get(gpu.source, clean(gpu.source or "?", 30)) + sim
    join = clean(gpu.join, 120) or "its own exporter page"  # --gpu-url, the demo's
    return GpuPanel(replica, gpu.devices, src, join, node, age, stale, None)

"""GPU signals per replica: exporter series in Prometheus (dcgm), the local driver (nvml,
amdsmi_sampler) and nvidia-smi run inside a pod (nvidia_smi)."""

from .errors import GpuUnavailable

__all__ = ["GpuUnavailable"]

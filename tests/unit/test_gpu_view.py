"""What the GPU panel (`u`) reads: power and the processes on each GPU from NVML (faked at the
pynvml edge: no GPU where this was written) and from a DCGM exporter's pod mapping labels,
throttle reasons in words, and the reason a replica has no GPU data, per source."""

from __future__ import annotations

import types

from tests.unit.test_gpu_samplers import FakeNvml, h100
from tui.core.gpu_view import THROTTLE_WORDS, throttle_words, why_absent
from tui.core.metrics import names
from tui.core.metrics.extract import parse_dcgm, to_gpu
from tui.core.sources.direct import DirectSource, Target
from tui.core.sources.gpu.nvml import NvmlSampler

GIB = 1024**3

# the exporter's template order (dcgm-exporter render_metrics.go), pod mapping labels last
DCGM_PAGE = """\
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="vllm",namespace="inference",pod="vllm-a"} 72000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="",namespace="",pod=""} 500
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="vllm",namespace="inference",pod="vllm-a"} 9000
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="",namespace="",pod=""} 80500
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="vllm",namespace="inference",pod="vllm-a"} 612.5
# HELP DCGM_FI_DEV_CLOCK_THROTTLE_REASONS Current clock throttle reasons.
# TYPE DCGM_FI_DEV_CLOCK_THROTTLE_REASONS gauge
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="vllm",namespace="inference",pod="vllm-a"} 76
"""


class PowerNvml(FakeNvml):
    """FakeNvml plus power, its limit and the compute processes with their names."""

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        return self._field(h, "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, h):  # noqa: N802
        return self._field(h, "limit_mw")

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        return [types.SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._field(h, "procs")]

    def nvmlSystemGetProcessName(self, pid):  # noqa: N802
        if pid == 4242:
            raise self.NVMLError_NotSupported("Not Found")  # another PID namespace
        return b"python3 -m vllm\x1b[2J"


def test_nvml_gives_power_and_each_process_with_its_memory():
    lib = PowerNvml([h100(power_mw=601170, limit_mw=700000, reasons=0x4,
                          procs=[(1234, 70 * GIB), (4242, None)])])
    (d,) = NvmlSampler(lib).devices()
    assert d.power_w == 601.17 and d.power_limit_w == 700.0
    assert throttle_words(d.throttle_reasons) == ["power cap"]
    p1, p2 = d.processes
    assert (p1.pid, p1.used_memory_bytes) == (1234, 70.0 * GIB)
    assert p1.name is not None and "\x1b" not in p1.name and p1.name.startswith("python3 -m vllm")
    assert (p2.pid, p2.used_memory_bytes, p2.name) == (4242, None, None)  # not known: None, not 0


def test_nvml_without_power_or_process_calls_reports_none():
    (d,) = NvmlSampler(FakeNvml([h100()])).devices()  # a driver answering none of them
    assert d.power_w is None and d.power_limit_w is None and d.processes == ()


def test_dcgm_pod_mapping_names_the_pod_and_container_and_power_is_read():
    g = to_gpu(parse_dcgm(DCGM_PAGE))
    assert g is not None
    d0, d1 = g.devices
    assert d0.power_w == 612.5 and d1.power_w is None
    (p,) = d0.processes
    assert (p.pod, p.namespace, p.container, p.pid) == ("vllm-a", "inference", "vllm", None)
    assert d1.processes == ()  # the exporter mapped no pod to GPU 1: no user known
    assert throttle_words(d0.throttle_reasons) == ["power cap", "HW slowdown", "thermal (hardware)"]  # 76 = 0x4c


def test_prometheus_renamed_pod_labels_are_read():
    page = DCGM_PAGE.replace('container="vllm",namespace="inference",pod="vllm-a"',
                             'exported_container="vllm",exported_namespace="inference",exported_pod="vllm-a",'
                             'namespace="gpu-operator",pod="dcgm-exporter-x"')
    d0 = to_gpu(parse_dcgm(page)).devices[0]
    assert (d0.processes[0].pod, d0.processes[0].namespace) == ("vllm-a", "inference")


def test_every_throttle_reason_has_words():
    known = {n for n in names.THROTTLE_BITS.values() if n not in names.BENIGN_THROTTLE}
    assert known <= set(THROTTLE_WORDS)
    assert throttle_words(("\x1b[31mnew_reason",)) == ["\\x1b[31mnew_reason"]  # unknown: shown cleaned


def test_why_absent_says_where_it_looked():
    prom = types.SimpleNamespace(gpu_query="max by (...)", description="prometheus")
    assert why_absent(prom, "r", "inference", "vllm-a").startswith(
        "no DCGM series for this pod in Prometheus (pod vllm-a in inference)")
    assert why_absent(types.SimpleNamespace(gpu_query=None), "r", None, None) == "GPU series are off (--no-gpu)"
    kube = types.SimpleNamespace(gpu_exec=None)
    assert "nvidia-smi in the pod is off" in why_absent(kube, "r", "ns", "p")
    direct = DirectSource([Target("a", "http://127.0.0.1:1/metrics"),
                           Target("b", "http://127.0.0.1:2/metrics", gpu_url="http://127.0.0.1:3/metrics")])
    assert why_absent(direct, "a", None, None) == "no DCGM exporter page given for this replica (--gpu-url)"
    assert "DCGM page http://127.0.0.1:3/metrics was unreadable" in why_absent(direct, "b", None, None)


def test_amd_exporter_power_and_pod_user():
    from tests.unit.test_gpu_dcgm import amd
    from tui.core.sources.gpu.dcgm import GpuAllocation, join_series

    kw = dict(pod="vllm-mi", namespace="inference", container="vllm")
    series = [amd("gpu_used_vram", 176931, **kw), amd("gpu_total_vram", 196592, **kw),
              amd("gpu_package_power", 512.0, **kw),
              amd("gpu_used_vram", 100, gpu_id="1"), amd("gpu_total_vram", 196592, gpu_id="1")]
    g = join_series(series, {"vllm-mi": ("inference", "vllm-mi")})["vllm-mi"]
    (d,) = g.devices
    assert d.power_w == 512.0
    (p,) = d.processes
    assert (p.pod, p.namespace, p.container, p.pid) == ("vllm-mi", "inference", "vllm", None)
    idle = join_series(series, {"r": (None, None)}, {"r": GpuAllocation("node-m", devices=("1",))})["r"]
    assert idle.devices[0].processes == () and idle.devices[0].power_w is None

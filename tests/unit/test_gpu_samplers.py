"""Local GPU samplers (NVML, amdsmi), nvidia-smi in a pod, and `kvwatch gpu`.

The missing-library paths are the real ones on a machine without a GPU driver. Values come
through small fakes at the library edge, shaped like pynvml / amdsmi and filled with the
numbers an H100 SXM (81559 MiB) and an MI300X (196592 MiB) report; no GPU was available where
these tests were written, so they are representative values, not a capture of this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes.util
import io
import os
import types

import pytest

from tui.core.sources.gpu.amdsmi_sampler import AmdSmiSampler, import_amdsmi
from tui.core.sources.gpu.errors import GpuUnavailable
from tui.core.sources.gpu.local import format_table, gpu_check, sample_local
from tui.core.sources.gpu.nvidia_smi import FIELDS, NvidiaSmiExec, argv, parse_query_gpu
from tui.core.sources.gpu.nvml import NvmlSampler

MIB = 1024 * 1024


def _has_nvml_driver() -> bool:
    return ctypes.util.find_library("nvidia-ml") is not None or os.path.exists("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")


def _has_rocm() -> bool:
    return os.path.exists("/opt/rocm/lib/libamd_smi.so")


no_nvidia = pytest.mark.skipif(_has_nvml_driver(), reason="an NVIDIA driver is installed here")
no_rocm = pytest.mark.skipif(_has_rocm(), reason="ROCm is installed here")


# -- a pynvml-shaped fake ------------------------------------------------------------------------


class FakeNvml:
    """The pynvml calls the sampler makes, answering from a list of per-GPU dicts."""

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_TEMPERATURE_GPU = 0

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's naming)
        pass

    class NVMLError_DriverNotLoaded(NVMLError):  # noqa: N801
        pass

    def __init__(self, gpus: list[dict], init_error: type[Exception] | None = None, legacy: bool = False):
        self.gpus = gpus
        self.init_error = init_error
        self.inited = self.shut = 0
        if legacy:  # before r535 only the old throttle call exists
            self.nvmlDeviceGetCurrentClocksThrottleReasons = self._reasons
        else:
            self.nvmlDeviceGetCurrentClocksEventReasons = self._reasons

    def nvmlInit(self):  # noqa: N802
        if self.init_error is not None:
            raise self.init_error()
        self.inited += 1

    def nvmlShutdown(self):  # noqa: N802
        self.shut += 1

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return self.gpus[i]

    def _field(self, h, key):
        v = h.get(key)
        if v is None:
            raise self.NVMLError_NotSupported("Not Supported")
        return v

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        used, total = self._field(h, "mem")
        return types.SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return types.SimpleNamespace(gpu=self._field(h, "util"), memory=40)

    def _reasons(self, h):
        return self._field(h, "reasons")

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):  # noqa: N802
        assert (kind, counter) == (1, 0)  # uncorrected, volatile
        return self._field(h, "ecc")

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        return self._field(h, "temp")

    def nvmlDeviceGetUUID(self, h):  # noqa: N802
        return h["uuid"]

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return h["name"]


H100 = dict(name="NVIDIA H100 80GB HBM3", mem=(73812 * MIB, 81559 * MIB), util=97, reasons=0x1, ecc=0, temp=61)


def h100(**kw) -> dict:
    return {**H100, "uuid": "GPU-3f1c2d7a-5b6e-4c1d-9a8b-0e1f2a3b4c5d", **kw}


@no_nvidia
def test_nvml_without_driver_is_one_clear_line():
    with pytest.raises(GpuUnavailable) as ei:
        NvmlSampler().open()
    assert str(ei.value) == "NVML unavailable: NVIDIA driver library not found (libnvidia-ml.so.1)"


def test_nvml_driver_not_loaded_is_one_clear_line():
    with pytest.raises(GpuUnavailable, match="NVML unavailable: NVIDIA driver not loaded"):
        NvmlSampler(FakeNvml([], init_error=FakeNvml.NVMLError_DriverNotLoaded)).open()


def test_nvml_values_and_benign_clock_reasons():
    lib = FakeNvml([h100(), h100(uuid="GPU-2", reasons=0x1 | 0x40, ecc=2, util=12)])
    with NvmlSampler(lib) as s:
        g = s.sample()
    assert lib.inited == 1 and lib.shut == 1
    d0, d1 = g.devices
    assert d0.memory_used_bytes == 73812 * MIB and d0.memory_total_bytes == 81559 * MIB
    assert d0.util_pct == 97 and d0.temperature_c == 61 and d0.ecc_uncorrected == 0
    assert d0.throttle_reasons == ()  # gpu_idle is not throttling
    assert d1.throttle_reasons == ("hw_thermal_slowdown",)
    assert g.count == 2 and g.worst is d1 and g.ecc_uncorrected == 2
    assert g.source == "nvml" and g.join == "local"


def test_nvml_unsupported_fields_are_none_and_old_drivers_use_the_throttle_call():
    lib = FakeNvml([h100(mem=None, ecc=None, reasons=0x4)], legacy=True)
    (d,) = NvmlSampler(lib).devices()
    assert d.memory_used_bytes is None and d.memory_pct is None and d.ecc_uncorrected is None
    assert d.throttle_reasons == ("sw_power_cap",)


def test_nvml_names_from_hostile_bytes_are_cleaned():
    lib = FakeNvml([h100(name=b"NVIDIA \x1b[2JH100", uuid=b"GPU-1")])
    (d,) = NvmlSampler(lib).devices()
    assert d.name == "NVIDIA \\x1b[2JH100" and d.uuid == "GPU-1"


# -- amdsmi ---------------------------------------------------------------------------------------


@no_rocm
def test_amdsmi_without_rocm_is_one_line_and_silent(capfd):
    for _ in range(2):  # the failed import is retried by Python each time: stay quiet each time
        with pytest.raises(GpuUnavailable) as ei:
            import_amdsmi()
        assert str(ei.value) == "amdsmi unavailable: ROCm library not found (libamd_smi.so)"
    out, err = capfd.readouterr()
    assert out == "" and err == ""


class FakeAmdSmi:
    class AmdSmiLibraryException(Exception):
        pass

    AmdSmiTemperatureType = types.SimpleNamespace(EDGE=0, HOTSPOT=1, JUNCTION=1, VRAM=2)
    AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT=0)

    def __init__(self, gpus: list[dict], init_error: str | None = None):
        self.gpus, self.init_error = gpus, init_error

    def amdsmi_init(self):
        if self.init_error:
            raise self.AmdSmiLibraryException(self.init_error)

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return list(range(len(self.gpus)))

    def amdsmi_get_gpu_vram_usage(self, h):
        return self.gpus[h]["vram"]

    def amdsmi_get_gpu_activity(self, h):
        return self.gpus[h]["activity"]

    def amdsmi_get_gpu_total_ecc_count(self, h):
        return self.gpus[h]["ecc"]

    def amdsmi_get_violation_status(self, h):
        return self.gpus[h]["violation"]

    def amdsmi_get_gpu_asic_info(self, h):
        return {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1"}

    def amdsmi_get_gpu_device_uuid(self, h):
        return f"{h:02d}ff74a1-0000-1000-80cc-6c6f9a1e2b3c"

    def amdsmi_get_temp_metric(self, h, kind, metric):
        if kind == self.AmdSmiTemperatureType.EDGE:
            raise self.AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")  # MI300 has no edge sensor
        return self.gpus[h]["junction"]


MI300X = dict(
    vram={"vram_total": 196592, "vram_used": 176931},
    activity={"gfx_activity": 88, "umc_activity": 41, "mm_activity": "N/A"},
    ecc={"correctable_count": 0, "uncorrectable_count": 0, "deferred_count": 0},
    violation={"active_prochot_thrm": False, "active_ppt_pwr": False, "active_socket_thrm": False,
               "active_vr_thrm": "N/A", "active_hbm_thrm": False},
    junction=71,
)


def test_amdsmi_values_and_violations():
    hot = {**MI300X, "violation": {**MI300X["violation"], "active_socket_thrm": True},
           "activity": {"gfx_activity": "N/A"}}
    with AmdSmiSampler(FakeAmdSmi([MI300X, hot])) as s:
        g = s.sample()
    d0, d1 = g.devices
    assert d0.memory_used_bytes == 176931 * MIB and d0.memory_total_bytes == 196592 * MIB
    assert d0.util_pct == 88 and d0.temperature_c == 71 and d0.throttle_reasons == ()
    assert d0.name == "AMD Instinct MI300X"
    assert d1.util_pct is None and d1.throttle_reasons == ("socket_thermal",)
    assert g.source == "amdsmi"


def test_amdsmi_init_failure_is_one_line():
    with pytest.raises(GpuUnavailable, match="amdsmi unavailable: AMDSMI_STATUS_DRIVER_NOT_LOADED"):
        AmdSmiSampler(FakeAmdSmi([], init_error="AMDSMI_STATUS_DRIVER_NOT_LOADED")).open()


# -- kvwatch gpu ----------------------------------------------------------------------------------


@no_nvidia
@no_rocm
def test_gpu_check_without_any_gpu_prints_one_line_and_exits_1(capfd):
    out = io.StringIO()
    assert gpu_check(out) == 1
    assert out.getvalue() == (
        "no GPU: NVML unavailable: NVIDIA driver library not found (libnvidia-ml.so.1); "
        "amdsmi unavailable: ROCm library not found (libamd_smi.so)\n"
    )
    assert capfd.readouterr().out == ""  # amdsmi's import noise swallowed


@no_nvidia
@no_rocm
def test_gpu_subcommand_registers_and_runs(capsys):
    from tui.commands import gpu as cmd

    parser = argparse.ArgumentParser(prog="kvwatch")
    sub = parser.add_subparsers(dest="command")
    cmd.register(sub)
    args = parser.parse_args(["gpu"])
    assert args.func(args) == 1
    assert capsys.readouterr().out.startswith("no GPU: NVML unavailable")


def test_gpu_check_prints_a_table_from_nvml():
    out = io.StringIO()
    lib = FakeNvml([h100(), h100(uuid="GPU-2", reasons=0x20)])
    assert gpu_check(out, nvml_lib=lib) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:2] == ["GPU", "NAME"]
    assert lines[1].split()[5:10] == ["72.1/79.6", "91", "97", "61", "0"] and lines[1].endswith("none")
    assert lines[2].endswith("sw_thermal_slowdown")
    assert lines[-1] == "2 GPU(s) via nvml"


def test_sample_local_falls_back_to_amdsmi():
    lib = FakeNvml([], init_error=FakeNvml.NVMLError_DriverNotLoaded)
    g = sample_local(lib, FakeAmdSmi([MI300X]))
    assert g.source == "amdsmi" and g.count == 1
    assert "AMD Instinct MI300X" in format_table(g)


# -- nvidia-smi ----------------------------------------------------------------------------------

# `nvidia-smi --query-gpu=<FIELDS> --format=csv,noheader,nounits` on an 8-GPU node: ECC off on
# one GPU ([N/A]), a MIG-enabled GPU without utilisation ([Not Supported]), a GH200-style
# unified-memory GPU ([N/A] memory), a GPU at its power cap and one in HW thermal slowdown.
SMI_OUTPUT = """\
0, GPU-3f1c2d7a-5b6e-4c1d-9a8b-0e1f2a3b4c5d, NVIDIA H100 80GB HBM3, 73812, 81559, 97, 0x0000000000000000, 61, 0
1, GPU-41a0b2c3-d4e5-4f60-8172-93a4b5c6d7e8, NVIDIA H100 80GB HBM3, 73812, 81559, 95, 0x0000000000000004, 66, 0
2, GPU-52b1c3d4-e5f6-4071-8283-a4b5c6d7e8f9, NVIDIA H100 80GB HBM3, 4, 81559, 0, 0x0000000000000001, 34, [N/A]
3, GPU-63c2d4e5-f607-4182-9394-b5c6d7e8f901, NVIDIA H100 80GB HBM3, 40960, 81559, [Not Supported], 0x0000000000000000, 48, 0
4, GPU-74d3e5f6-0718-4293-a4a5-c6d7e8f90112, NVIDIA GH200 480GB, [N/A], [N/A], 91, 0x0000000000000000, 55, 0
5, GPU-85e4f607-1829-43a4-b5b6-d7e8f9011223, NVIDIA H100 80GB HBM3, 73812, 81559, 88, 0x0000000000000040, 87, 2
"""


def test_nvidia_smi_parser_on_recorded_format():
    devs = parse_query_gpu(SMI_OUTPUT)
    assert [d.index for d in devs] == ["0", "1", "2", "3", "4", "5"]
    d0, d1, d2, d3, d4, d5 = devs
    assert d0.memory_used_bytes == 73812 * MIB and d0.memory_total_bytes == 81559 * MIB
    assert d0.util_pct == 97 and d0.temperature_c == 61 and d0.throttle_reasons == ()
    assert d1.throttle_reasons == ("sw_power_cap",)
    assert d2.throttle_reasons == () and d2.ecc_uncorrected is None  # idle is benign; ECC off
    assert d3.util_pct is None and d3.memory_pct == pytest.approx(100 * 40960 / 81559)
    assert d4.memory_used_bytes is None and d4.memory_pct is None and d4.name == "NVIDIA GH200 480GB"
    assert d5.throttle_reasons == ("hw_thermal_slowdown",) and d5.ecc_uncorrected == 2


@pytest.mark.parametrize("text", [
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n",
    'Field "clocks_event_reasons.active" is not a valid field to query.\n',
])
def test_nvidia_smi_errors_become_one_line(text):
    with pytest.raises(GpuUnavailable) as ei:
        parse_query_gpu(text)
    assert str(ei.value).startswith("nvidia-smi: ") and "\n" not in str(ei.value)


def test_nvidia_smi_skips_malformed_lines_and_empty_output():
    assert parse_query_gpu("") == ()
    devs = parse_query_gpu(SMI_OUTPUT.splitlines()[0] + "\n0, garbage\n")
    assert len(devs) == 1


def test_argv_asks_exactly_the_fields_parsed():
    a = argv()
    assert a[0] == "nvidia-smi" and a[1] == "--query-gpu=" + ",".join(FIELDS)
    assert a[2] == "--format=csv,noheader,nounits"
    assert "clocks_throttle_reasons.active" in argv(legacy=True)[1]


class Transport:
    """An exec transport the caller would build on the Kubernetes exec API."""

    def __init__(self, outputs: list, delay: float = 0.0):
        self.outputs, self.delay, self.calls = list(outputs), delay, []

    async def __call__(self, namespace, pod, container, cmd):
        self.calls.append((namespace, pod, container, tuple(cmd)))
        if self.delay:
            await asyncio.sleep(self.delay)
        out = self.outputs.pop(0)
        if isinstance(out, Exception):
            raise out
        return out


async def test_exec_runner_is_rate_limited_per_pod():
    now = [0.0]
    t = Transport([SMI_OUTPUT, SMI_OUTPUT])
    r = NvidiaSmiExec(t, min_interval_s=60, clock=lambda: now[0])
    g1 = await r.sample("inference", "vllm-0", "vllm")
    now[0] = 30.0
    g2 = await r.sample("inference", "vllm-0", "vllm")
    assert g2 is g1 and r.execs == 1
    now[0] = 61.0
    g3 = await r.sample("inference", "vllm-0", "vllm")
    assert g3 is not g1 and r.execs == 2
    assert g3.source == "nvidia-smi" and g3.join == "exec in pod" and g3.count == 6
    assert t.calls[0][:3] == ("inference", "vllm-0", "vllm") and t.calls[0][3] == argv()


async def test_exec_runner_falls_back_to_old_field_names_and_reports_failures():
    old = 'Field "clocks_event_reasons.active" is not a valid field to query.\n'
    t = Transport([old, SMI_OUTPUT.replace("0x0000000000000040", "0x0000000000000000"),
                   PermissionError("pods/exec is forbidden: User cannot create resource")])
    now = [0.0]
    r = NvidiaSmiExec(t, min_interval_s=10, clock=lambda: now[0])
    g = await r.sample("ns", "p")
    assert g is not None and t.calls[1][3] == argv(legacy=True)
    now[0] = 20.0
    assert await r.sample("ns", "p") is None
    assert "pods/exec is forbidden" in r.last_error("ns", "p")


async def test_exec_runner_times_out():
    r = NvidiaSmiExec(Transport([SMI_OUTPUT], delay=2.0), timeout_s=0.2)
    assert await r.sample("ns", "slow") is None
    assert "did not finish within 0.2s" in r.last_error("ns", "slow")

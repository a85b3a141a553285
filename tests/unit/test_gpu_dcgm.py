"""Exporter series in Prometheus -> per-replica GpuSample: both vendors, every join, odd values."""

from __future__ import annotations

import pytest

from tui.core.sources.gpu.dcgm import GpuAllocation, index_devices, join, join_range, join_series
from tui.core.sources.promclient import Series

MIB = 1024 * 1024


def nv(name: str, v: float, gpu: str = "0", uuid: str = "GPU-0", host: str = "node-a", **labels) -> Series:
    return Series({"__name__": name, "gpu": gpu, "UUID": uuid, "Hostname": host, "device": f"nvidia{gpu}",
                   "modelName": "NVIDIA H100 80GB HBM3", **labels}, ((100.0, v),))


def amd(name: str, v: float, gpu_id: str = "0", host: str = "node-m", **labels) -> Series:
    return Series({"__name__": name, "gpu_id": gpu_id, "serial_number": f"SN{gpu_id}", "hostname": host,
                   "card_model": "AMD Instinct MI300X", **labels}, ((100.0, v),))


def gpu_fields(mk, used, free, **kw) -> list[Series]:
    return [mk("DCGM_FI_DEV_FB_USED", used, **kw), mk("DCGM_FI_DEV_FB_FREE", free, **kw)]


def test_tensor_parallel_group_keeps_every_gpu_and_reports_the_worst():
    series = []
    for i, (used, util, mask) in enumerate([(60000, 95, 0), (75000, 97, 0x1), (70000, 96, 0x8), (50000, 90, 0)]):
        kw = dict(gpu=str(i), uuid=f"GPU-{i}", pod="vllm-tp4", namespace="inference")
        series += gpu_fields(nv, used, 81559 - used, **kw)
        series += [nv("DCGM_FI_DEV_GPU_UTIL", util, **kw), nv("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", mask, **kw)]
    g = join_series(series, {"vllm-tp4": ("inference", "vllm-tp4")})["vllm-tp4"]
    assert g.count == 4 and [d.index for d in g.devices] == ["0", "1", "2", "3"]
    assert g.memory_pct == pytest.approx(100 * 75000 / 81559)
    assert g.compute_pct == 97  # no PROF fields: GPU_UTIL
    assert g.throttle_reasons == ("hw_slowdown",)  # gpu_idle (0x1) is benign
    assert g.worst.index == "2"  # the throttled one, though not the fullest


def test_prof_activity_is_preferred_and_sm_active_over_engine_active():
    kw = dict(pod="p", namespace="n")
    series = [nv("DCGM_FI_DEV_GPU_UTIL", 100, **kw), nv("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.61, **kw)]
    g = join_series(series, {"p": ("n", "p")})["p"]
    assert g.compute_pct == pytest.approx(61.0)
    g = join_series(series + [nv("DCGM_FI_PROF_SM_ACTIVE", 0.42, **kw)], {"p": ("n", "p")})["p"]
    assert g.compute_pct == pytest.approx(42.0)


def test_blank_sentinels_xid_and_ecc():
    kw = dict(pod="p", namespace="n")
    series = gpu_fields(nv, 1000, 80559, **kw) + [
        nv("DCGM_FI_DEV_GPU_TEMP", 9223372036854775794, **kw),  # no sensor
        nv("DCGM_FI_DEV_XID_ERRORS", 79, **kw),
        nv("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 3, **kw),
    ]
    (d,) = join_series(series, {"p": ("n", "p")})["p"].devices
    assert d.temperature_c is None and d.xid_errors == 79 and d.ecc_uncorrected == 3


def test_same_pod_name_in_another_namespace_is_not_joined():
    series = gpu_fields(nv, 1000, 80559, pod="vllm-0", namespace="staging")
    assert join_series(series, {"vllm-0": ("inference", "vllm-0")}) == {}
    # without a namespace on the replica, the pod name alone decides
    assert "vllm-0" in join_series(series, {"vllm-0": (None, "vllm-0")})


def test_amd_exporter_series():
    kw = dict(pod="vllm-mi", namespace="inference")
    series = [
        amd("gpu_used_vram", 176931, **kw), amd("gpu_total_vram", 196592, **kw),
        amd("gpu_gfx_activity", 88, **kw), amd("gpu_junction_temperature", 71, **kw),
        amd("gpu_ecc_uncorrect_total", 0, **kw),
        amd("gpu_violation_hbm_thermal_residency_percentage", 12.5, **kw),
        amd("gpu_violation_ppt_residency_percentage", 0, **kw),
    ]
    g = join_series(series, {"vllm-mi": ("inference", "vllm-mi")})["vllm-mi"]
    (d,) = g.devices
    assert g.source == "amd-exporter" and g.join == "pod label"
    assert d.memory_used_bytes == 176931 * MIB and d.memory_pct == pytest.approx(100 * 176931 / 196592)
    assert d.util_pct == 88 and d.temperature_c == 71 and d.name == "AMD Instinct MI300X"
    assert d.throttle_reasons == ("hbm_thermal",)


def test_amd_node_join_by_device_index():
    series = [amd("gpu_used_vram", 1000, gpu_id="3"), amd("gpu_total_vram", 196592, gpu_id="3"),
              amd("gpu_used_vram", 9000, gpu_id="4"), amd("gpu_total_vram", 196592, gpu_id="4")]
    g = join_series(series, {"r": (None, None)}, {"r": GpuAllocation("node-m", devices=("4",))})["r"]
    assert g.join == "node+device" and g.count == 1 and g.devices[0].memory_used_bytes == 9000 * MIB


def test_unknown_series_and_missing_labels_do_not_break_the_index():
    rows = [({"__name__": "node_cpu_seconds_total"}, 1.0), ({"__name__": "DCGM_FI_DEV_FB_USED"}, 5.0)]
    devs = index_devices(rows)
    assert len(devs) == 1 and devs[0].host is None
    assert join(devs, {"r": (None, None)}) == {}


def test_range_join_per_timestamp():
    s = Series({"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "0", "UUID": "GPU-0", "pod": "p", "namespace": "n"},
               ((10.0, 100.0), (20.0, 200.0)))
    f = Series({"__name__": "DCGM_FI_DEV_FB_FREE", "gpu": "0", "UUID": "GPU-0", "pod": "p", "namespace": "n"},
               ((10.0, 900.0), (20.0, 800.0)))
    at = join_range([s, f], {"p": ("n", "p")})
    assert list(at) == [10.0, 20.0]
    assert at[10.0]["p"].memory_pct == pytest.approx(10.0) and at[20.0]["p"].memory_pct == pytest.approx(20.0)

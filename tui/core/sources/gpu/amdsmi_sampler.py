"""Local AMD GPUs through `amdsmi` (ROCm), for kvwatch on a GPU node.

`import amdsmi` without ROCm prints two lines to stdout and raises KeyError('libamd_smi.so');
the import runs with stdout/stderr captured and any failure becomes GpuUnavailable with one
line. The module object is injectable so tests can supply recorded values at the library edge.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from ...model import GpuDevice, GpuSample
from ...textsafe import clean
from . import reasons
from .errors import GpuUnavailable
from .library import LibrarySampler

_MIB = 1024.0 * 1024.0

# amdsmi_get_violation_status() "active_*" flags -> throttle reason.
ACTIVE_FLAGS = {
    "active_prochot_thrm": reasons.PROCHOT,
    "active_ppt_pwr": reasons.PPT,
    "active_socket_thrm": reasons.SOCKET_THERMAL,
    "active_vr_thrm": reasons.VR_THERMAL,
    "active_hbm_thrm": reasons.HBM_THERMAL,
}

_NOT_FOUND = "amdsmi unavailable: ROCm library not found (libamd_smi.so)"


def import_amdsmi() -> Any:
    """The amdsmi module, or GpuUnavailable; whatever the import prints is swallowed."""
    noise = io.StringIO()
    try:
        with contextlib.redirect_stdout(noise), contextlib.redirect_stderr(noise):
            import amdsmi
    except ModuleNotFoundError:
        raise GpuUnavailable("amdsmi unavailable: Python package amdsmi not installed") from None
    except (KeyError, OSError, ImportError):
        raise GpuUnavailable(_NOT_FOUND) from None
    except Exception as e:  # the package runs arbitrary code at import
        raise GpuUnavailable(f"amdsmi unavailable: {clean(str(e), 160) or type(e).__name__}") from None
    return amdsmi


def _num(v: Any) -> float | None:
    """amdsmi reports unsupported values as "N/A" strings."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


class AmdSmiSampler(LibrarySampler):
    source = "amdsmi"
    SHUTDOWN = "amdsmi_shut_down"

    def open(self) -> None:
        if self._lib is not None:
            return
        lib = self._lib_arg if self._lib_arg is not None else import_amdsmi()
        try:
            lib.amdsmi_init()
        except Exception as e:  # AmdSmiLibraryException and friends: driver not loaded, no GPU
            raise GpuUnavailable(f"amdsmi unavailable: {clean(str(e), 160) or type(e).__name__}") from None
        self._lib = lib

    def devices(self) -> tuple[GpuDevice, ...]:
        self.open()
        lib = self._lib
        try:
            handles = lib.amdsmi_get_processor_handles()
        except Exception as e:
            raise GpuUnavailable(f"amdsmi unavailable: {clean(str(e), 160) or type(e).__name__}") from None
        out = []
        temp_type = getattr(lib, "AmdSmiTemperatureType", None)
        temp_metric = getattr(lib, "AmdSmiTemperatureMetric", None)
        for i, h in enumerate(handles):
            vram = self._get("amdsmi_get_gpu_vram_usage", h) or {}
            act = self._get("amdsmi_get_gpu_activity", h) or {}
            ecc = self._get("amdsmi_get_gpu_total_ecc_count", h) or {}
            viol = self._get("amdsmi_get_violation_status", h) or {}
            asic = self._get("amdsmi_get_gpu_asic_info", h) or {}
            uuid = self._get("amdsmi_get_gpu_device_uuid", h)
            temp = None
            if temp_type is not None and temp_metric is not None:
                for kind in ("HOTSPOT", "JUNCTION", "EDGE"):  # MI300 has no EDGE sensor
                    t = getattr(temp_type, kind, None)
                    if t is not None:
                        temp = _num(self._get("amdsmi_get_temp_metric", h, t, temp_metric.CURRENT))
                        if temp is not None:
                            break
            used, total = _num(vram.get("vram_used")), _num(vram.get("vram_total"))
            active = tuple(r for flag, r in ACTIVE_FLAGS.items() if viol.get(flag) is True)
            name = asic.get("market_name")
            out.append(
                GpuDevice(
                    index=str(i),
                    uuid=clean(str(uuid), 80) if uuid else None,
                    name=clean(str(name), 80) if name and name != "N/A" else None,
                    memory_used_bytes=used * _MIB if used is not None else None,
                    memory_total_bytes=total * _MIB if total is not None else None,
                    util_pct=_num(act.get("gfx_activity")),
                    throttle_reasons=active,
                    ecc_uncorrected=_num(ecc.get("uncorrectable_count")),
                    temperature_c=temp,
                )
            )
        return tuple(out)

    def sample(self) -> GpuSample:
        return GpuSample(devices=self.devices(), source=self.source, join="local")

"""Local NVIDIA GPUs through NVML (`pynvml`, distribution nvidia-ml-py), for kvwatch on a GPU node.

Every failure to reach the driver becomes GpuUnavailable with one line ("NVML unavailable:
NVIDIA driver library not found (libnvidia-ml.so.1)"), never a traceback. A field the GPU does
not support is None, not 0. The library object is injectable so tests can supply recorded
values at the library edge; the missing-library path is always the real one.
"""

from __future__ import annotations

from typing import Any

from ...metrics import names
from ...model import GpuDevice, GpuProcess, GpuSample
from ...textsafe import clean
from .errors import GpuUnavailable
from .library import LibrarySampler

# pynvml error class name -> what to tell the user.
_INIT_ERRORS = {
    "NVMLError_LibraryNotFound": "NVIDIA driver library not found (libnvidia-ml.so.1)",
    "NVMLError_DriverNotLoaded": "NVIDIA driver not loaded (is the kernel module installed?)",
    "NVMLError_NoPermission": "no permission to talk to the NVIDIA driver",
    "NVMLError_LibRmVersionMismatch": "driver library and kernel module versions differ (reboot or reinstall the driver)",
    "NVMLError_FunctionNotFound": "NVIDIA driver too old for this NVML call",
    "NVMLError_InsufficientPower": "a GPU is not powered correctly",
    "NVMLError_Unknown": "unknown NVML error",
}


def _load(lib: Any | None) -> Any:
    if lib is not None:
        return lib
    try:
        import pynvml
    except ImportError:
        raise GpuUnavailable("NVML unavailable: Python package nvidia-ml-py (pynvml) not installed") from None
    return pynvml


def _reason(e: BaseException) -> str:
    return _INIT_ERRORS.get(type(e).__name__) or clean(str(e), 160) or type(e).__name__


def _text(v: Any) -> str:
    return clean(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v), 120)


class NvmlSampler(LibrarySampler):
    """Open once, sample many times, close. `sample()` reads every GPU the driver shows."""

    source = "nvml"
    SHUTDOWN = "nvmlShutdown"

    def __init__(self, lib: Any | None = None) -> None:
        super().__init__(lib)
        self._events: Any = None  # NVML event set for XID errors; False: not available
        self._xid: dict[str, float] = {}  # GPU index -> last XID code seen (sticky, as DCGM's)

    def close(self) -> None:
        if self._events not in (None, False):
            self._get("nvmlEventSetFree", self._events)
        self._events = None
        super().close()

    def compute_pids(self) -> dict[str, set[int]] | None:
        """GPU index -> PIDs of the compute processes on it; None when the driver cannot list them."""
        self.open()
        out: dict[str, set[int]] = {}
        for i in range(self._lib.nvmlDeviceGetCount()):
            h = self._get("nvmlDeviceGetHandleByIndex", i)
            procs = self._get("nvmlDeviceGetComputeRunningProcesses", h) if h is not None else None
            if procs is None:
                return None
            out[str(i)] = {int(p.pid) for p in procs}
        return out

    def _poll_xid(self, count: int) -> bool:
        """Read pending XID events without waiting; False when the driver offers no events."""
        lib = self._lib
        if self._events is None:
            es = self._get("nvmlEventSetCreate")
            kind = getattr(lib, "nvmlEventTypeXidCriticalError", None)
            register = getattr(lib, "nvmlDeviceRegisterEvents", None)
            registered = 0
            if es is not None and kind is not None and register is not None:
                for i in range(count):
                    h = self._get("nvmlDeviceGetHandleByIndex", i)
                    try:
                        register(h, kind, es)
                        registered += 1
                    except self._field_error():
                        continue  # this GPU (e.g. a MIG-only one) offers no XID events
            self._events = es if es is not None and kind is not None and registered else False
        if self._events is False:
            return False
        wait = getattr(lib, "nvmlEventSetWait_v2", None) or getattr(lib, "nvmlEventSetWait", None)
        if wait is None:  # an NVML without event sets
            return False
        for _ in range(64):  # a burst of events is drained over a few refreshes, never forever
            try:
                data = wait(self._events, 0)
            except self._field_error():
                break  # NVML_ERROR_TIMEOUT: nothing pending
            idx = self._get("nvmlDeviceGetIndex", data.device)
            if idx is not None:
                self._xid[str(idx)] = float(data.eventData)
        return True

    def open(self) -> None:
        if self._lib is not None:
            return
        lib = _load(self._lib_arg)
        err = getattr(lib, "NVMLError", Exception)
        try:
            lib.nvmlInit()
        except err as e:
            raise GpuUnavailable(f"NVML unavailable: {_reason(e)}") from None
        except OSError as e:  # a broken library file
            raise GpuUnavailable(f"NVML unavailable: {clean(str(e), 160)}") from None
        self._lib = lib

    def _field_error(self) -> type[BaseException]:
        return getattr(self._lib, "NVMLError", Exception)

    def devices(self) -> tuple[GpuDevice, ...]:
        self.open()
        lib = self._lib
        try:
            count = lib.nvmlDeviceGetCount()
        except lib.NVMLError as e:
            raise GpuUnavailable(f"NVML unavailable: {_reason(e)}") from None
        events = self._poll_xid(count)
        out = []
        for i in range(count):
            h = self._get("nvmlDeviceGetHandleByIndex", i)
            if h is None:
                out.append(GpuDevice(index=str(i), name="(unreadable)"))
                continue
            mem = self._get("nvmlDeviceGetMemoryInfo", h)
            util = self._get("nvmlDeviceGetUtilizationRates", h)
            mask = self._get("nvmlDeviceGetCurrentClocksEventReasons", h)
            if mask is None:
                mask = self._get("nvmlDeviceGetCurrentClocksThrottleReasons", h)  # before r535
            ecc = self._get(
                "nvmlDeviceGetTotalEccErrors",
                h,
                getattr(lib, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                getattr(lib, "NVML_VOLATILE_ECC", 0),
            )
            temp = self._get("nvmlDeviceGetTemperature", h, getattr(lib, "NVML_TEMPERATURE_GPU", 0))
            uuid = self._get("nvmlDeviceGetUUID", h)
            name = self._get("nvmlDeviceGetName", h)
            power = self._get("nvmlDeviceGetPowerUsage", h)  # milliwatts
            limit = self._get("nvmlDeviceGetEnforcedPowerLimit", h)
            out.append(
                GpuDevice(
                    index=str(i),
                    uuid=_text(uuid) if uuid is not None else None,
                    name=_text(name) if name is not None else None,
                    memory_used_bytes=float(mem.used) if mem is not None else None,
                    memory_total_bytes=float(mem.total) if mem is not None else None,
                    util_pct=float(util.gpu) if util is not None else None,
                    throttle_reasons=names.throttle_names(int(mask)) if mask is not None else (),
                    ecc_uncorrected=float(ecc) if ecc is not None else None,
                    xid_errors=self._xid.get(str(i), 0.0) if events else None,
                    temperature_c=float(temp) if temp is not None else None,
                    power_w=float(power) / 1000.0 if power is not None else None,
                    power_limit_w=float(limit) / 1000.0 if limit is not None else None,
                    processes=self._processes(h),
                )
            )
        return tuple(out)

    def _processes(self, h: Any) -> tuple[GpuProcess, ...]:
        """The compute processes on one GPU: PID, its memory (None where the driver does not
        say: MIG, another user's process) and its name where the driver can read it."""
        procs = self._get("nvmlDeviceGetComputeRunningProcesses", h) or ()
        out = []
        for p in procs:
            pid = getattr(p, "pid", None)
            if pid is None:
                continue
            used = getattr(p, "usedGpuMemory", None)
            name = self._get("nvmlSystemGetProcessName", int(pid))
            out.append(GpuProcess(pid=int(pid), used_memory_bytes=float(used) if used is not None else None,
                                  name=_text(name) if name else None))
        return tuple(out)

    def sample(self) -> GpuSample:
        return GpuSample(devices=self.devices(), source=self.source, join="local")

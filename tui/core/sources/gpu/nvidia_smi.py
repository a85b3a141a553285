"""`nvidia-smi --query-gpu` run inside a serving pod (the runbooks' method), when no exporter exists.

The parser is pure. The runner is opt-in, takes the exec transport from the caller (the
Kubernetes exec API in practice: `exec_fn(namespace, pod, container, argv) -> stdout`), runs
at most `max_concurrent` execs at once and reads each pod at most once per `min_interval_s`,
returning the cached sample in between.
"""

from __future__ import annotations

import asyncio
import csv
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

from ...metrics import names
from ...model import GpuDevice, GpuSample
from ...textsafe import clean
from .errors import GpuUnavailable

FIELDS = (
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "clocks_event_reasons.active",
    "temperature.gpu",
    "ecc.errors.uncorrected.volatile.total",
)
# Drivers before r535 know the throttle mask only under its old name.
LEGACY = {"clocks_event_reasons.active": "clocks_throttle_reasons.active"}
_MIB = 1024.0 * 1024.0


def argv(legacy: bool = False) -> tuple[str, ...]:
    fields = [LEGACY.get(f, f) if legacy else f for f in FIELDS]
    return ("nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits")


def _num(v: str) -> float | None:
    """A value, or None for "[N/A]", "[Not Supported]", "[Unknown Error]", "N/A", ""."""
    v = v.strip()
    if not v or v.startswith("[") or v.upper() == "N/A":
        return None
    try:
        return float(v)
    except ValueError:
        return None


def _mask(v: str) -> int | None:
    v = v.strip()
    if not v or v.startswith("[") or v.upper() == "N/A":
        return None
    try:
        return int(v, 16) if v.lower().startswith("0x") else int(v)
    except ValueError:
        return None


def parse_query_gpu(text: str) -> tuple[GpuDevice, ...]:
    """Parse `--format=csv,noheader,nounits` output of the FIELDS query; malformed lines skipped.

    Raises GpuUnavailable when the output is an nvidia-smi error instead of data.
    """
    devices = []
    problems = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not any(c.strip() for c in row):
            continue
        if len(row) != len(FIELDS):
            problems.append(",".join(row))
            continue
        idx, uuid, name, used, total, util, mask, temp, ecc = (c.strip() for c in row)
        u, t, m = _num(used), _num(total), _mask(mask)
        devices.append(
            GpuDevice(
                index=clean(idx, 16),
                uuid=clean(uuid, 80) if uuid and not uuid.startswith("[") else None,
                name=clean(name, 80) if name and not name.startswith("[") else None,
                memory_used_bytes=u * _MIB if u is not None else None,
                memory_total_bytes=t * _MIB if t is not None else None,
                util_pct=_num(util),
                throttle_reasons=names.throttle_names(m) if m is not None else (),
                ecc_uncorrected=_num(ecc),
                temperature_c=_num(temp),
            )
        )
    if not devices and problems:
        raise GpuUnavailable(f"nvidia-smi: {clean(problems[0], 160)}")
    return tuple(devices)


ExecFn = Callable[[str, str, "str | None", Sequence[str]], Awaitable[str]]


@dataclass(slots=True)
class _Entry:
    at: float
    sample: GpuSample | None
    error: str | None


class NvidiaSmiExec:
    """Rate-limited nvidia-smi inside pods through a caller-supplied exec transport."""

    def __init__(
        self,
        exec_fn: ExecFn,
        min_interval_s: float = 60.0,
        max_concurrent: int = 2,
        timeout_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.exec_fn = exec_fn
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self.clock = clock
        self._sem = asyncio.Semaphore(max_concurrent)
        self._cache: dict[tuple[str, str, str | None], _Entry] = {}
        self._legacy: set[tuple[str, str, str | None]] = set()
        self.execs = 0  # exec calls made, for tests and the status line

    def peek(self, namespace: str, pod: str, container: str | None = None) -> GpuSample | None:
        """The last sample taken, without running anything."""
        e = self._cache.get((namespace, pod, container))
        return e.sample if e else None

    def last_error(self, namespace: str, pod: str, container: str | None = None) -> str | None:
        e = self._cache.get((namespace, pod, container))
        return e.error if e else None

    async def sample(self, namespace: str, pod: str, container: str | None = None) -> GpuSample | None:
        """This pod's GPUs, at most once per min_interval_s; None (and last_error) on failure."""
        key = (namespace, pod, container)
        now = self.clock()
        hit = self._cache.get(key)
        if hit is not None and now - hit.at < self.min_interval_s:
            return hit.sample
        self._cache[key] = _Entry(now, hit.sample if hit else None, hit.error if hit else None)  # claim the slot
        async with self._sem:
            sample, error = await self._run(key)
        self._cache[key] = _Entry(now, sample, error)
        return sample

    async def _run(self, key: tuple[str, str, str | None]) -> tuple[GpuSample | None, str | None]:
        ns, pod, container = key
        for attempt in range(2):
            legacy = key in self._legacy
            self.execs += 1
            try:
                out = await asyncio.wait_for(self.exec_fn(ns, pod, container, argv(legacy)), self.timeout_s)
            except asyncio.TimeoutError:
                return None, f"nvidia-smi in {clean(pod)} did not finish within {self.timeout_s:g}s"
            except Exception as e:  # the transport's failure (403 on pods/exec, no such container...)
                return None, f"nvidia-smi in {clean(pod)} failed: {clean(str(e), 160) or type(e).__name__}"
            if "is not a valid field" in out and not legacy and attempt == 0:
                self._legacy.add(key)
                continue
            if "command not found" in out or "executable file not found" in out:
                return None, f"nvidia-smi not found in {clean(pod)}"
            try:
                devices = parse_query_gpu(out)
            except GpuUnavailable as e:
                return None, str(e)
            if not devices:
                return None, f"nvidia-smi in {clean(pod)} listed no GPU"
            return GpuSample(devices=devices, source="nvidia-smi", join="exec in pod"), None
        return None, f"nvidia-smi in {clean(pod)} rejected the query fields"

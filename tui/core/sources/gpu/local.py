"""`kvwatch gpu`: sample this machine's GPUs once (NVML, else amdsmi) and print a table."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from ...model import GpuSample
from .amdsmi_sampler import AmdSmiSampler
from .errors import GpuUnavailable
from .nvml import NvmlSampler

_GIB = 1024.0**3


def sample_local(nvml_lib: Any | None = None, amdsmi_lib: Any | None = None) -> GpuSample:
    """One sample of the local GPUs; GpuUnavailable naming why neither library works."""
    reasons = []
    for sampler in (NvmlSampler(nvml_lib), AmdSmiSampler(amdsmi_lib)):
        try:
            with sampler:
                s = sampler.sample()
        except GpuUnavailable as e:
            reasons.append(str(e))
            continue
        if s.devices:
            return s
        reasons.append(f"{sampler.source}: no GPU found")
    raise GpuUnavailable("no GPU: " + "; ".join(reasons))


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def format_table(sample: GpuSample) -> str:
    """Plain-text table, one row per GPU, then the count and the worst device."""
    head = ("GPU", "NAME", "MEM USED/TOTAL GiB", "MEM%", "UTIL%", "TEMP C", "ECC UNCORR", "THROTTLE")
    rows = [head]
    for d in sample.devices:
        mem = "-"
        if d.memory_used_bytes is not None and d.memory_total_bytes:
            mem = f"{d.memory_used_bytes / _GIB:.1f}/{d.memory_total_bytes / _GIB:.1f}"
        rows.append(
            (
                d.index,
                (d.name or "-")[:28],
                mem,
                _f(d.memory_pct, ".0f"),
                _f(d.compute_pct, ".0f"),
                _f(d.temperature_c, ".0f"),
                _f(d.ecc_uncorrected, ".0f"),
                ",".join(d.throttle_reasons) or "none",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows]
    lines.append(f"{sample.count} GPU(s) via {sample.source}")
    return "\n".join(lines)


def gpu_check(out: TextIO | None = None, *, nvml_lib: Any | None = None, amdsmi_lib: Any | None = None) -> int:
    """Print the local GPU table (exit code 0) or one line saying why there is none (1)."""
    out = out or sys.stdout
    try:
        sample = sample_local(nvml_lib, amdsmi_lib)
    except GpuUnavailable as e:
        print(str(e), file=out)
        return 1
    print(format_table(sample), file=out)
    return 0

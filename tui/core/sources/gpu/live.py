"""The node's own GPUs in live mode: one driver read per refresh, attributed to each local server.

A server's GPUs are found from the process listening on its port (`procs`) and the GPUs whose
compute processes include it or one of its children. When that cannot be told (no listener
visible, the driver lists no compute processes, or PIDs from another namespace), the server is
given every visible GPU and the sample's `join` says why, so the evidence shows it. Everything
here blocks (driver calls, /proc): callers run it in a worker thread, once per refresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ...model import GpuSample
from .errors import GpuUnavailable
from .procs import pid_listening, with_descendants


class LocalGpus:
    """The samplers tried in order (NVML, then amdsmi); the first that opens is kept open."""

    def __init__(self, samplers: Iterable[Any] | None = None, proc: Path = Path("/proc")) -> None:
        if samplers is None:
            from .amdsmi_sampler import AmdSmiSampler
            from .nvml import NvmlSampler

            samplers = (NvmlSampler(), AmdSmiSampler())
        self._candidates = list(samplers)
        self.sampler: Any = None
        self.proc = proc
        self._pids: dict[int, int] = {}  # port -> listening PID, re-checked when it exits

    def open(self) -> str:
        """Open the first sampler that sees a GPU; its name. GpuUnavailable says why none did."""
        reasons = []
        for s in self._candidates:
            try:
                s.open()
                if s.devices():
                    self.sampler = s
                    return str(s.source)
                reasons.append(f"{s.source}: no GPU found")
            except GpuUnavailable as e:
                reasons.append(str(e))
            s.close()
        raise GpuUnavailable("no local GPU: " + "; ".join(reasons))

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None

    def _pid(self, port: int) -> int | None:
        pid = self._pids.get(port)
        if pid is not None and (self.proc / str(pid)).exists():
            return pid
        pid = pid_listening(port, self.proc)
        if pid is not None:
            self._pids[port] = pid
        return pid

    def sample_for(self, ports: Iterable[int]) -> dict[int, GpuSample]:
        """One read of every GPU, then each port's share of them (all visible GPUs, with the
        reason, where the share cannot be told)."""
        s = self.sampler
        if s is None:
            return {}
        devices = s.devices()
        by_gpu = s.compute_pids() if hasattr(s, "compute_pids") else None
        out: dict[int, GpuSample] = {}
        for port in ports:
            pid = self._pid(port)
            if pid is None:
                why = f"no process seen listening on :{port}"
            elif by_gpu is None:
                why = f"{s.source} does not list compute processes"
            else:
                mine = with_descendants(pid, self.proc)
                idx = {i for i, pids in by_gpu.items() if pids & mine}
                if idx:
                    out[port] = GpuSample(tuple(d for d in devices if d.index in idx), s.source,
                                          f"local: pid {pid} on :{port} and its children run on GPU "
                                          + ",".join(sorted(idx)))
                    continue
                why = f"pid {pid} on :{port} runs on none of them (another PID namespace?)"
            out[port] = GpuSample(devices, s.source, f"local: all visible GPUs ({why})")
        return out

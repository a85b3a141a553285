"""The node's own GPUs in live mode: which GPUs serve a local server (/proc + the driver's
compute processes), XID events, one driver read per refresh off the event loop, and the one line
said when there is no driver. NVML is faked at its edge (no GPU where this was written)."""

from __future__ import annotations

import os
import threading
import types
from pathlib import Path

import pytest
from aiohttp import web

from tests.unit.test_gpu_samplers import FakeNvml, h100, no_nvidia
from tui.core.diagnosis import Thresholds, diagnose
from tui.core.history import ReplicaHistory
from tui.core.sources.direct import DirectSource, Target
from tui.core.sources.gpu.live import LocalGpus
from tui.core.sources.gpu.nvml import NvmlSampler
from tui.core.sources.gpu.procs import pid_listening, with_descendants
from tui.core.sources.local_gpu import LocalGpuSource, choose, local_port

PAGE = ("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
        "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n")


class ProcNvml(FakeNvml):
    """FakeNvml plus compute processes per GPU, XID events, and a call counter."""

    nvmlEventTypeXidCriticalError = 8

    def __init__(self, gpus, pids=None, xids=()):
        super().__init__(gpus)
        self.pids = pids  # per GPU: list of PIDs; None: the driver cannot list them
        self.xids = list(xids)  # (gpu index, xid) pending events
        self.reads = 0
        self.threads: set[str] = set()

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        self.reads += 1
        self.threads.add(threading.current_thread().name)
        return super().nvmlDeviceGetMemoryInfo(h)

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        if self.pids is None:
            raise self.NVMLError_NotSupported("Not Supported")
        return [types.SimpleNamespace(pid=p, usedGpuMemory=1) for p in self.pids[self.gpus.index(h)]]

    def nvmlEventSetCreate(self):  # noqa: N802
        return "es"

    def nvmlDeviceRegisterEvents(self, h, kind, es):  # noqa: N802
        assert kind == 8 and es == "es"

    def nvmlEventSetWait_v2(self, es, timeout_ms):  # noqa: N802
        assert timeout_ms == 0  # never blocks the refresh
        if not self.xids:
            raise self.NVMLError("Timeout")
        i, xid = self.xids.pop(0)
        return types.SimpleNamespace(device=self.gpus[i], eventData=xid)

    def nvmlDeviceGetIndex(self, h):  # noqa: N802
        return self.gpus.index(h)


def fake_proc(tmp: Path, port: int = 8000) -> Path:
    """A /proc with pid 100 listening on `port` (IPv6 socket), child 101, grandchild 102, and 200."""
    (tmp / "net").mkdir(parents=True)
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (tmp / "net" / "tcp").write_text(head + "   0: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 "
                                     "00000000  1000        0 999 1 0000000000000000 100 0 0 10 0\n")
    (tmp / "net" / "tcp6").write_text(head + f"   0: 00000000000000000000000000000000:{port:04X} "
                                      "00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 "
                                      "00000000  1000        0 12345 1 0000000000000000 100 0 0 10 0\n")
    for pid, ppid, comm in ((100, 1, "python3"), (101, 100, "VLLM::EngineCore"), (102, 101, "pt (worker) x"),
                            (200, 1, "sshd")):
        d = tmp / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1\n")
    os.symlink("socket:[12345]", tmp / "100" / "fd" / "7")
    os.symlink("/dev/null", tmp / "100" / "fd" / "0")
    os.symlink("socket:[999]", tmp / "200" / "fd" / "3")
    return tmp


def test_the_listening_process_and_its_children_come_from_proc(tmp_path):
    proc = fake_proc(tmp_path)
    assert pid_listening(8000, proc) == 100
    assert pid_listening(8001, proc) == 200  # 0x1F41 on IPv4
    assert pid_listening(9000, proc) is None
    assert with_descendants(100, proc) == {100, 101, 102}


def test_a_local_server_gets_the_gpus_its_processes_run_on(tmp_path):
    proc = fake_proc(tmp_path)
    lib = ProcNvml([h100(uuid="GPU-a"), h100(uuid="GPU-b"), h100(uuid="GPU-c")], pids=[[555], [102], [101, 9]])
    gpus = LocalGpus([NvmlSampler(lib)], proc)
    assert gpus.open() == "nvml"
    got = gpus.sample_for([8000, 9000])
    assert [d.uuid for d in got[8000].devices] == ["GPU-b", "GPU-c"]
    assert got[8000].join == "local: pid 100 on :8000 and its children run on GPU 1,2"
    assert len(got[9000].devices) == 3
    assert got[9000].join == "local: all visible GPUs (no process seen listening on :9000)"


def test_when_the_driver_lists_no_processes_all_gpus_are_given_and_it_says_why(tmp_path):
    gpus = LocalGpus([NvmlSampler(ProcNvml([h100(), h100()], pids=None))], fake_proc(tmp_path))
    gpus.open()
    s = gpus.sample_for([8000])[8000]
    assert s.count == 2 and s.join == "local: all visible GPUs (nvml does not list compute processes)"


def test_xid_events_and_throttling_reach_the_diagnosis(tmp_path):
    from tui.core.model import EngineSample, Sample, Scrape

    lib = ProcNvml([h100(reasons=0x40), h100()], pids=[[102], []], xids=[(0, 79)])
    gpus = LocalGpus([NvmlSampler(lib)], fake_proc(tmp_path))
    gpus.open()
    g = gpus.sample_for([8000])[8000]
    assert g.xid_errors == 79 and g.throttle_reasons == ("hw_thermal_slowdown",)
    h = ReplicaHistory("r")
    sample = Sample({"0": EngineSample({"kv_usage": 0.3, "running": 2.0}, {})}, "v1")
    for ts in (1.0, 2.0):
        h.add(Scrape(ts=ts, replica="r", sample=sample, gpu=g))
    f = diagnose(h, 2.0, Thresholds())
    assert f.verdict == "node-fault"
    texts = [e.text for e in f.evidence]
    assert "XID error 79" in texts
    assert "GPU via nvml, local: pid 100 on :8000 and its children run on GPU 0" in texts


@no_nvidia
def test_without_a_driver_one_line_says_why_and_nothing_is_wrapped():
    gpus, ports, line = choose("auto", [("127.0.0.1:8000", "http://127.0.0.1:8000/metrics")])
    assert gpus is None and ports == {}
    assert line.startswith("local GPUs: off: no local GPU: NVML unavailable: ")
    assert "\n" not in line
    # a remote server: nothing is tried and nothing is said; exporter/none never touch the driver
    assert choose("auto", [("h", "http://10.9.8.7:8000/metrics")], local_names=set()) == (None, {}, None)
    assert choose("none", [("l", "http://127.0.0.1:8000/metrics")]) == (None, {}, None)


def test_local_urls_are_told_from_remote_ones():
    assert local_port("http://127.0.0.1:8000/metrics", set()) == 8000
    assert local_port("http://localhost:30000/metrics", {"localhost"}) == 30000
    assert local_port("http://[::1]:8000/metrics", set()) == 8000
    assert local_port("http://gpu-node-7:8000/metrics", {"gpu-node-7"}) == 8000
    assert local_port("http://10.0.0.5:8000/metrics", {"gpu-node-7"}) is None


async def test_live_direct_scrape_carries_the_servers_gpus_read_once_per_refresh_off_the_loop():
    """A real HTTP server on 127.0.0.1 (this process listens: real /proc), the driver faked."""
    app = web.Application()
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/plain")

    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    lib = ProcNvml([h100(uuid="GPU-other"), h100(uuid="GPU-mine")], pids=[[1], [os.getpid()]])
    try:
        targets = [Target(f"a:{port}", f"http://127.0.0.1:{port}/metrics"),
                   Target(f"b:{port}", f"http://localhost:{port}/metrics")]
        gpus, ports, line = choose("local", [(t.name, t.url) for t in targets],
                                   open_gpus=lambda: LocalGpus([NvmlSampler(lib)]))
        assert line == "local GPUs: nvml, 2 local server(s)"
        src = LocalGpuSource(DirectSource(targets, timeout=2.0), ports, gpus)
        await src.start()
        opened = lib.reads  # opening (at start-up) checked that the driver sees a GPU
        lib.threads.clear()
        scrapes = await src.poll()
        await src.close()
    finally:
        await runner.cleanup()
    assert [s.error for s in scrapes] == [None, None]
    for s in scrapes:
        assert [d.uuid for d in s.gpu.devices] == ["GPU-mine"]
        assert s.gpu.join.startswith(f"local: pid {os.getpid()} on :{port}")
    assert lib.reads - opened == 2  # one read of each GPU for the refresh, shared by both servers
    assert threading.main_thread().name not in lib.threads  # driver calls ran in a worker thread
    assert src.description.endswith("· GPUs: local nvml")


def _nvml_calls(path: Path) -> set[str]:
    import re

    return set(re.findall(r'"(nvml[A-Z]\w+)"', path.read_text()))


def test_every_nvml_call_kvwatch_makes_exists_in_the_real_library():
    # The fakes above stand at the library edge; a name the real nvidia-ml-py does not have would
    # pass here and read None on a GPU (seen on an H100: "nvml does not list compute processes"
    # because the sampler asked for "nvmlDeviceGetComputeProcesses", which pynvml does not have).
    pynvml = pytest.importorskip("pynvml")
    gpu = Path(__file__).resolve().parents[2] / "tui" / "core" / "sources" / "gpu"
    used = _nvml_calls(gpu / "nvml.py") | _nvml_calls(gpu / "library.py")
    assert "nvmlDeviceGetMemoryInfo" in used  # the scan reads the sampler's calls
    faked = {n for cls in (ProcNvml, FakeNvml) for n in vars(cls) if n.startswith("nvml") and callable(vars(cls)[n])}
    missing = sorted(n for n in used | faked if not hasattr(pynvml, n))
    assert missing == []

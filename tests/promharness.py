"""Real Prometheus for tests and benchmarks: a plain process on 127.0.0.1, fixed-format pages to
scrape, and `promtool tsdb create-blocks-from openmetrics` to load a history instantly.

Pages are real text-format 0.0.4 vLLM (V1 with `engine`, or V0 names) and DCGM-exporter pages
whose counters grow at a known rate with wall time, so a test can check what Prometheus derives.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterable, Mapping

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
MISSING = (
    "Debian's prometheus binary is not installed "
    "(apt-get install -y --no-install-recommends prometheus)"
)

TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def have_prometheus() -> bool:
    return os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- pages ------------------------------------------------------------------------------------


@dataclass
class Replica:
    """One simulated vLLM server. Counters are rate x seconds since `t0`."""

    pod: str
    namespace: str = "inference"
    kv_usage: float = 0.4
    running: float = 20
    waiting: float = 0
    preempt_per_s: float = 0.0
    gen_tokens_per_s: float = 500.0
    requests_per_s: float = 2.0
    ttft_s: float = 0.3  # every request's TTFT falls in the bucket holding this value
    engines: int = 1
    v0: bool = False
    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    t0: float = field(default_factory=time.time)


def vllm_page(r: Replica, now: float | None = None) -> str:
    """A compact, real-format page at wall time `now` (counters divided evenly over engines)."""
    now = time.time() if now is None else now
    dt = max(0.0, now - r.t0)
    out: list[str] = []
    add = out.append
    n = r.engines if not r.v0 else 1

    def fam(name: str, typ: str) -> None:
        add(f"# HELP {name} {name}")
        add(f"# TYPE {name} {typ}")

    def lab(e: int, extra: str = "") -> str:
        base = f'model_name="{r.model}"' if r.v0 else f'engine="{e}",model_name="{r.model}"'
        return "{" + base + (("," + extra) if extra else "") + "}"

    fam("process_cpu_seconds_total", "counter")
    add(f"process_cpu_seconds_total {0.25 * dt:.3f}")
    gauges = [("vllm:num_requests_running", r.running), ("vllm:num_requests_waiting", r.waiting)]
    if r.v0:
        gauges += [("vllm:gpu_cache_usage_perc", r.kv_usage), ("vllm:num_requests_swapped", 0.0),
                   ("vllm:cpu_cache_usage_perc", 0.0)]
    else:
        gauges += [("vllm:kv_cache_usage_perc", r.kv_usage)]
    for name, v in gauges:
        fam(name, "gauge")
        for e in range(n):
            share = v if name.endswith("_perc") else v / n
            add(f"{name}{lab(e)} {share!r}")
    counters = [
        ("vllm:num_preemptions_total", r.preempt_per_s),
        ("vllm:generation_tokens_total", r.gen_tokens_per_s),
        ("vllm:prompt_tokens_total", 4 * r.gen_tokens_per_s),
    ]
    for name, rate in counters:
        fam(name, "counter")
        for e in range(n):
            add(f"{name}{lab(e)} {rate * dt / n!r}")
    fam("vllm:request_success_total", "counter")
    for e in range(n):
        add(f'vllm:request_success_total{lab(e, "finished_reason=" + chr(34) + "stop" + chr(34))} '
            f"{r.requests_per_s * dt / n!r}")
    fam("vllm:cache_config_info", "gauge")
    for e in range(n):
        eng = "" if r.v0 else f'engine="{e}",'
        add(f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",{eng}gpu_memory_utilization="0.9",'
            f'num_gpu_blocks="27915"}} 1.0')
    fam("vllm:time_to_first_token_seconds", "histogram")
    reqs = r.requests_per_s * dt / n
    for e in range(n):
        for b in TTFT_BOUNDS:
            c = reqs if b >= r.ttft_s else 0.0
            add(f'vllm:time_to_first_token_seconds_bucket{lab(e, "le=" + chr(34) + repr(float(b)) + chr(34))} {c!r}')
        add(f'vllm:time_to_first_token_seconds_bucket{lab(e, "le=" + chr(34) + "+Inf" + chr(34))} {reqs!r}')
        add(f"vllm:time_to_first_token_seconds_count{lab(e)} {reqs!r}")
        add(f"vllm:time_to_first_token_seconds_sum{lab(e)} {reqs * r.ttft_s!r}")
    return "\n".join(out) + "\n"


@dataclass
class Gpu:
    """One GPU as the DCGM exporter shows it."""

    uuid: str
    gpu: str = "0"
    hostname: str = "node-a"
    pod: str = ""
    namespace: str = ""
    fb_used_mib: float = 70000.0
    fb_free_mib: float = 11000.0
    util: float = 90.0
    gr_active: float = 0.55
    throttle_mask: int = 0
    xid: float = 0.0
    model: str = "NVIDIA H100 80GB HBM3"


def dcgm_page(gpus: Iterable[Gpu]) -> str:
    fields = (
        ("DCGM_FI_DEV_FB_FREE", "gauge", lambda g: g.fb_free_mib),
        ("DCGM_FI_DEV_FB_USED", "gauge", lambda g: g.fb_used_mib),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", lambda g: g.util),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", lambda g: g.gr_active),
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", lambda g: g.throttle_mask),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", lambda g: g.xid),
    )
    gpus = list(gpus)
    out = []
    for name, typ, get in fields:
        out.append(f"# HELP {name} {name}")
        out.append(f"# TYPE {name} {typ}")
        for g in gpus:
            labels = (
                f'gpu="{g.gpu}",UUID="{g.uuid}",pci_bus_id="00000000:{int(g.gpu) + 1:02X}:00.0",'
                f'device="nvidia{g.gpu}",modelName="{g.model}",Hostname="{g.hostname}",'
                f'container="{"vllm" if g.pod else ""}",namespace="{g.namespace}",pod="{g.pod}"'
            )
            out.append(f"{name}{{{labels}}} {float(get(g))!r}")
    return "\n".join(out) + "\n"


# -- a page server ----------------------------------------------------------------------------


class PageServer:
    """Serves `routes[path]()` as text/plain 0.0.4 from a thread (independent of event loops)."""

    def __init__(self, routes: Mapping[str, Callable[[], str]] | None = None) -> None:
        self.routes: dict[str, Callable[[], str]] = dict(routes or {})
        self.hits = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                fn = server.routes.get(self.path.split("?")[0])
                server.hits += 1
                if fn is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = fn().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> "PageServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# -- Prometheus -------------------------------------------------------------------------------


@dataclass
class ScrapeTarget:
    url: str  # full URL of the metrics page
    labels: dict[str, str] = field(default_factory=dict)
    honor_labels: bool = False  # keep the page's own pod/namespace labels (DCGM pod mapping)
    job: str = ""  # default: "gpu" with honor_labels, else "vllm"


def prometheus_config(targets: Iterable[ScrapeTarget], interval: str = "1s") -> str:
    """A config with one static target per entry; the path rides in `__metrics_path__`."""
    lines = ["global:", f"  scrape_interval: {interval}", f"  evaluation_interval: {interval}", "scrape_configs:"]
    groups: dict[tuple[str, bool], list[ScrapeTarget]] = {}
    for t in targets:
        groups.setdefault((t.job or ("gpu" if t.honor_labels else "vllm"), t.honor_labels), []).append(t)
    for (job, honor), ts in groups.items():
        lines += [f"  - job_name: {job}", f"    honor_labels: {str(honor).lower()}",
                  f"    scrape_timeout: {interval}", "    static_configs:"]
        for t in ts:
            rest = t.url.split("://", 1)[1]
            addr, _, path = rest.partition("/")
            labels = {"__metrics_path__": "/" + path, **t.labels}
            lines.append(f"      - targets: ['{addr}']")
            lines.append("        labels:")
            for k, v in labels.items():
                lines.append(f"          {k}: '{v}'")
    return "\n".join(lines) + "\n"


class Prometheus:
    """`prometheus` as a child process on an ephemeral 127.0.0.1 port; always call stop()."""

    def __init__(self, workdir: Path, targets: Iterable[ScrapeTarget] = (), interval: str = "1s",
                 data_dir: Path | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(data_dir) if data_dir else self.workdir / "data"
        self.config = self.workdir / "prometheus.yml"
        self.config.write_text(prometheus_config(targets, interval))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = self.workdir / "prometheus.log"

    def start(self, timeout: float = 20.0) -> "Prometheus":
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={self.data_dir}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
             "--storage.tsdb.retention.time=30d", "--query.lookback-delta=5m"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"), start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("prometheus did not become ready")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def __enter__(self) -> "Prometheus":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_blocks(openmetrics: str | Path, data_dir: Path, workdir: Path) -> None:
    """Load OpenMetrics (text, or a file of it; with timestamps, ending in `# EOF`) as TSDB blocks."""
    if isinstance(openmetrics, Path):
        src = openmetrics
    else:
        src = Path(workdir) / "history.om"
        src.write_text(openmetrics)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    res = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(src), str(data_dir)],
                         capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise RuntimeError(f"promtool failed: {res.stderr[-2000:]}")


def om_line(name: str, labels: Mapping[str, str], value: float, ts: float) -> str:
    lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{lab}}} {value!r} {ts:.3f}"

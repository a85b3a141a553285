"""Misbehaving /metrics and Prometheus endpoints for the fault suite (issue 10) and bench_faults.

One asyncio server, 127.0.0.1 only, one port per endpoint, one mode per fault. Raw streams, not
an HTTP library, so an endpoint can hang after the request, reset the connection, trickle bytes
or lie about its encoding. Its lifetime is bounded: it stops itself after `lifetime` seconds and
on context exit, so a failing test never leaves a listener behind.

    async with FaultServer(lifetime=60) as fs:
        ok = await fs.add("healthy")
        bad = await fs.add("nan_inf")
        ... kvwatch --url ok --url bad ...

From synchronous code (the pty bench) `ThreadedFaultServer` runs the same server on its own loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.realpage import render_v1_page  # noqa: E402 - a real-size vLLM V1 (0.10) page, ~42 KB

HOST = "127.0.0.1"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ESCAPES = "\x1b[31mRED\x1b[0m\x1b]0;pwned\x07[bold red]markup[/bold red][link=http://x]l[/link]\x9b2J"


# -- pages ---------------------------------------------------------------------------------------

def healthy_page(model: str = "meta-llama/Llama-3.1-8B-Instruct", running: int = 7, kv_usage: float = 0.42,
                 seed: int = 0) -> str:
    return render_v1_page(model=model, running=running, kv_usage=kv_usage, seed=seed)


def small_page(kv_usage: float = 0.42, running: int = 7, n: int = 0, model: str = "zai-org/GLM-4.5") -> str:
    """The gauges and counters of a vLLM 0.10 page without histograms (~1.3 KB, like the
    production-stack sample in shared/reference): the shape of a long, many-record recording."""
    lab = f'engine="0",model_name="{model}"'
    out = []
    for name, typ, val in (
        ("vllm:num_requests_running", "gauge", float(running)),
        ("vllm:num_requests_waiting", "gauge", 0.0),
        ("vllm:kv_cache_usage_perc", "gauge", kv_usage),
        ("vllm:num_preemptions_total", "counter", float(n // 50)),
        ("vllm:prompt_tokens_total", "counter", 512.0 * n),
        ("vllm:generation_tokens_total", "counter", 128.0 * n),
        ("vllm:prefix_cache_queries_total", "counter", 32.0 * n),
        ("vllm:prefix_cache_hits_total", "counter", 16.0 * n),
    ):
        out += [f"# HELP {name} {name.split(':')[1].replace('_', ' ')}.", f"# TYPE {name} {typ}",
                f"{name}{{{lab}}} {val!r}"]
    return "\n".join(out) + "\n"


def _replace_sample(page: str, name: str, value: str) -> str:
    """Set every sample of series `name` (exact metric name) to the raw text `value`."""
    out = []
    for line in page.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            line = line.rsplit(" ", 1)[0] + " " + value
        out.append(line)
    return "\n".join(out) + "\n"


def nan_inf_page(preemptions: str = "+Inf", running: str = "+Inf") -> str:
    """`vllm:num_preemptions_total +Inf` and `vllm:num_requests_running +Inf` (issue 10 defect 1)."""
    page = _replace_sample(healthy_page(), "vllm:num_preemptions_total", preemptions)
    page = _replace_sample(page, "vllm:num_requests_running", running)
    return page + 'vllm:kv_cache_usage_perc{engine="1",model_name="m"} NaN\n'


def duplicate_page(first: int = 1, second: int = 50) -> str:
    """The same `vllm:num_requests_running` series twice, `first` then `second` (defect 11)."""
    page = healthy_page(running=first, kv_usage=0.30)
    dup = f'vllm:num_requests_running{{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}} {float(second)}\n'
    kv = 'vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.99\n'
    kv_last = 'vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.30\n'
    return page + dup + kv + kv_last


def escapes_page() -> str:
    """Terminal escape sequences and Rich/Textual markup in label values and the model name."""
    page = healthy_page(model="m" + ESCAPES)
    return page + f'vllm:num_requests_waiting{{engine="{ESCAPES}",model_name="x"}} 1.0\n'


def many_series_page(n: int = 100_000) -> str:
    lines = [healthy_page()]
    lines.extend(f'junk_series_total{{i="{i}",pod="p{i % 97}"}} {i}.0' for i in range(n))
    return "\n".join(lines) + "\n"


def engines_page(n: int = 90_000) -> str:
    """`n` distinct `engine` label values, ~4.0 MB: under the 4 MiB scrape cap (defect 6)."""
    out = ["# TYPE vllm:num_requests_running gauge", "# TYPE vllm:kv_cache_usage_perc gauge"]
    for e in range(n):
        out.append(f'vllm:num_requests_running{{engine="{e}"}} {e % 7}')
    for e in range(0, n, 90):
        out.append(f'vllm:kv_cache_usage_perc{{engine="{e}"}} 0.{e % 9}')
    return "\n".join(out) + "\n"


def invalid_utf8_page() -> bytes:
    page = healthy_page().encode()
    return page + b'vllm:num_requests_waiting{engine="\xff\xfe\xc3",model_name="\xed\xa0\x80"} 3.0\n'


def counter_page(n: int) -> str:
    """Counters that grow, then drop to near zero on the 4th scrape (a restarted server)."""
    page = healthy_page(seed=0)
    base = 1000.0 * n if n < 4 else 5.0 * (n - 3)
    return _replace_sample(page, "vllm:num_preemptions_total", repr(base))


HTML = (b"<!DOCTYPE html><html><head><title>Sign in</title></head><body><h1>Please sign in</h1>"
        b"<form action='/login'><input name='user'></form></body></html>\n")


@functools.lru_cache(maxsize=2)
def gzip_bomb(decompressed: int = 64 * 1024 * 1024) -> bytes:
    """A gzip member of `decompressed` zero bytes (~1000:1), built once per process."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"0" * (1 << 20)
    parts = [comp.compress(chunk) for _ in range(decompressed >> 20)]
    parts.append(comp.flush())
    return b"".join(parts)


@functools.lru_cache(maxsize=1)
def self_signed() -> tuple[str, str]:
    """(cert, key) files of a self-signed certificate for 127.0.0.1, made once per process with
    the openssl command. A client trusts it through SSL_CERT_FILE=cert."""
    d = tempfile.mkdtemp(prefix="kvwatch-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=30)
    return cert, key


def _server_tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*self_signed())
    return ctx


def long_first_line_page(length: int = 20_000) -> str:
    """A healthy page whose first line is a sample with a label value of `length` characters."""
    return f'vllm:build_info{{engine="0",note="{"x" * length}"}} 1.0\n' + healthy_page()


def after_eof_page() -> str:
    """An OpenMetrics-style `# EOF`, then samples that must not count (running 999)."""
    return (healthy_page() + "# EOF\n" +
            'vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 999.0\n')


def sglang_page(retracted: float = 5e6, running: int = 3, kv_usage: float = 0.5) -> str:
    """A small SGLang page (no `vllm:` name on it) whose counters are far from a vLLM page's."""
    lab = 'model_name="m"'
    out = []
    for name, typ, val in (("sglang:num_running_reqs", "gauge", float(running)),
                           ("sglang:num_queue_reqs", "gauge", 0.0),
                           ("sglang:token_usage", "gauge", kv_usage),
                           ("sglang:num_retracted_requests_total", "counter", retracted),
                           ("sglang:prompt_tokens_total", "counter", 9e9),
                           ("sglang:generation_tokens_total", "counter", 8e9)):
        out += [f"# TYPE {name} {typ}", f"{name}{{{lab}}} {val!r}"]
    return "\n".join(out) + "\n"


def stepback_page(n: int) -> str:
    """Preemptions 500, 499, 500, 499, ...: a counter read a step back (two pods behind one
    address, a cached page), not a restart."""
    return _replace_sample(healthy_page(), "vllm:num_preemptions_total", repr(500.0 - n % 2))


def out_of_range_page() -> str:
    """KV usage 1e300 and running -5: finite, but no engine can say them."""
    page = _replace_sample(healthy_page(), "vllm:kv_cache_usage_perc", "1e300")
    return _replace_sample(page, "vllm:num_requests_running", "-5")


def gzip_cut(page: bytes, cut: int = 64) -> bytes:
    """`page` gzipped, less its last `cut` bytes: no final block, no trailer (a stream cut short)."""
    return zlib.compress(page, 6, 31)[:-cut]


def stored_deflate(size: int, seed: int = 1) -> "Iterator[bytes]":
    """A gzip header, then non-final stored deflate blocks of pseudo-random bytes, `size` bytes in
    all: a stream that never ends and never compresses, cheap to make."""
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    block = random.Random(seed).randbytes(65535)
    piece = b"\x00" + struct.pack("<HH", 65535, 0xFFFF ^ 65535) + block
    for _ in range(max(1, size // len(piece))):
        yield piece


# -- HTTP plumbing -------------------------------------------------------------------------------

def _head(status: int, headers: dict[str, str], length: int | None) -> bytes:
    reason = {200: "OK", 302: "Found", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "X")
    lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers.items()]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send(w: asyncio.StreamWriter, body: bytes | str, status: int = 200, ctype: str = METRICS_TYPE,
                **headers: str) -> None:
    data = body.encode() if isinstance(body, str) else body
    w.write(_head(status, {"Content-Type": ctype, **headers}, len(data)) + data)
    await w.drain()


async def _reset(w: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), not FIN: a crashed or firewalled server."""
    sock = w.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    w.transport.abort()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    n: int  # 0-based index of this request on its endpoint
    at: float  # seconds since the endpoint was added


Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Endpoint:
    mode: str
    port: int
    url: str
    started: float
    requests: list[Request] = field(default_factory=list)
    conns: set = field(default_factory=set)
    server: asyncio.base_events.Server | None = None
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)  # notified per request
    listen: Any = None  # starts listening (FaultServer.listen), for an endpoint added refusing


# -- modes ---------------------------------------------------------------------------------------

def _modes(fs: "FaultServer", opts: dict[str, Any]) -> Handler:  # noqa: C901 - one table of faults
    mode = opts.pop("mode")

    async def hang(req, w):
        await fs.stopped.wait()  # accept, read the request, never answer

    async def reset(req, w):
        await _reset(w)

    async def http500(req, w):  # `body` / `status` / `chunked`: what the failing engine answers
        body = opts.get("body", "internal error\n")
        status = opts.get("status", 500)
        if not opts.get("chunked"):
            await _send(w, body, status, "text/plain")
            return
        data = body.encode() if isinstance(body, str) else body
        head = _head(status, {"Content-Type": "text/plain", "Transfer-Encoding": "chunked"}, None)
        w.write(head + b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n")
        await w.drain()

    async def redirect_loop(req, w):
        w.write(_head(302, {"Location": f"/metrics?r={req.n + 1}"}, 0))
        await w.drain()

    async def html(req, w):
        await _send(w, HTML, 200, "text/html; charset=utf-8")

    async def slowloris(req, w):
        every = opts.get("every", 3.0)
        body = healthy_page().encode()
        w.write(_head(200, {"Content-Type": METRICS_TYPE}, len(body)))
        for b in body:
            w.write(bytes([b]))
            await w.drain()
            try:
                await asyncio.wait_for(fs.stopped.wait(), every)
                return
            except TimeoutError:
                pass

    async def huge(req, w):
        size = opts.get("size", 50 * 1024 * 1024)
        line = b'junk_series_total{i="x"} 1.0\n'
        w.write(_head(200, {"Content-Type": METRICS_TYPE}, size))
        chunk = line * ((1 << 16) // len(line))
        sent = 0
        while sent < size:
            part = chunk[: size - sent]
            w.write(part)
            sent += len(part)
            await w.drain()

    async def bomb(req, w):
        body = gzip_bomb(opts.get("decompressed", 64 * 1024 * 1024))
        await _send(w, body, 200, METRICS_TYPE, **{"Content-Encoding": "gzip"})

    async def gzip_truncated(req, w):  # a gzip stream without its end, its Content-Length honest
        body = gzip_cut(page.encode(), opts.get("cut", 64))
        await _send(w, body, 200, METRICS_TYPE, **{"Content-Encoding": "gzip"})

    async def close_cut(req, w):  # HTTP/1.0, no length: the body ends at close, here mid-line
        data = page.encode()
        cut = data[: data.index(b"vllm:num_requests_waiting{") + 40]
        w.write(b"HTTP/1.0 200 OK\r\nContent-Type: " + METRICS_TYPE.encode() + b"\r\n\r\n" + cut)
        await w.drain()

    async def short_length(req, w):  # Content-Length says more than is sent, then close
        data = page.encode()
        w.write(_head(200, {"Content-Type": METRICS_TYPE}, len(data) + 5000) + data)
        await w.drain()

    async def chunked_gzip_huge(req, w):  # gzip + one chunk of 0x7fffffff bytes, streamed
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + METRICS_TYPE.encode() +
                b"\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n7fffffff\r\n")
        for piece in stored_deflate(opts.get("size", 400 * 1024 * 1024)):
            w.write(piece)
            await w.drain()

    async def rate_limited(req, w):  # 429 with Retry-After on the first request, then healthy
        if req.n == 0:
            await _send(w, "slow down\n", 429, "text/plain", **{"Retry-After": str(opts.get("retry_after", 2))})
        else:
            await _send(w, page)

    async def continue_first(req, w):  # an interim 100 Continue before the answer
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await _send(w, page)

    async def protobuf(req, w):  # the binary exposition format, whatever was asked for
        await _send(w, b"\x8d\x01\n\x1avllm:num_requests_running\x12\x04help\x18\x01", 200,
                    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited")

    async def slow(req, w):  # answers after `delay` s: well within the refresh, after its publish point
        try:
            await asyncio.wait_for(fs.stopped.wait(), opts.get("delay", 0.3))
            return
        except TimeoutError:
            await _send(w, page)

    async def engine_flip(req, w):  # vLLM, SGLang, vLLM, ... on one address
        await _send(w, page if req.n % 2 == 0 else sglang_page())

    async def counter_stepback(req, w):
        await _send(w, stepback_page(req.n))

    def static(page_fn: Callable[[], bytes | str]) -> Handler:
        cached = page_fn()

        async def serve(req, w):
            await _send(w, cached)
        return serve

    async def counter_reset(req, w):
        await _send(w, counter_page(req.n))

    async def progressing(req, w):  # a healthy server at work: its counters grow every scrape
        await _send(w, small_page(n=100 * (req.n + 1)))

    async def flapping(req, w):
        if req.n % 2:
            await _send(w, "flap\n", 503, "text/plain")
        else:
            await _send(w, page)

    async def hang_after(req, w):  # healthy for `ok` requests, then hangs
        if req.n < opts.get("ok", 2):
            await _send(w, page)
        else:
            await hang(req, w)

    async def prometheus(req, w):
        """A Prometheus HTTP API that fails (`fail`: redirect, 500, or refuse) for its first `fails`
        requests (a count: a busy machine asks later, not fewer times), else for `after` s."""
        if req.n < opts["fails"] if "fails" in opts else req.at < opts.get("after", 3.0):
            fail = opts.get("fail", "500")
            if fail == "redirect":
                w.write(_head(302, {"Location": req.path}, 0))
                await w.drain()
            else:
                await _send(w, "prometheus is starting\n", 500, "text/plain")
            return
        now = time.time()
        if "vector%281%29" in req.path or "vector(1)" in req.path:
            result = [{"metric": {}, "value": [now, "1"]}]
        else:
            result = []
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
        await _send(w, body, 200, "application/json")

    page = healthy_page(**opts.get("page", {}))
    table: dict[str, Handler] = {
        "healthy": static(lambda: page),
        "text": static(lambda: opts.get("text", "")),  # a given page as it is (a DCGM exporter's, ...)
        "hang": hang,
        "reset": reset,
        "http500": http500,
        "redirect_loop": redirect_loop,
        "html": html,
        "slowloris": slowloris,
        "huge": huge,
        "gzip_bomb": bomb,
        "invalid_utf8": static(invalid_utf8_page),
        "many_series": static(lambda: many_series_page(opts.get("n", 100_000))),
        "nan_inf": static(lambda: nan_inf_page(opts.get("preemptions", "+Inf"), opts.get("running", "+Inf"))),
        "counter_reset": counter_reset,
        "duplicate": static(duplicate_page),
        "escapes": static(escapes_page),
        "flapping": flapping,
        "progressing": progressing,
        "engines": static(lambda: engines_page(opts.get("n", 90_000))),
        "long_model": static(lambda: healthy_page(model="m" * opts.get("length", 5000))),
        "hang_after": hang_after,
        "prometheus": prometheus,
        "rate_limited": rate_limited,
        "continue_first": continue_first,
        "protobuf": protobuf,
        "long_first_line": static(long_first_line_page),
        "after_eof": static(after_eof_page),
        "slow": slow,
        "small": static(lambda: small_page()),
        "engine_flip": engine_flip,
        "counter_stepback": counter_stepback,
        "out_of_range": static(out_of_range_page),
        "gzip_truncated": gzip_truncated,
        "close_cut": close_cut,
        "short_length": short_length,
        "chunked_gzip_huge": chunked_gzip_huge,
    }
    if mode not in table:
        raise ValueError(f"unknown fault mode {mode!r}; one of {', '.join(sorted(table))}")
    return table[mode]


MODES = ("healthy", "hang", "reset", "http500", "redirect_loop", "html", "slowloris", "huge", "gzip_bomb",
         "invalid_utf8", "many_series", "nan_inf", "counter_reset", "duplicate", "escapes", "flapping",
         "progressing", "engines", "long_model", "hang_after", "prometheus", "gzip_truncated", "close_cut", "short_length",
         "chunked_gzip_huge", "rate_limited", "continue_first", "protobuf", "long_first_line", "after_eof",
         "engine_flip", "counter_stepback", "out_of_range", "slow", "small")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class FaultServer:
    """Endpoints with a fault each; see the module doc. Stops after `lifetime` seconds."""

    def __init__(self, lifetime: float = 60.0) -> None:
        self.lifetime = lifetime
        self.endpoints: list[Endpoint] = []
        self.stopped = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self._late: list[asyncio.TimerHandle] = []

    async def __aenter__(self) -> "FaultServer":
        self._timer = asyncio.get_running_loop().call_later(self.lifetime, self._expire)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    def _expire(self) -> None:
        asyncio.get_running_loop().create_task(self.stop())

    async def add(self, mode: str, **opts: Any) -> str:
        """Start an endpoint in `mode`; its base URL (http://127.0.0.1:PORT).

        `refuse_for=T`: the port refuses connections (nothing listens) for T seconds first.
        `refuse=True`: it refuses them until `listen(url)` (a test that waits for the state it
        needs, e.g. the client's first error, instead of a time).
        `tls=True`: https with the certificate of `self_signed()`."""
        refuse_for = opts.pop("refuse_for", 0.0)
        refuse = opts.pop("refuse", False)
        tls = _server_tls() if opts.pop("tls", False) else None
        handler = _modes(self, {"mode": mode, **opts})
        port = free_port()
        ep = Endpoint(mode, port, f"{'https' if tls else 'http'}://{HOST}:{port}", time.monotonic())
        self.endpoints.append(ep)

        async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self._conns.add(w)
            ep.conns.add(w)
            try:
                while not self.stopped.is_set():
                    head = await r.readuntil(b"\r\n\r\n")
                    first, *rest = head.decode("latin-1").split("\r\n")
                    method, path, _ = (first.split(" ") + ["", ""])[:3]
                    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)}
                    if int(headers.get("content-length", "0") or 0):
                        body = await r.readexactly(int(headers["content-length"]))
                        path += "?" + body.decode("latin-1")  # POSTed query: keep it visible
                    req = Request(method, path, headers, len(ep.requests), time.monotonic() - ep.started)
                    ep.requests.append(req)
                    async with ep.arrived:
                        ep.arrived.notify_all()
                    await handler(req, w)
                    break  # Connection: close on every answer
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ssl.SSLError):
                pass
            finally:
                self._conns.discard(w)
                ep.conns.discard(w)
                if not w.transport.is_closing():
                    w.close()

        async def listen() -> None:
            if not self.stopped.is_set():
                ep.server = await asyncio.start_server(on_conn, HOST, port, reuse_address=True, ssl=tls)

        ep.listen = listen
        if refuse_for:
            loop = asyncio.get_running_loop()
            self._late.append(loop.call_later(refuse_for, lambda: loop.create_task(listen())))
        elif not refuse:
            await listen()
        return ep.url

    async def listen(self, url: str) -> None:
        """An endpoint added with `refuse=True` starts listening (once)."""
        ep = next(ep for ep in self.endpoints if ep.url == url)
        if ep.server is None:
            await ep.listen()

    def requests(self, url: str) -> list[Request]:
        return next(ep.requests for ep in self.endpoints if ep.url == url)

    async def until_requests(self, url: str, n: int) -> None:
        """Until `url` has been asked `n` times (woken by each request, not polled)."""
        ep = next(ep for ep in self.endpoints if ep.url == url)
        async with ep.arrived:
            await ep.arrived.wait_for(lambda: len(ep.requests) >= n)

    async def add_proxy(self) -> str:
        """A forward proxy (absolute-URI GETs and CONNECT tunnels) to 127.0.0.1 only; its URL.
        `self.proxied` lists the targets it was asked for."""
        self.proxied: list[str] = []

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                w.close()

        async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self._conns.add(w)
            try:
                head = await r.readuntil(b"\r\n\r\n")
                method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                self.proxied.append(f"{method} {target}")
                if method == "CONNECT":
                    host, port = target.rsplit(":", 1)
                else:
                    host, port = target.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
                if host != HOST:
                    raise ConnectionError("loopback only")
                ur, uw = await asyncio.open_connection(HOST, int(port))
                if method == "CONNECT":
                    w.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:  # origin-form request line, the rest of the head as it came
                    path = "/" + target.split("://", 1)[1].split("/", 1)[1] if "/" in target.split("://", 1)[1] else "/"
                    uw.write(f"{method} {path} HTTP/1.1\r\n".encode() + head.split(b"\r\n", 1)[1])
                await asyncio.gather(pipe(r, uw), pipe(ur, w))
            except (asyncio.IncompleteReadError, ConnectionError, ValueError, OSError):
                pass
            finally:
                self._conns.discard(w)
                w.close()

        port = free_port()
        server = await asyncio.start_server(on_conn, HOST, port, reuse_address=True)
        self.endpoints.append(Endpoint("proxy", port, f"http://{HOST}:{port}", time.monotonic(), server=server))
        return f"http://{HOST}:{port}"

    async def kill(self, url: str) -> None:
        """The endpoint dies: its port stops listening (connections refused) and its open
        connections are reset."""
        ep = next(ep for ep in self.endpoints if ep.url == url)
        if ep.server is not None:
            ep.server.close()
        for w in list(ep.conns):
            w.transport.abort()

    async def stop(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        for h in [self._timer, *self._late]:
            if h is not None:
                h.cancel()
        for ep in self.endpoints:
            if ep.server is not None:
                ep.server.close()
        for w in list(self._conns):
            w.transport.abort()
        await asyncio.sleep(0)


class ThreadedFaultServer:
    """FaultServer on its own loop in a daemon thread, for synchronous callers."""

    def __init__(self, lifetime: float = 300.0) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="faultserver")
        self.thread.start()
        self.fs = self._call(self._enter(lifetime))

    async def _enter(self, lifetime: float) -> FaultServer:
        return await FaultServer(lifetime).__aenter__()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def add(self, mode: str, **opts: Any) -> str:
        return self._call(self.fs.add(mode, **opts))

    def close(self) -> None:
        self._call(self.fs.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def __enter__(self) -> "ThreadedFaultServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- running kvwatch against the endpoints -------------------------------------------------------

@dataclass
class CliRun:
    rc: int | None
    out: str
    err: str
    lines: list[tuple[float, str]]  # (seconds since start, stdout line) as they arrived
    peak_rss_mb: float  # VmHWM of the child, sampled until it exits
    rss: list[tuple[float, float]]  # (seconds since start, VmRSS MB) every 0.1 s

    def rss_at(self, t: float) -> float:
        """The last RSS sample taken at or before `t` seconds."""
        return next((mb for at, mb in reversed(self.rss) if at <= t), 0.0)

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for _, line in self.lines if line.strip()]


def clean_env(tmp: str, **extra: str) -> dict[str, str]:
    """The child's whole environment: no user config, state or kubeconfig leaks into a test."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
    keep["PYTHONPATH"] = ROOT + os.pathsep + keep.get("PYTHONPATH", "")
    return {**keep, "HOME": f"{tmp}/home", "XDG_CONFIG_HOME": f"{tmp}/cfg", "XDG_STATE_HOME": f"{tmp}/state",
            "NO_COLOR": "1", "KVWATCH_CONFIG": f"{tmp}/cfg/kvwatch/config.toml", **extra}


def _status_mb(pid: int, field: str) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def run_cli(tmp: str, *argv: str, timeout: float = 30.0, env: dict[str, str] | None = None,
                  nofile: int | tuple[int, int] | None = None,
                  on_line: Callable[[str], None] | None = None) -> CliRun:
    """`python -m tui.cli ARGV` with a clean env; kills it after `timeout` s (rc None then).
    `nofile`: the child's soft open-files limit (`ulimit -n`), its hard limit unchanged; or
    (soft, hard). `on_line`: called with each line of its stdout as it comes."""
    def limit_files() -> None:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, nofile if isinstance(nofile, tuple) else (nofile, hard))

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", *argv, cwd=ROOT, env=env if env is not None else clean_env(tmp),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=64 * 1024 * 1024,
        preexec_fn=limit_files if nofile is not None else None)
    t0 = time.monotonic()
    lines: list[tuple[float, str]] = []
    peak = 0.0
    rss: list[tuple[float, float]] = []

    async def read_out() -> None:
        while line := await proc.stdout.readline():
            lines.append((time.monotonic() - t0, line.decode(errors="replace")))
            if on_line is not None:
                on_line(lines[-1][1])

    async def sample() -> None:
        nonlocal peak
        while proc.returncode is None:
            peak = max(peak, _status_mb(proc.pid, "VmHWM"))
            rss.append((time.monotonic() - t0, _status_mb(proc.pid, "VmRSS")))
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    reader = asyncio.create_task(read_out())
    err_task = asyncio.create_task(proc.stderr.read())
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        rc = None
    else:
        rc = proc.returncode
    await reader
    err = (await err_task).decode(errors="replace")
    sampler.cancel()
    return CliRun(rc, "".join(line for _, line in lines), err, lines, peak, rss)

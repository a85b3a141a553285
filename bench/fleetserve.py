"""N static real-size vLLM /metrics endpoints on 127.0.0.1, served from a separate process.

    from bench.fleetserve import PageFleet
    with PageFleet(256) as fleet:      # one port per endpoint, HTTP/1.1 keep-alive
        fleet.urls                     # ["http://127.0.0.1:PORT/metrics", ...]
        fleet.metrics_requests()       # GET /metrics answered so far (all endpoints)

The server counts the /metrics requests it answers, so "refreshes kept" is measured the same
way for any tool, kvwatch or a peer: requests in a window / endpoints / seconds. It runs in
its own process so that its CPU never counts as the tool's. Each endpoint serves its own
bench/realpage.py page (seeded per endpoint; ~42 KB, ~420 lines); `/v1/models` and
`/health` answer as a vLLM server does, for tools that ask for the model name first.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.realpage import render_v1_page  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
_served = 0  # /metrics responses, all endpoints


def _response(body: bytes, ctype: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class _Endpoint(asyncio.Protocol):
    def __init__(self, metrics: bytes, other: bytes, models: bytes) -> None:
        self.metrics, self.other, self.models = metrics, other, models
        self.buf = b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        global _served
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            parts = head.split(b" ", 2)
            path = parts[1].split(b"?")[0] if len(parts) > 1 else b"/"
            if path.rstrip(b"/") == b"/metrics":
                _served += 1
                self.transport.write(self.metrics)
            elif path.startswith(b"/v1/models"):
                self.transport.write(self.models)
            else:
                self.transport.write(self.other)


def _control() -> None:
    """Answers each line on stdin with the count so far; exits the process at EOF."""
    for _ in sys.stdin:
        print(_served, flush=True)
    signal.raise_signal(signal.SIGTERM)


async def _serve(n: int) -> None:
    loop = asyncio.get_running_loop()
    models = _response(json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                                "owned_by": "vllm", "max_model_len": 8192}]}).encode(),
                       b"application/json")
    other = _response(b"", b"text/plain")
    servers = []
    for i in range(n):
        metrics = _response(render_v1_page(model=MODEL, seed=i).encode(),
                            b"text/plain; version=0.0.4; charset=utf-8")
        servers.append(await loop.create_server(lambda m=metrics: _Endpoint(m, other, models), "127.0.0.1", 0,
                                                backlog=128))
    print(" ".join(str(s.sockets[0].getsockname()[1]) for s in servers), flush=True)
    threading.Thread(target=_control, daemon=True).start()
    await asyncio.Event().wait()


class PageFleet:
    """Context manager around the server process."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.proc: subprocess.Popen | None = None
        self.ports: list[int] = []

    def __enter__(self) -> "PageFleet":
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.n)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.ports = [int(p) for p in self.proc.stdout.readline().split()]
        if len(self.ports) != self.n:
            self.__exit__()
            raise RuntimeError("page server did not start")
        return self

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}/metrics" for p in self.ports]

    def metrics_requests(self) -> int:
        self.proc.stdin.write("count\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(_serve(int(sys.argv[1])))

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

    with PageFleet(256, live=True) as fleet: ...

Live pages change as a running vLLM server's do: each /metrics request an endpoint answers
serves its page one step (one second of a busy replica, bench/realpage.py `step`) later than the
one before: counters, histogram buckets, `_count` and `_sum` grow, the gauges move a little, the
lines and labels stay the same. So nothing a tool caches on an unchanged page or histogram is
ever reused between two scrapes, as with a real server. To keep the server's CPU low, endpoint i
serves base page i % K (K = 8 seeds) from its own starting step i // K (so no two endpoints
serve the same page at once), the first 120 steps past every start rendered before the ports
open; later steps are rendered when the first endpoint reaches them (K pages a second at 1 Hz)
and dropped once every endpoint of that base has passed them. The sequence never wraps: a
counter never steps back, however long the run.
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
METRICS_CTYPE = b"text/plain; version=0.0.4; charset=utf-8"
LIVE_BASES = 8  # distinct seeds the live pages are drawn from
LIVE_AHEAD = 120  # steps rendered before the ports open, past each endpoint's start
_served = 0  # /metrics responses, all endpoints


def _response(body: bytes, ctype: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class _Static:
    """One fixed page for every request."""

    def __init__(self, page: bytes) -> None:
        self.page = page

    def next(self) -> bytes:
        return self.page


class _LiveBase:
    """One seed's pages by step, rendered ahead of the endpoints that serve it."""

    def __init__(self, seed: int, upto: int) -> None:
        self.seed = seed
        self.pages: dict[int, bytes] = {}
        self.readers: list[_Live] = []
        for step in range(upto):
            self._render(step)

    def _render(self, step: int) -> None:
        self.pages[step] = _response(render_v1_page(model=MODEL, seed=self.seed, step=step).encode(),
                                     METRICS_CTYPE)

    def page(self, step: int) -> bytes:
        if step not in self.pages:  # past the rendered steps: render, drop what every reader passed
            self._render(step)
            low = min(r.step for r in self.readers)
            for old in [s for s in self.pages if s < low]:
                del self.pages[old]
        return self.pages[step]


class _Live:
    """An endpoint's live sequence: one step further at every request."""

    def __init__(self, base: _LiveBase, start: int) -> None:
        self.base, self.step = base, start
        base.readers.append(self)

    def next(self) -> bytes:
        page = self.base.page(self.step)
        self.step += 1
        return page


class _Endpoint(asyncio.Protocol):
    def __init__(self, metrics: _Static | _Live, other: bytes, models: bytes) -> None:
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
                self.transport.write(self.metrics.next())
            elif path.startswith(b"/v1/models"):
                self.transport.write(self.models)
            else:
                self.transport.write(self.other)


def _control() -> None:
    """Answers each line on stdin with the count so far; exits the process at EOF."""
    for _ in sys.stdin:
        print(_served, flush=True)
    signal.raise_signal(signal.SIGTERM)


def _pages(n: int, live: bool) -> list[_Static | _Live]:
    if not live:
        return [_Static(_response(render_v1_page(model=MODEL, seed=i).encode(), METRICS_CTYPE)) for i in range(n)]
    k = min(n, LIVE_BASES)
    starts = [i // k for i in range(n)]
    bases = [_LiveBase(b, max(starts) + LIVE_AHEAD) for b in range(k)]
    return [_Live(bases[i % k], starts[i]) for i in range(n)]


async def _serve(n: int, live: bool) -> None:
    loop = asyncio.get_running_loop()
    models = _response(json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                                "owned_by": "vllm", "max_model_len": 8192}]}).encode(),
                       b"application/json")
    other = _response(b"", b"text/plain")
    servers = []
    for metrics in _pages(n, live):
        servers.append(await loop.create_server(lambda m=metrics: _Endpoint(m, other, models), "127.0.0.1", 0,
                                                backlog=128))
    print(" ".join(str(s.sockets[0].getsockname()[1]) for s in servers), flush=True)
    threading.Thread(target=_control, daemon=True).start()
    await asyncio.Event().wait()


class PageFleet:
    """Context manager around the server process."""

    def __init__(self, n: int, live: bool = False) -> None:
        self.n, self.live = n, live
        self.proc: subprocess.Popen | None = None
        self.ports: list[int] = []

    def __enter__(self) -> "PageFleet":
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.n), *(["live"] if self.live else [])], stdin=subprocess.PIPE,
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
    asyncio.run(_serve(int(sys.argv[1]), sys.argv[2:3] == ["live"]))

"""A misbehaving Prometheus HTTP API on 127.0.0.1 for the fault suite and bench_faults.

Raw asyncio streams, so an answer can trickle, be huge, carry far more points than asked for or
come back partial with `warnings`. Each request is answered by the mode's function from the
query it carries; `vector(1)` (kvwatch's start-up probe) is answered normally in every mode
unless the mode says otherwise.

    async with PromFaults(lifetime=60) as pf:
        url = await pf.add("trickle", every=2.0)
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.faultserver import HOST, free_port

PODS = ("vllm-a", "vllm-b")


def series(pod: str, running: float = 5.0, kv: float = 0.4, at: float | None = None) -> list[dict]:
    """The raw gauges kvwatch's scalar query selects, for one pod (instant vector elements)."""
    at = time.time() if at is None else at
    labels = {"namespace": "inference", "pod": pod, "instance": f"{pod}:8000", "job": "vllm",
              "model_name": "m", "engine": "0"}
    out = []
    for name, v in (("vllm:num_requests_running", running), ("vllm:num_requests_waiting", 0.0),
                    ("vllm:kv_cache_usage_perc", kv)):
        out.append({"metric": {"__name__": name, **labels}, "value": [at, str(v)]})
    return out


def vector(result: list, warnings: list[str] | None = None) -> bytes:
    doc: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
    if warnings:
        doc["warnings"] = warnings
    return json.dumps(doc).encode()


def matrix(result: list) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


@dataclass
class Req:
    path: str
    query: str
    params: dict[str, str]
    n: int
    at: float = 0.0  # time.monotonic() when it arrived


@dataclass
class _Ep:
    mode: str
    opts: dict[str, Any]
    url: str = ""
    requests: list[Req] = field(default_factory=list)
    server: Any = None


def _head(length: int | None, ctype: str = "application/json") -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Type: {ctype}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class PromFaults:
    def __init__(self, lifetime: float = 60.0) -> None:
        self.lifetime = lifetime
        self.stopped = asyncio.Event()
        self.eps: list[_Ep] = []
        self._conns: set[asyncio.StreamWriter] = set()
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> "PromFaults":
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.lifetime, lambda: loop.create_task(self.stop()))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self.stopped.is_set():
            return
        self.stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        for ep in self.eps:
            if ep.server is not None:
                ep.server.close()
        for w in list(self._conns):
            w.transport.abort()
        await asyncio.sleep(0)

    async def add(self, mode: str, **opts: Any) -> str:
        ep = _Ep(mode, opts)
        port = free_port()
        ep.url = f"http://{HOST}:{port}"
        self.eps.append(ep)

        async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            self._conns.add(w)
            try:
                head = await r.readuntil(b"\r\n\r\n")
                first, *rest = head.decode("latin-1").split("\r\n")
                path = first.split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)}
                body = b""
                if int(headers.get("content-length", "0") or 0):
                    body = await r.readexactly(int(headers["content-length"]))
                q = {k: v[0] for k, v in parse_qs(urlsplit(path).query + "&" + body.decode("latin-1")).items()}
                req = Req(urlsplit(path).path, q.get("query", ""), q, len(ep.requests), time.monotonic())
                ep.requests.append(req)
                await self._answer(ep, req, w)
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
                pass
            finally:
                self._conns.discard(w)
                if not w.transport.is_closing():
                    w.close()

        ep.server = await asyncio.start_server(on_conn, HOST, port, reuse_address=True)
        return ep.url

    async def _send(self, w: asyncio.StreamWriter, body: bytes) -> None:
        w.write(_head(len(body)) + body)
        await w.drain()

    async def _answer(self, ep: _Ep, req: Req, w: asyncio.StreamWriter) -> None:
        o = ep.opts
        if req.query == "vector(1)" and ep.mode != "trickle_all":
            await self._send(w, vector([{"metric": {}, "value": [time.time(), "1"]}]))
            return
        if ep.mode in ("trickle", "trickle_all"):
            # headers at once, then the body a byte every `every` seconds
            body = vector(series("vllm-a"))
            w.write(_head(len(body)))
            for b in body:
                w.write(bytes([b]))
                await w.drain()
                try:
                    await asyncio.wait_for(self.stopped.wait(), o.get("every", 2.0))
                    return
                except TimeoutError:
                    pass
        elif ep.mode == "huge":
            # one instant-vector answer of `mb` MB, streamed without Content-Length
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            w.write(b'{"status":"success","data":{"resultType":"vector","result":[')
            el = json.dumps(series("vllm-a")[0]).encode()
            n = o.get("mb", 200) * 1024 * 1024 // (len(el) + 1)
            batch = b",".join([el] * 1000) + b","
            for _ in range(n // 1000):
                w.write(batch)
                await w.drain()
                if self.stopped.is_set():
                    return
            w.write(el + b"]}}")
            await w.drain()
        elif ep.mode == "points":
            # instant queries answer normally; a range query gets `points` points per series
            if req.path.endswith("query_range"):
                if "body" not in o:  # built once: the server must not be the slow side
                    start = float(req.params.get("start", "0"))
                    pts = [[round(start + i * 0.001, 3), "1"] for i in range(o.get("points", 100_000))]
                    o["body"] = matrix([{"metric": series("vllm-a")[0]["metric"], "values": pts}])
                await self._send(w, o["body"])
            else:
                await self._send(w, vector(series("vllm-a") if "vllm:num_requests_running" in req.query else []))
        elif ep.mode == "partial":
            # both pods for `full` scalar queries, then only vllm-a with the store's warning
            scalar = "vllm:num_requests_running" in req.query and "rate(" not in req.query
            if not scalar:
                await self._send(w, vector([]))
                return
            ep.opts["scalar_n"] = k = o.get("scalar_n", 0) + 1
            if k <= o.get("full", 3):
                await self._send(w, vector([x for p in PODS for x in series(p)]))
            else:
                await self._send(w, vector(series("vllm-a"), [o.get("warning", "store 10.0.0.7:10901 unavailable: partial response")]))
        else:
            raise ValueError(ep.mode)


class ThreadedPromFaults:
    """PromFaults on its own loop in a daemon thread, for synchronous callers (the pty bench)."""

    def __init__(self, lifetime: float = 300.0) -> None:
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="promfaults")
        self.thread.start()
        self.pf = self._call(self._enter(lifetime))

    async def _enter(self, lifetime: float) -> PromFaults:
        return await PromFaults(lifetime).__aenter__()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def add(self, mode: str, **opts: Any) -> str:
        return self._call(self.pf.add(mode, **opts))

    def close(self) -> None:
        self._call(self.pf.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def __enter__(self) -> "ThreadedPromFaults":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

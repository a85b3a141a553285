"""A minimal HTTP/1.1 server (asyncio streams, keep-alive) for one simulated replica.

Small on purpose: hundreds of these share one event loop, so each is a listening socket and a
route function, nothing more. Only GET and HEAD are served; anything malformed gets a 400 and
the connection closes.
"""

from __future__ import annotations

import asyncio
from typing import Callable

Route = Callable[[str], "tuple[int, str, bytes]"]  # path -> (status, content type, body)

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
MAX_HEADER_BYTES = 16384
IDLE_TIMEOUT_S = 75.0


class HttpServer:
    def __init__(self, route: Route, host: str = "127.0.0.1", port: int = 0) -> None:
        self.route = route
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEADER_BYTES,
                                                  backlog=128)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._conns):
                w.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except (asyncio.TimeoutError, Exception):
                pass
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns.add(writer)
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
                except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
                    return
                except asyncio.LimitOverrunError:
                    await self._send(writer, 400, "text/plain", b"request header too large\n", False, False)
                    return
                keep = await self._handle(head, reader, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._conns.discard(writer)
            try:
                writer.close()
            except Exception:
                pass

    async def _handle(self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            headers = {}
            for line in lines[1:]:
                if line:
                    k, _, v = line.partition(":")
                    headers[k.strip().lower()] = v.strip()
        except ValueError:
            await self._send(writer, 400, "text/plain", b"bad request\n", False, False)
            return False
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > 1 << 20:
            await self._send(writer, 400, "text/plain", b"bad content-length\n", False, False)
            return False
        if int(length):
            await reader.readexactly(int(length))  # bodies are ignored
        conn = headers.get("connection", "").lower()
        keep = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
        if method not in ("GET", "HEAD"):
            await self._send(writer, 405, "text/plain", b"method not allowed\n", keep, False)
            return keep
        path = target.split("?", 1)[0]
        try:
            status, ctype, body = self.route(path)
        except Exception as e:  # a bug in a page must not take the server down
            status, ctype, body = 500, "text/plain", f"internal error: {type(e).__name__}\n".encode()
        await self._send(writer, status, ctype, body, keep, method == "HEAD")
        return keep

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, status: int, ctype: str, body: bytes, keep: bool,
                    head_only: bool) -> None:
        reason = REASONS.get(status, "Internal Server Error")
        hdr = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
               f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n").encode("latin-1")
        writer.write(hdr if head_only else hdr + body)
        await writer.drain()

"""A lean HTTP/1.1 GET client for plain-http /metrics endpoints: one keep-alive connection.

Why not httpx here: a scrape through httpx/httpcore/h11/anyio costs ~350-1,100 us of CPU
against ~30-130 us for a bare asyncio client on the same page (bench/bench_http_client.py),
which at 256 replicas a second is a quarter of kvwatch's CPU. A /metrics GET needs little:
Content-Length, chunked or close-delimited bodies, gzip, a few redirects. Anything more
(https, a proxy from the environment) stays on httpx: see DirectSource._new_endpoint.

Bounds: the caller's deadline (asyncio.timeout) covers the whole exchange; the body is capped
by `max_bytes` after decompression (a gzip bomb stops at the cap); headers by the stream
limit; redirects by MAX_REDIRECTS. A connection is reused only after a complete response and
is dropped on any error or cancellation, so a timed-out request never poisons the next one.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

MAX_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HEAD_LIMIT = 64 * 1024  # status line + headers
_READ = 64 * 1024


class HttpError(Exception):
    """A protocol-level failure; str(e) is a short reason for the screen."""


class BodyTooLarge(Exception):
    """The body (decompressed) is over the cap."""


TRUNCATED = "truncated response"


class BodyDecoder:
    """A response body, decoded as it arrives and capped after decompression: `feed` raw bytes,
    then `finish`. A gzip stream must reach its end (a cut one is truncated, not a short page);
    another gzip member after the first is read too, as gzip readers do."""

    __slots__ = ("cap", "discard", "enc", "_z", "_out", "size")

    def __init__(self, content_encoding: str, cap: int, discard: bool = False) -> None:
        enc = content_encoding.strip().lower()
        if discard:
            enc = ""
        elif enc not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise HttpError("unsupported content encoding")
        self.cap, self.discard = cap, discard
        self.enc = "" if enc == "identity" else enc
        self._z = self._decoder() if self.enc else None
        self._out: list[bytes] = []
        self.size = 0

    def _decoder(self) -> "zlib._Decompress":
        return zlib.decompressobj(47) if self.enc != "deflate" else zlib.decompressobj()  # 47: zlib or gzip, auto

    def feed(self, data: bytes) -> None:
        if self.discard or not data:
            return
        z = self._z
        while z is not None and data:
            if z.eof:  # a next gzip member
                z = self._z = self._decoder()
            try:  # max_length: stop just past the cap, so a bomb costs only the cap
                out = z.decompress(data, self.cap + 1 - self.size)
            except zlib.error:
                raise HttpError("undecodable response body") from None
            self._take(out)
            data = z.unconsumed_tail or z.unused_data
            if z.unconsumed_tail and not out:
                raise HttpError("undecodable response body")  # no progress: never loop
        if z is None:
            self._take(data)

    def _take(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.cap:
            raise BodyTooLarge
        if data:
            self._out.append(data)

    def finish(self, close_delimited: bool = False) -> bytes:
        if self.discard:
            return b""
        if self._z is not None and not self._z.eof:
            raise HttpError(f"{TRUNCATED} (compressed body ends early)")
        body = b"".join(self._out)
        if close_delimited and body and not body.endswith(b"\n"):
            # only the close says where such a body ends; a page always ends with a newline
            raise HttpError(f"{TRUNCATED} (body ends mid-line)")
        return body


class Response:
    __slots__ = ("status", "headers", "excerpt")

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers  # lower-case names; a repeated header keeps its last value
        self.excerpt = b""  # an error answer's first bytes (what the engine says went wrong)


# An error answer's body is read only this far, and only this long: its first line is the reason
# shown ("HTTP 500: engine dead: CUDA error"); a server that stalls after its head costs ~1 s.
ERROR_PEEK = 512
_PEEK_WAIT_S = 1.0


class _Conn:
    __slots__ = ("reader", "writer", "key", "used")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: tuple[Any, ...]) -> None:
        self.reader, self.writer, self.key, self.used = reader, writer, key, False

    def close(self) -> None:
        self.writer.transport.abort()  # no graceful close: nothing more is owed to this server


class Http1Client:
    """GETs one URL (following redirects) over one kept-alive connection."""

    def __init__(self, url: str, headers: dict[str, str], max_bytes: int, auth: str | None = None) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "Accept-Encoding: gzip\r\n"
        # an Authorization value, sent only to the URL's own origin (not to a redirect elsewhere)
        self._auth = f"Authorization: {auth}\r\n" if auth else ""
        self._origin: tuple[str, str | None, int] | None = None  # (scheme, host, port) of `url`: set by its first request
        self._conn: _Conn | None = None
        self._requests: dict[str, tuple[bytes, tuple[str | None, int]]] = {}  # url -> _target(url), built once
        self.closed = False

    async def get(self, check: Callable[[int, dict[str, str], bytes], None] | None = None) -> tuple[Response, bytes | None]:
        """(response, body). `check(status, headers, excerpt)` may refuse the response (raise)
        before its body is read (`excerpt`: an error answer's first bytes, see _peek). The body
        is read only for a 200; over the cap: BodyTooLarge."""
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            resp, conn = await self._exchange(url)
            if resp.status in _REDIRECTS and "location" in resp.headers:
                await self._body(conn, resp, discard=True)
                url = urljoin(url, resp.headers["location"])
                if urlsplit(url).scheme != "http":
                    self._drop()
                    raise HttpError("redirect to a non-http URL")
                continue
            if resp.status != 200:
                resp.excerpt = await self._peek(conn.reader, resp.headers)
            if check is not None:
                try:
                    check(resp.status, resp.headers, resp.excerpt)
                except BaseException:
                    self._drop()
                    raise
            if resp.status != 200:
                self._drop()  # the body is not wanted: do not read it to keep the connection
                return resp, None
            return resp, await self._body(conn, resp)
        self._drop()
        raise HttpError("too many redirects")

    async def aclose(self) -> None:
        self._drop()
        self.closed = True

    # -- internals ----------------------------------------------------------------------------
    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def _connect(self, url: str) -> _Conn:
        key = self._target(url)[1]
        conn = self._conn
        if conn is not None and (conn.key != key or conn.reader.at_eof() or conn.writer.is_closing()):
            self._drop()
            conn = None
        if conn is None:
            reader, writer = await asyncio.open_connection(key[0], key[1], limit=_HEAD_LIMIT)
            conn = self._conn = _Conn(reader, writer, key)
        return conn

    def _request(self, url: str) -> bytes:
        return self._target(url)[0]

    def _target(self, url: str) -> tuple[bytes, tuple[str | None, int]]:
        """(the request's bytes, (host, port) to connect to) for `url`, split once per URL."""
        got = self._requests.get(url)
        if got is None:
            parts = urlsplit(url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            host = parts.netloc.rsplit("@", 1)[-1]  # never the userinfo
            origin = (parts.scheme, parts.hostname, parts.port or 80)
            if self._origin is None:  # every get() asks for self.url first
                self._origin = origin
            auth = self._auth if origin == self._origin else ""
            req = f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{self._headers}{auth}\r\n".encode("latin-1")
            if len(self._requests) > 16:  # redirect targets: a loop must not grow this
                self._requests.clear()
            got = self._requests[url] = (req, (parts.hostname, parts.port or 80))
        return got

    async def _exchange(self, url: str) -> tuple[Response, _Conn]:
        for attempt in (0, 1):
            conn = await self._connect(url)
            reused = conn.used
            try:
                conn.writer.write(self._request(url))
                head = await conn.reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as e:
                self._drop()
                if reused and not e.partial and attempt == 0:
                    continue  # the server closed the idle kept-alive connection: ask again
                raise HttpError("bad HTTP response (connection closed or not HTTP)") from None
            except (ConnectionResetError, BrokenPipeError):
                self._drop()
                if reused and attempt == 0:
                    continue  # the same, noticed as a reset
                raise
            except asyncio.LimitOverrunError:
                self._drop()
                raise HttpError("bad HTTP response (headers too long)") from None
            except BaseException:
                self._drop()
                raise
            conn.used = True
            try:
                resp = _head(head)
                for _ in range(8):  # interim answers (100 Continue, 103 Early Hints) precede the real one
                    if not 100 <= resp.status < 200:
                        break
                    if resp.status == 101:
                        raise HttpError("bad HTTP response (protocol switch)")
                    resp = _head(await conn.reader.readuntil(b"\r\n\r\n"))
                else:
                    raise HttpError("bad HTTP response (too many interim answers)")
            except asyncio.IncompleteReadError:
                self._drop()
                raise HttpError("bad HTTP response (connection closed or not HTTP)") from None
            except asyncio.LimitOverrunError:
                self._drop()
                raise HttpError("bad HTTP response (headers too long)") from None
            except BaseException:
                self._drop()
                raise
            return resp, conn
        raise AssertionError("unreachable")

    async def _body(self, conn: _Conn, resp: Response, discard: bool = False) -> bytes:
        try:
            body, reusable = await self._read_body(conn.reader, resp.headers, discard)
        except asyncio.IncompleteReadError:
            self._drop()
            raise HttpError(f"{TRUNCATED} (connection closed mid-body)") from None
        except ValueError:  # a chunk-size line over the stream limit
            self._drop()
            raise HttpError("bad HTTP response (chunk size)") from None
        except BaseException:
            self._drop()
            raise
        if not reusable:
            self._drop()
        return body

    @staticmethod
    async def _peek(reader: asyncio.StreamReader, h: dict[str, str]) -> bytes:
        """The first ERROR_PEEK bytes of an error answer's body (plain or chunked; b"" for a
        compressed one or one that does not come within _PEEK_WAIT_S); the connection is dropped
        after it either way."""
        if h.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
            return b""
        got = bytearray()

        async def read() -> None:
            want = ERROR_PEEK
            if "chunked" in h.get("transfer-encoding", "").lower():
                line = await reader.readline()
                want = min(want, int(line.split(b";", 1)[0].strip() or b"0", 16))
            elif "content-length" in h:
                want = min(want, int(h["content-length"]))
            while len(got) < want and (piece := await reader.read(want - len(got))):
                got.extend(piece)

        try:
            await asyncio.wait_for(read(), _PEEK_WAIT_S)
        except (asyncio.TimeoutError, ValueError, OSError, asyncio.IncompleteReadError):
            pass  # what came is enough; nothing is fine too
        return bytes(got)

    async def _read_body(self, reader: asyncio.StreamReader, h: dict[str, str], discard: bool) -> tuple[bytes, bool]:
        cap = self.max_bytes
        body = BodyDecoder(h.get("content-encoding", ""), cap, discard)
        raw_cap = 2 * cap + _READ  # compressed bytes: gzip never needs twice the decoded size
        reusable = h.get("connection", "").lower() != "close"
        close_delimited = False
        if "chunked" in h.get("transfer-encoding", "").lower():
            raw = 0
            while True:
                line = await reader.readline()
                if not line.endswith(b"\n"):
                    raise HttpError(f"{TRUNCATED} (connection closed mid-body)")
                try:
                    n = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise HttpError("bad HTTP response (chunk size)") from None
                if n == 0:
                    while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                if raw + n > (cap if body.enc == "" or discard else raw_cap):
                    raise BodyTooLarge  # declared: refused before it is read
                raw += n
                while n > 0:  # in pieces: a huge declared chunk is never buffered whole
                    piece = await reader.read(min(n, _READ))
                    if not piece:
                        raise HttpError(f"{TRUNCATED} (connection closed mid-body)")
                    n -= len(piece)
                    body.feed(piece)
                await reader.readexactly(2)
        elif "content-length" in h:
            try:
                n = int(h["content-length"])
            except ValueError:
                raise HttpError("bad HTTP response (content-length)") from None
            if n > (cap if body.enc == "" else raw_cap):
                raise BodyTooLarge
            while n > 0:
                chunk = await reader.read(min(n, _READ))
                if not chunk:
                    raise HttpError(f"{TRUNCATED} (connection closed before Content-Length)")
                n -= len(chunk)
                body.feed(chunk)
        else:  # no length: the body ends when the server closes
            reusable = False
            close_delimited = True
            raw = 0
            while chunk := await reader.read(_READ):
                raw += len(chunk)
                if raw > raw_cap:
                    raise BodyTooLarge
                body.feed(chunk)
        return body.finish(close_delimited), reusable


def _head(raw: bytes) -> Response:
    lines = raw.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/1.") or not status_line[1].isdigit():
        raise HttpError("bad HTTP response (connection closed or not HTTP)")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HttpError("bad HTTP response (malformed header)")
        headers[name.strip().lower()] = value.strip()
    if status_line[0] == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    return Response(int(status_line[1]), headers)

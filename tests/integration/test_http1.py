"""The lean HTTP/1.1 client (tui/core/sources/http1.py) against raw servers on 127.0.0.1: each
body framing, gzip and its bomb cap, redirects, broken responses, keep-alive and its recovery."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import pytest

from tui.core.sources.http1 import MAX_REDIRECTS, BodyTooLarge, Http1Client, HttpError

PAGE = b'vllm:num_requests_running{engine="0"} 3.0\n' * 50
CAP = 64 * 1024


class Raw:
    """One listener; `respond(n, request_bytes)` gives the raw bytes for the n-th request on the
    server (None: close without answering). Counts connections and requests."""

    def __init__(self, respond) -> None:
        self.respond = respond
        self.connections = 0
        self.requests: list[bytes] = []

    async def __aenter__(self) -> "Raw":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/metrics"
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                req = await r.readuntil(b"\r\n\r\n")
                self.requests.append(req)
                out = self.respond(len(self.requests) - 1, req)
                if out is None:
                    break
                if isinstance(out, list):  # pieces with a pause between them
                    for piece in out:
                        w.write(piece)
                        await w.drain()
                        await asyncio.sleep(0.01)
                else:
                    w.write(out)
                    await w.drain()
                if isinstance(out, bytes) and (b"Connection: close" in out or out.startswith(b"HTTP/1.0")):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()


def ok(body: bytes = PAGE, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: text/plain; version=0.0.4", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(body: bytes, size: int = 100) -> list[bytes]:
    parts = [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"]
    for i in range(0, len(body), size):
        piece = body[i : i + size]
        parts.append(f"{len(piece):x};ext=1\r\n".encode() + piece + b"\r\n")
    parts.append(b"0\r\nX-Trailer: t\r\n\r\n")
    return parts


async def get(url: str, cap: int = CAP, client: Http1Client | None = None):
    c = client or Http1Client(url, {"Accept": "text/plain", "User-Agent": "kvwatch"}, cap)
    try:
        return await asyncio.wait_for(c.get(), 5)
    finally:
        if client is None:
            await c.aclose()


async def test_content_length_body_and_keep_alive_reuse():
    async with Raw(lambda n, req: ok()) as srv:
        c = Http1Client(srv.url, {"Accept": "text/plain"}, CAP)
        for _ in range(3):
            resp, body = await get(srv.url, client=c)
            assert resp.status == 200 and body == PAGE
        await c.aclose()
    assert srv.connections == 1 and len(srv.requests) == 3  # one kept-alive connection
    first = srv.requests[0].decode()
    assert first.startswith("GET /metrics HTTP/1.1\r\n") and "Host: 127.0.0.1:" in first
    assert "Accept-Encoding: gzip" in first and "Accept: text/plain" in first


async def test_a_kept_alive_get_does_not_split_its_url_again(monkeypatch):
    # Each scrape of each replica goes through here (256 a second at 256 replicas): the URL's
    # request bytes and (host, port) are worked out once.
    import tui.core.sources.http1 as http1

    calls = []
    real = http1.urlsplit
    monkeypatch.setattr(http1, "urlsplit", lambda url, *a: calls.append(url) or real(url, *a))
    async with Raw(lambda n, req: ok()) as srv:
        c = Http1Client(srv.url, {}, CAP)
        for _ in range(5):
            resp, body = await c.get()
            assert resp.status == 200 and body == PAGE
        await c.aclose()
    assert calls == [srv.url], calls


async def test_chunked_body_with_extensions_and_trailers():
    async with Raw(lambda n, req: chunked(PAGE)) as srv:
        c = Http1Client(srv.url, {}, CAP)
        for _ in range(2):
            resp, body = await get(srv.url, client=c)
            assert body == PAGE
        await c.aclose()
    assert srv.connections == 1


async def test_body_until_close_and_connection_close_header():
    async with Raw(lambda n, req: b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + PAGE) as srv:
        resp, body = await get(srv.url)
        assert body == PAGE
    async with Raw(lambda n, req: ok(PAGE, "Connection: close")) as srv:
        c = Http1Client(srv.url, {}, CAP)
        for _ in range(2):
            assert (await get(srv.url, client=c))[1] == PAGE
        await c.aclose()
    assert srv.connections == 2  # closed by the server after each answer: a new connection each


async def test_gzip_body_and_bomb_cap():
    z = gzip.compress(PAGE)
    async with Raw(lambda n, req: ok(z, "Content-Encoding: gzip")) as srv:
        assert (await get(srv.url))[1] == PAGE
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = comp.compress(b"0" * (8 << 20)) + comp.flush()
    assert len(bomb) < CAP
    async with Raw(lambda n, req: ok(bomb, "Content-Encoding: gzip")) as srv:
        with pytest.raises(BodyTooLarge):
            await get(srv.url)
    async with Raw(lambda n, req: ok(b"not gzip at all", "Content-Encoding: gzip")) as srv:
        with pytest.raises(HttpError, match="undecodable"):
            await get(srv.url)


async def test_size_cap_declared_and_chunked():
    big = b"x" * (CAP + 1)
    async with Raw(lambda n, req: ok(big)) as srv:
        with pytest.raises(BodyTooLarge):
            await get(srv.url)
    async with Raw(lambda n, req: chunked(big, 8192)) as srv:
        with pytest.raises(BodyTooLarge):
            await get(srv.url)


async def test_redirects_followed_and_a_loop_refused():
    def respond(n, req):
        if b"GET /metrics " in req:
            return b"HTTP/1.1 302 Found\r\nLocation: /metrics/\r\nContent-Length: 0\r\n\r\n"
        return ok()

    async with Raw(respond) as srv:
        resp, body = await get(srv.url)
        assert body == PAGE and srv.connections == 1  # same host: the same connection
    loop = lambda n, req: f"HTTP/1.1 302 Found\r\nLocation: /metrics?r={n}\r\nContent-Length: 0\r\n\r\n".encode()  # noqa: E731
    async with Raw(loop) as srv:
        with pytest.raises(HttpError, match="too many redirects"):
            await get(srv.url)
    assert len(srv.requests) == MAX_REDIRECTS + 1


async def test_not_http_and_truncated_responses():
    async with Raw(lambda n, req: b"SSH-2.0-OpenSSH_9.6\r\n\r\n") as srv:
        with pytest.raises(HttpError, match="not HTTP"):
            await get(srv.url)
    async with Raw(lambda n, req: None) as srv:  # closes without a word
        with pytest.raises(HttpError, match="connection closed"):
            await get(srv.url)
    async with Raw(lambda n, req: [ok()[:-10]] + [b""]) as srv:  # the body cut short
        srv.respond = lambda n, req: None if n else [ok()[:-10]]
        with pytest.raises((HttpError, asyncio.TimeoutError)):
            await asyncio.wait_for(get(srv.url), 1.0)


async def test_non_200_and_check_refuse_before_the_body():
    async with Raw(lambda n, req: b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\nboom") as srv:
        resp, body = await get(srv.url)
        assert resp.status == 500 and body is None
        assert resp.excerpt == b"boom"  # its first bytes only: the reason shown

    def refuse(status, headers, excerpt):
        if headers.get("content-type", "").startswith("text/html"):
            raise ValueError("html")

    async with Raw(lambda n, req: ok(b"<html>", "X: y").replace(b"text/plain; version=0.0.4", b"text/html")) as srv:
        c = Http1Client(srv.url, {}, CAP)
        with pytest.raises(ValueError, match="html"):
            await c.get(refuse)
        await c.aclose()


async def test_an_idle_connection_closed_by_the_server_is_replaced():
    def respond(n, req):
        return ok() if n % 2 == 0 else None  # answers, then drops the kept-alive connection

    async with Raw(respond) as srv:
        c = Http1Client(srv.url, {}, CAP)
        for _ in range(2):
            assert (await get(srv.url, client=c))[1] == PAGE
        await c.aclose()
    assert srv.connections == 2


async def test_a_cancelled_request_leaves_no_half_read_connection():
    def respond(n, req):
        if n == 0:
            return [ok()[:40], b"", b""]  # the head only, then nothing for a while
        return ok()

    async with Raw(respond) as srv:
        c = Http1Client(srv.url, {}, CAP)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(c.get(), 0.05)
        resp, body = await get(srv.url, client=c)
        assert body == PAGE  # a fresh connection, not the rest of the first answer
        await c.aclose()


async def test_authorization_goes_to_the_urls_own_origin_only():
    async with Raw(lambda n, req: ok()) as other:
        def respond(n, req):
            return (f"HTTP/1.1 302 Found\r\nLocation: {other.url}\r\nContent-Length: 0\r\n\r\n".encode()
                    if n == 0 else ok())
        async with Raw(respond) as first:
            c = Http1Client(first.url, {}, CAP, auth="Basic dTpw")
            resp, body = await asyncio.wait_for(c.get(), 5)
            await c.aclose()
    assert resp.status == 200 and body == PAGE
    assert b"Authorization: Basic dTpw\r\n" in first.requests[0]
    assert b"Authorization" not in other.requests[0]  # a redirect elsewhere does not get it
    assert first.requests[0].split(b"\r\n")[1] == f"Host: {first.url.split('/')[2]}".encode()


async def test_truncated_bodies_are_refused():
    gz = gzip.compress(PAGE)
    cases = [
        ok(gz[:-12], "Content-Encoding: gzip"),  # gzip without its trailer
        b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + PAGE[:-7],  # close-delimited, cut mid-line
        ok(PAGE, "Connection: close")[:-100],  # fewer bytes than Content-Length, then close
    ]
    for raw in cases:
        async with Raw(lambda n, req, raw=raw: raw if n == 0 else None) as srv:
            with pytest.raises(HttpError, match="truncated"):
                await get(srv.url)


async def test_two_gzip_members_are_one_body():
    raw = ok(gzip.compress(PAGE[:500]) + gzip.compress(PAGE[500:]), "Content-Encoding: gzip")
    async with Raw(lambda n, req: raw) as srv:
        _, body = await get(srv.url)
    assert body == PAGE


async def test_a_huge_gzip_chunk_is_read_in_pieces_and_capped():
    from tests.faultserver import stored_deflate

    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n7fffffff\r\n")
    async with Raw(lambda n, req: [head, *stored_deflate(4 * CAP)] if n == 0 else None) as srv:
        with pytest.raises(BodyTooLarge):
            await get(srv.url)  # before: waited for all 2 GiB of the chunk


async def test_interim_100_continue_is_skipped():
    async with Raw(lambda n, req: b"HTTP/1.1 100 Continue\r\n\r\n" + ok()) as srv:
        resp, body = await get(srv.url)
    assert resp.status == 200 and body == PAGE

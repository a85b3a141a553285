"""A small async client for the Prometheus HTTP query API (Prometheus, Thanos, Mimir, VictoriaMetrics).

Every failure becomes a `SourceError` whose message is one line meant for the SRE: which URL,
what went wrong, which flag fixes it. The bearer token is read from an env var or a file (never
from argv), re-read when the file changes (projected service-account tokens rotate), and never
appears in messages or reprs.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import socket
import ssl
import time
from typing import Any, Iterable, NamedTuple
from urllib.parse import urlsplit, urlunsplit

import httpx

from .base import SourceError
from ..textsafe import clean, redact, remember_secret

__all__ = ["BearerToken", "PromClient", "Series", "SourceError", "describe_connect_error", "normalise_url", "series_from_data"]

_API_SUFFIXES = ("/api/v1/query_range", "/api/v1/query", "/api/v1", "/graph")
# One answer is held whole while it is decoded (~10x its size as Python objects): the cap keeps
# a huge or hostile answer from taking gigabytes. A 1024-replica back-fill (10 min, 61 points a
# series) is ~20 MB for its largest query, ~35 MB for all four together: under both bounds.
DEFAULT_MAX_MIB = 64
_IN_FLIGHT = 2  # all answers being read at once: at most this many times the per-answer cap
_THREAD_DECODE_BYTES = 1 << 20  # decode larger answers off the event loop (keys stay live)


def normalise_url(url: str) -> str:
    """The API base URL, or SourceError on anything that is not http(s)://host[:port][/prefix]."""
    raw = (url or "").strip()
    hint = "expected http(s)://host[:port][/path-prefix], e.g. http://prometheus.monitoring:9090"
    try:
        parts = urlsplit(raw)
        port = parts.port  # raises ValueError on a non-numeric or out-of-range port
    except ValueError as e:
        raise SourceError(f"bad Prometheus URL {clean(raw)!r}: {clean(str(e))}; {hint}") from None
    if parts.scheme not in ("http", "https"):
        raise SourceError(f"bad Prometheus URL {clean(raw)!r}: missing http:// or https://; {hint}")
    if not parts.hostname:
        raise SourceError(f"bad Prometheus URL {clean(raw)!r}: no host; {hint}")
    del port
    path = parts.path.rstrip("/")
    for suffix in _API_SUFFIXES:
        if path.endswith(suffix):  # tolerate a pasted API or UI URL
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def display_url(url: str) -> str:
    """URL for display: user:password@ removed."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query, ""))


class BearerToken:
    """A bearer token from an environment variable or a file; the value is never shown."""

    __slots__ = ("env", "file", "_value", "_mtime")

    def __init__(self, env: str | None = None, file: str | None = None) -> None:
        if env and file:
            raise SourceError("give either --prom-token-env or --prom-token-file, not both")
        self.env, self.file = env, file
        self._value: str | None = None
        self._mtime: float | None = None

    def __repr__(self) -> str:
        where = f"env {self.env}" if self.env else f"file {self.file}"
        return f"BearerToken({where}, value hidden)"

    @property
    def origin(self) -> str:
        return f"--prom-token-env {self.env}" if self.env else f"--prom-token-file {self.file}"

    def value(self) -> str:
        if self.env:
            v = os.environ.get(self.env, "")
            if not v.strip():
                raise SourceError(f"environment variable {clean(self.env)} (--prom-token-env) is not set or empty")
            return checked_token(v, f"environment variable {clean(self.env)} (--prom-token-env)")
        assert self.file
        try:
            mtime = os.stat(self.file).st_mtime
            if self._value is None or mtime != self._mtime:
                with open(self.file, encoding="utf-8") as f:
                    v = f.read()
                if not v.strip():
                    raise SourceError(f"token file {clean(self.file)} (--prom-token-file) is empty")
                # a rotated file with a bad token is refused each time, not cached as good
                self._value, self._mtime = None, None
                v = checked_token(v, f"token file {clean(self.file)} (--prom-token-file)")
                self._value, self._mtime = v, mtime
        except OSError as e:
            raise SourceError(
                f"cannot read token file {clean(self.file)} (--prom-token-file): {clean(e.strerror or str(e))}"
            ) from None
        except UnicodeDecodeError:
            raise SourceError(f"token file {clean(self.file)} (--prom-token-file) is not text") from None
        return self._value


def checked_token(raw: str, origin: str) -> str:
    """The token as an HTTP header may carry it: one trailing newline (as `echo` writes) and
    surrounding spaces dropped; any other control character is refused with a message that
    names where the token came from, never its value."""
    remember_secret(raw)  # whatever happens next, its value is masked in every message
    v = raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith("\n") else raw
    v = v.strip(" ")
    bad = next((i for i, c in enumerate(v) if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        what = "a line break" if v[bad] in "\r\n" else f"control character 0x{ord(v[bad]):02x}"
        raise SourceError(f"the bearer token in {origin} holds {what} at character {bad + 1}: "
                          "a token is one line (refused; fix the token)")
    return v


class Answer(list["Series"]):
    """The series of one answer, with the server's `warnings` (a partial answer says so there)."""

    __slots__ = ("warnings",)

    def __init__(self, items: Iterable[Series] = (), warnings: tuple[str, ...] = ()) -> None:
        super().__init__(items)
        self.warnings = warnings


class Series(NamedTuple):
    """One result series: its labels and its points (unix seconds, value); NaN kept as NaN.

    A NamedTuple, not a dataclass: a large fleet's answer holds tens of thousands of them.
    """

    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]

    @property
    def value(self) -> float:
        return self.points[-1][1]


class PromClient:
    """Instant and range queries; raises SourceError with a user message on any failure."""

    def __init__(
        self,
        url: str,
        token: BearerToken | None = None,
        ca_file: str | None = None,
        insecure: bool = False,
        timeout: float = 10.0,
        max_mib: float = DEFAULT_MAX_MIB,
    ) -> None:
        self.base = normalise_url(url)
        self.display = display_url(self.base)
        self.token = token
        self.timeout = timeout  # the whole answer, headers to last byte (not per read)
        self.max_bytes = int(max_mib * 1024 * 1024)
        self._in_flight = 0  # answer bytes held by all requests now being read
        if ca_file and insecure:
            raise SourceError("give either --prom-ca or --prom-insecure, not both")
        verify: bool | ssl.SSLContext = not insecure
        if ca_file:
            try:
                verify = ssl.create_default_context(cafile=ca_file)
            except FileNotFoundError:
                raise SourceError(f"CA file {clean(ca_file)} (--prom-ca) not found") from None
            except (ssl.SSLError, OSError, ValueError) as e:
                raise SourceError(f"CA file {clean(ca_file)} (--prom-ca) is not a PEM certificate bundle: {clean(str(e))}") from None
        self._client = httpx.AsyncClient(
            verify=verify,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=8),
            headers={"Accept": "application/json", "User-Agent": "kvwatch"},
            follow_redirects=False,
        )
        self._use_get = False  # some proxies in front of Prometheus refuse POST
        self.last_duration_s = 0.0

    def __repr__(self) -> str:
        return f"PromClient({self.display!r})"

    async def close(self) -> None:
        await self._client.aclose()

    async def query(self, expr: str, at: float | None = None) -> Answer:
        params = {"query": expr}
        if at is not None:
            params["time"] = _fmt_time(at)
        data, warnings = await self._call("/api/v1/query", params)
        return Answer(series_from_data(data, expr), warnings)

    async def query_range(self, expr: str, start: float, end: float, step: float) -> Answer:
        params = {"query": expr, "start": _fmt_time(start), "end": _fmt_time(end), "step": f"{step:g}"}
        data, warnings = await self._call("/api/v1/query_range", params)
        # Prometheus returns at most one point per step in [start, end]; more is a broken or
        # hostile server, and every point would become a history sample
        most = int((end - start) / step) + 2 if step > 0 else 2
        return Answer(series_from_data(data, expr, max_points=most, where=self.display), warnings)

    async def _call(self, path: str, params: dict[str, str]) -> tuple[dict[str, Any], tuple[str, ...]]:
        headers = {}
        if self.token is not None:
            headers["Authorization"] = "Bearer " + self.token.value()
        url = self.base + path
        t0 = time.perf_counter()
        try:
            # one deadline for the whole answer: a body trickled a byte at a time never resets it
            async with asyncio.timeout(self.timeout):
                code, reason, location, body = await self._fetch(url, params, headers)
                return await self._decode(code, reason, location, body)
        except (httpx.TimeoutException, TimeoutError):
            raise SourceError(
                f"Prometheus at {self.display} did not answer within {self.timeout:g}s "
                "(overloaded, a slow link, or a firewall dropping packets?; --prom-timeout)"
            ) from None
        except httpx.HTTPError as e:
            raise SourceError(redact(describe_connect_error(self.display, e))) from None
        finally:
            self.last_duration_s = time.perf_counter() - t0

    async def _fetch(self, url: str, params: dict[str, str], headers: dict[str, str]) -> tuple[int, str, str, bytes]:
        if not self._use_get:
            got = await self._send(self._client.build_request("POST", url, data=params, headers=headers))
            if got[0] != 405:
                return got
            self._use_get = True  # some proxies in front of Prometheus refuse POST
        return await self._send(self._client.build_request("GET", url, params=params, headers=headers))

    async def _send(self, req: httpx.Request) -> tuple[int, str, str, bytes]:
        """Status, reason, Location and the body, read up to `max_bytes` (else SourceError).

        A second bound holds for all answers in flight together (a refresh runs several queries
        at once): whatever Prometheus sends, kvwatch holds at most twice `max_bytes` of them."""
        resp = await self._client.send(req, stream=True)
        body = bytearray()
        try:
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise SourceError(self._too_big(False))
            async for chunk in resp.aiter_bytes():
                body += chunk
                self._in_flight += len(chunk)
                if len(body) > self.max_bytes or self._in_flight > _IN_FLIGHT * self.max_bytes:
                    raise SourceError(self._too_big(len(body) <= self.max_bytes))
            return resp.status_code, resp.reason_phrase, resp.headers.get("location", "?"), bytes(body)
        finally:
            self._in_flight -= len(body)
            del body[:]
            await resp.aclose()

    def _too_big(self, together: bool) -> str:
        mib = f"{self.max_bytes / 1048576:g} MiB"
        both = f"{_IN_FLIGHT * self.max_bytes / 1048576:g} MiB"
        what = f"more than {both} with the answers in flight beside it" if together else f"more than {mib}"
        return f"Prometheus at {self.display} answered {what}: refused (narrow --match, or raise --prom-max-mib)"

    async def _decode(self, code: int, reason: str, location: str, raw: bytes) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The answer's `data` and its warnings (cleaned), or SourceError saying what is wrong."""
        where = self.display
        if code == 401:
            if self.token is None:
                raise SourceError(
                    f"Prometheus at {where} wants credentials (401 Unauthorized): "
                    "pass a bearer token with --prom-token-env VAR or --prom-token-file PATH"
                )
            raise SourceError(
                f"Prometheus at {where} rejected the bearer token from {self.token.origin} (401 Unauthorized)"
            )
        if code == 403:
            raise SourceError(
                f"Prometheus at {where} refused access (403 Forbidden): the token lacks permission to query"
            )
        if code == 404:
            raise SourceError(
                f"no Prometheus query API at {where} (404 on /api/v1/query): check the URL and any path "
                "prefix (e.g. Thanos/Mimir behind /prometheus)"
            )
        if 300 <= code < 400:
            loc = clean(location)
            raise SourceError(f"Prometheus at {where} redirected to {loc} ({code}): use that URL (a login page?)")
        try:
            body = await asyncio.to_thread(json.loads, raw) if len(raw) > _THREAD_DECODE_BYTES else json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            if code >= 500:
                raise SourceError(f"Prometheus at {where} failed ({code} {clean(reason)})") from None
            raise SourceError(
                f"{where} did not answer like a Prometheus API (HTTP {code}, not JSON): is this the right URL?"
            ) from None
        if not isinstance(body, dict):
            raise SourceError(f"{where} did not answer like a Prometheus API (unexpected JSON)")
        if body.get("status") != "success":
            err = clean(str(body.get("error") or body.get("message") or "unknown error"), 300)
            kind = clean(str(body.get("errorType") or ""), 40)
            if code in (400, 422) or kind in ("bad_data", "execution"):
                raise SourceError(f"Prometheus at {where} rejected the query ({kind or code}): {err}")
            if kind == "timeout" or code == 503:
                raise SourceError(f"Prometheus at {where} could not answer in time ({kind or code}): {err}")
            raise SourceError(f"Prometheus at {where} failed ({kind or code}): {err}")
        data = body.get("data")
        if not isinstance(data, dict):
            raise SourceError(f"{where} did not answer like a Prometheus API (no data)")
        return data, _warnings(body)


def _warnings(body: dict[str, Any]) -> tuple[str, ...]:
    """The answer's `warnings` (and `infos`), cleaned and bounded: a partial answer says so there."""
    out: list[str] = []
    for key in ("warnings", "infos"):
        items = body.get(key)
        if isinstance(items, list):
            out.extend(clean(str(w), 300) for w in items[:5])
    return tuple(out)


def describe_connect_error(where: str, e: BaseException) -> str:
    """One line for a failure to talk to the server at all (DNS, refused, TLS, bad URL)."""
    text = str(e)
    chain = [e]
    cur: BaseException | None = e
    while cur is not None and len(chain) < 8:
        cur = cur.__cause__ or cur.__context__
        if cur is not None:
            chain.append(cur)
    host = urlsplit(where).hostname or where
    for x in chain:
        if isinstance(x, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(x):
            reason = clean(getattr(x, "verify_message", "") or "certificate verify failed")
            return (
                f"TLS certificate of {where} not trusted ({reason}): pass its CA with --prom-ca FILE, "
                "or --prom-insecure to skip verification"
            )
        if isinstance(x, ssl.SSLError):
            return f"TLS handshake with {where} failed: {clean(str(x))} (http:// vs https://?)"
    if any(isinstance(x, socket.gaierror) for x in chain):
        return f"cannot resolve Prometheus host {clean(host)!r} (DNS): check the URL"
    if any(isinstance(x, ConnectionRefusedError) for x in chain):
        return f"connection refused by {where}: is Prometheus listening there (port, port-forward)?"
    lowered = text.lower()
    if any(
        s in lowered
        for s in ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
                  "no address associated", "getaddrinfo failed", "name resolution")
    ) or "[errno -2]" in lowered or "[errno -3]" in lowered or "[errno -5]" in lowered:
        return f"cannot resolve Prometheus host {clean(host)!r} (DNS): check the URL"
    if "connection refused" in lowered or f"[errno {errno.ECONNREFUSED}]" in lowered:
        return f"connection refused by {where}: is Prometheus listening there (port, port-forward)?"
    if isinstance(e, httpx.UnsupportedProtocol) or isinstance(e, httpx.InvalidURL):
        return f"bad Prometheus URL {where}: {clean(text)}"
    if "unreachable" in lowered:
        return f"network unreachable for {where}: {clean(text)}"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"{where} closed the connection or spoke something other than HTTP: {clean(text) or 'no detail'}"
    return f"cannot reach Prometheus at {where}: {clean(text) or type(e).__name__}"


def _fmt_time(t: float) -> str:
    return f"{t:.3f}"


def series_from_data(data: dict[str, Any], expr: str = "", *, max_points: int | None = None,
                     where: str = "Prometheus") -> list[Series]:
    """The `data` of a query answer as Series; malformed elements are skipped. A range series
    with more than `max_points` points refuses the whole answer (SourceError)."""
    rtype = data.get("resultType")
    result = data.get("result")
    if not isinstance(result, list):
        raise SourceError("Prometheus answered without a result list")
    out: list[Series] = []
    add = out.append
    if rtype == "vector":
        for r in result:
            try:
                m = r["metric"]
                ts, v = r["value"]
                if type(m) is dict:
                    add(Series(m, ((float(ts), float(v)),)))
            except (KeyError, TypeError, ValueError):
                continue  # one malformed element never spoils the rest
    elif rtype == "matrix":
        for r in result:
            try:
                m = r["metric"]
                values = r["values"]
                if max_points is not None and len(values) > max_points:
                    raise SourceError(f"{where} answered {len(values)} points for one series where the range "
                                      f"query asks for at most {max_points}: refused")
                pts = tuple([(float(ts), float(v)) for ts, v in values])
            except (KeyError, TypeError, ValueError):
                continue
            if pts and type(m) is dict:
                add(Series(m, pts))
    elif rtype in ("scalar", "string"):
        raise SourceError(f"query returned a {rtype}, expected series: {clean(expr, 120)}")
    else:
        raise SourceError(f"Prometheus answered with an unknown result type {clean(str(rtype), 40)!r}")
    return out

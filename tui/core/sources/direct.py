"""Scrape vLLM /metrics endpoints given directly (`kvwatch --url ...`): bare metal, a
port-forward, a node reached over SSH.

One client per target: plain http:// goes through the lean keep-alive client in `http1.py`
(~10x less CPU per page than httpx); https and proxied endpoints through one httpx.AsyncClient
each (a single shared client serialises on its connection pool and degrades quadratically with
the number of targets). Each target gets its own deadline and at most one request in flight,
and a poll publishes on its schedule (`pace`), so a hanging replica never delays the others.
"""

from __future__ import annotations

import asyncio
import base64
import codecs
import errno
import functools
import os
import socket
import ssl
import sys
import time
from dataclasses import dataclass
from http.cookiejar import CookieJar
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from .. import engines
from ..metrics.extract import parse_dcgm, to_gpu
from ..metrics.parser import Page, content_type_reason, not_metrics_reason
from ..model import GpuSample, Scrape
from ..textsafe import clean, redact, remember_secret
from .fdlimit import make_room
from .http1 import ERROR_PEEK, TRUNCATED, BodyDecoder, BodyTooLarge, Http1Client, HttpError

if TYPE_CHECKING:
    import httpx

_T = TypeVar("_T")

ACCEPT = "text/plain;version=0.0.4"  # not OpenMetrics: the 0.0.4 text is what the parser reads
DEFAULT_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Target:
    """One replica to scrape. `gpu_url` is an optional DCGM-exporter page for its GPUs;
    `gpu_pod` keeps only the devices whose `pod` label matches (pod-mapping exporters)."""

    name: str
    url: str
    gpu_url: str | None = None
    group: str | None = None
    gpu_pod: str | None = None


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client: loading the CA bundle costs ~16 ms a client, which is
    4 s of CPU at start-up for 256 replicas (bench/bench_refresh.py under cProfile)."""
    import httpx

    return httpx.create_ssl_context()


def redact_url(url: str) -> str:
    """`url` with any user:password@ replaced by `***@`: what may be shown or recorded."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, tail = rest.partition("/")
    if "@" not in authority:
        return url
    return f"{scheme}{sep}***@{authority.rsplit('@', 1)[1]}{slash}{tail}"


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """(`url` without its userinfo, (user, password) percent-decoded, or None)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    host = parts.netloc.rsplit("@", 1)[1]
    creds = (unquote(parts.username or ""), unquote(parts.password or ""))
    if creds[1]:
        remember_secret(creds[1])  # masked by value too, wherever text leaves kvwatch
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), creds


def basic_auth(creds: tuple[str, str]) -> str:
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode("ascii")


def display_name(url: str) -> str:
    """A --url target's name on screen and in recordings: host:port[/path], no credentials."""
    return split_credentials(url)[0].split("://", 1)[-1].rsplit("/metrics", 1)[0]


def normalize_url(url: str) -> str:
    """`host:port` or `http://host:port` -> `http://host:port/metrics`; ValueError if unusable.
    Credentials (user:password@) are kept for the request but never put in an error."""
    raw = url.strip()
    if not raw:
        raise ValueError("empty URL")
    if "://" not in raw:
        raw = "http://" + raw
    shown = redact_url(url.strip())
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{shown!r}: only http:// and https:// URLs can be scraped")
    if not parts.hostname:
        raise ValueError(f"{shown!r}: no host in URL")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ValueError(f"{shown!r}: bad port") from None
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


class _NoCookies(CookieJar):
    """Metrics endpoints set no cookies worth keeping; skip httpx's per-response cookie parsing."""

    def extract_cookies(self, response: Any, request: Any) -> None:  # noqa: ARG002
        return None


class _Endpoint:
    """One target's client: the lean HTTP/1.1 one (`lean`) for plain http without a proxy,
    else httpx (its own connection pool) with its prebuilt GET request."""

    __slots__ = ("client", "request", "lean", "proxied")

    def __init__(self, client: "httpx.AsyncClient | None", url: str, lean: Http1Client | None = None,
                 proxied: bool = False) -> None:
        self.client = client
        self.lean = lean
        self.request = client.build_request("GET", url) if client is not None else None
        self.proxied = proxied  # through a proxy from the environment: its failures say so

    @property
    def is_closed(self) -> bool:
        return self.lean.closed if self.lean is not None else self.client is None or self.client.is_closed

    async def aclose(self) -> None:
        if self.lean is not None:
            await self.lean.aclose()
        if self.client is not None:
            await self.client.aclose()


_PROXY_VARS = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


def _wants_httpx(url: str, trust_env: bool) -> bool:
    """https (certificates, TLS) and proxies from the environment go through httpx."""
    if not url.startswith("http://"):
        return True
    return trust_env and any(os.environ.get(v) for v in _PROXY_VARS)


def _uses_proxy(url: str) -> bool:
    """Whether httpx (trust_env) sends `url` through a proxy from the environment: the proxy for
    its scheme or ALL_PROXY, unless NO_PROXY names its host."""
    from urllib.request import getproxies_environment, proxy_bypass_environment  # type: ignore[attr-defined]  # public in CPython, absent from typeshed

    proxies = getproxies_environment()
    parts = urlsplit(url)
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not proxy_bypass_environment(parts.netloc.rsplit("@", 1)[-1], proxies)


def _charset(content_type: str) -> str:
    """The charset named in a Content-Type, if Python knows it; UTF-8 (the format's own) else."""
    _, _, rest = content_type.partition("charset=")
    name = rest.split(";")[0].strip().strip('"') if rest else ""
    if name:
        try:
            return codecs.lookup(name).name
        except LookupError:
            pass
    return "utf-8"


class ScrapeError(Exception):
    """A short, human reason why one endpoint could not be read; `retry_after`: seconds the
    server asked to be left alone for (429/503 with Retry-After)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


MAX_RETRY_AFTER = 300.0  # a longer ask is capped: the replica is checked again within 5 min


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Retry-After in seconds (delta-seconds or an HTTP date), within [0, MAX_RETRY_AFTER]."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        secs = float(value)
    else:
        from email.utils import parsedate_to_datetime

        try:
            secs = parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return min(max(secs, 0.0), MAX_RETRY_AFTER)


EXCERPT_MAX = 100  # characters of an error answer's first line kept as the reason


def error_excerpt(raw: bytes) -> str:
    """The first non-blank line of an error answer's body, as a reason: from the network, so
    escaped, cut to EXCERPT_MAX, and with credentials (a URL's userinfo, Authorization values,
    known secrets) masked."""
    text = raw.decode("utf-8", errors="replace")
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return clean(redact(line), EXCERPT_MAX)


def status_error(status: int, headers: Mapping[str, str], body: bytes = b"") -> ScrapeError:
    """The error for a non-200 answer, with what its body says; a rate limit says how long it
    asked for."""
    wait = retry_after_s(headers.get("retry-after")) if status in (429, 503) else None
    said = error_excerpt(body)
    said = f": {said}" if said else ""
    if status == 429:
        return ScrapeError(f"HTTP 429 (rate limited; retry after {wait:.0f} s){said}" if wait is not None
                           else f"HTTP 429 (rate limited){said}", wait)
    if wait is not None:
        return ScrapeError(f"HTTP {status} (retry after {wait:.0f} s){said}", wait)
    return ScrapeError(f"HTTP {status}{said}")


async def _peek_httpx(resp: "httpx.Response") -> bytes:
    """The first ERROR_PEEK bytes of an error answer's body (httpx path; as http1's peek)."""
    if resp.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        return b""
    got = bytearray()

    async def read() -> None:
        async for chunk in resp.aiter_raw():
            got.extend(chunk)
            if len(got) >= ERROR_PEEK:
                break

    try:
        await asyncio.wait_for(read(), 1.0)
    except Exception:  # noqa: BLE001 - a failing error body only loses its excerpt
        pass
    return bytes(got[:ERROR_PEEK])


class DirectSource:
    """Polls a list of /metrics URLs concurrently; one Scrape per target per poll."""

    def __init__(
        self,
        targets: Iterable[Target],
        timeout: float = 2.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
        description: str | None = None,
        keep_raw: bool = True,
        trust_env: bool = True,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.clock = clock
        self.keep_raw = keep_raw  # the raw page is kept for recording; ~40 KB per scrape
        self.trust_env = trust_env
        self._targets: dict[str, Target] = {}
        self._clients: dict[str, _Endpoint] = {}  # per target name
        self._gpu_clients: dict[str, _Endpoint] = {}  # per GPU URL (shared by a node)
        self._retired: list[_Endpoint] = []
        self._fixed_description = description
        self.notice: str | None = None  # a line for the user about the targets (open-files limit)
        # At most one request in flight per replica (and per GPU page): a scrape that outlives
        # a poll keeps running and is collected by a later poll, never started twice.
        self._inflight: dict[str, tuple[asyncio.Task[Any], float]] = {}  # target name -> (its scrape, asked at)
        self._inflight_gpu: dict[str, asyncio.Task[Any]] = {}  # GPU URL -> its fetch
        self._pending: dict[str, float] = {}  # target name -> start ts of a scrape not yet answered
        self._not_before: dict[str, tuple[float, str]] = {}  # name -> (monotonic, reason): Retry-After
        self._seen: set[str] = set()  # targets with an answer (of any kind) published
        # How long a poll waits for answers before it publishes what arrived (`pace`); None
        # waits for every answer (each is bounded by the timeout), as a one-shot caller expects.
        self.publish_s: float | None = None
        self.first_publish_s: float | None = None
        self.polled_at: float | None = None  # the clock at the last poll (the refresh's "now")
        # Each fetch's deadline (see _guarded): fetching task -> (loop time it is due by, its
        # cancel requests on entry); one timer for them all (_expiry), the earliest's.
        self._fetching: dict[asyncio.Task[Any], tuple[float, int]] = {}
        self._expired: set[asyncio.Task[Any]] = set()  # cancelled by their deadline
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_loop: asyncio.AbstractEventLoop | None = None
        self.set_targets(targets)

    # -- Source protocol -----------------------------------------------------------------------
    @property
    def description(self) -> str:
        if self._fixed_description is not None:
            return self._fixed_description
        urls = [t.url for t in self._targets.values()]
        if len(urls) == 1:
            return f"direct: {redact_url(urls[0])}"
        return f"direct: {len(urls)} endpoints"

    @property
    def targets(self) -> tuple[Target, ...]:
        return tuple(self._targets.values())

    async def start(self) -> None:
        for t in self._targets.values():
            self._endpoint(t)

    def pace(self, interval: float) -> None:
        """Publish on a refresh schedule of `interval` seconds. A poll waits for answers at most
        8% of it, so a replica that stops answering shifts the schedule by less than its 10%
        tolerance; a slower answer is collected by the next poll (one refresh late, not stale)
        and a replica with none by then is `pending`."""
        self.publish_s = max(0.02, 0.08 * interval)
        self.first_publish_s = interval  # the first screen: every replica if it can

    @property
    def pending(self) -> dict[str, float]:
        """Replicas whose scrape was still unanswered when the last poll returned: name -> the
        time it was asked (its last value is stale)."""
        return dict(self._pending)

    async def poll(self) -> list[Scrape]:
        await self._close_retired()
        targets = self._targets
        first = self.polled_at is None
        wait = self.first_publish_s if first else self.publish_s
        if wait is not None and wait >= self.timeout:
            wait = None  # every scrape ends by its own timeout: wait for them all
        ts = self.polled_at = self.clock()
        # Answers that came in since the last poll published: taken now, so that their replica
        # is asked again at this poll (not every other one) and they are published even if the
        # new answer is not in by the publish point.
        answered = self._collect()
        held: list[Scrape] = []  # replicas that asked to be left alone (Retry-After): their reason again
        mono = time.monotonic()
        for name, t in targets.items():
            if name in self._inflight:
                continue
            hold = self._not_before.get(name)
            if hold is not None:
                if mono < hold[0]:
                    held.append(Scrape(ts=ts, replica=name, error=hold[1], group=t.group))
                    continue
                del self._not_before[name]
            self._inflight[name] = (asyncio.ensure_future(self._scrape(t, ts)), ts)
        t0 = time.monotonic()
        if self._inflight:
            await asyncio.wait([task for task, _ in self._inflight.values()], timeout=wait)
        if wait is not None and not first:
            # Publish at the same point of every refresh, answers early or not: the schedule
            # stays even when one refresh's answers all come back and the next one's do not.
            await asyncio.sleep(max(0.0, wait - (time.monotonic() - t0)))
        answered.update(self._collect())  # the newer answer wins
        # Pending (shown stale): only a replica asked at an earlier poll and still unanswered,
        # i.e. silent for a whole refresh. One asked at this poll whose answer comes after the
        # publish point (a slow replica, or every replica when the loop runs late under load)
        # is collected by the next poll: one refresh late, never stale.
        # A replica never answered yet is pending too: listed (down), not left out.
        seen = self._seen
        seen.update(answered)
        self._pending = {name: asked for name, (_, asked) in self._inflight.items() if asked < ts or name not in seen}
        return held + list(answered.values())

    def _collect(self) -> dict[str, Scrape]:
        """Take the finished scrapes out of the in-flight table: name -> its Scrape."""
        out: dict[str, Scrape] = {}
        targets = self._targets
        for name, (task, asked) in list(self._inflight.items()):
            if not task.done():
                continue
            del self._inflight[name]
            if task.cancelled() or name not in targets:  # a target removed meanwhile: dropped
                continue
            if task.exception() is not None:  # a failure _guarded did not map: still the replica's
                t = targets[name]
                out[name] = Scrape(ts=asked, replica=name, group=t.group,
                                   error=f"scrape failed ({type(task.exception()).__name__})")
            else:
                out[name] = task.result()
        return out

    async def close(self) -> None:
        tasks = [*(t for t, _ in self._inflight.values()), *self._inflight_gpu.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._inflight.clear()
        self._inflight_gpu.clear()
        self._pending = {}
        if self._expiry is not None and not self._fetching:
            self._expiry.cancel()
            self._expiry = None
        clients = list(self._clients.values()) + list(self._gpu_clients.values())
        self._clients.clear()
        self._gpu_clients.clear()
        self._retired.extend(clients)
        await self._close_retired()

    # -- targets -------------------------------------------------------------------------------
    def set_targets(self, targets: Iterable[Target]) -> None:
        """Replace the target list; clients of removed or changed targets are closed on the next
        poll (a poll in flight may still be using them)."""
        new: dict[str, Target] = {}
        for t in targets:
            if t.name in new:
                raise ValueError(f"two targets named {t.name!r}")
            t = Target(
                t.name,
                normalize_url(t.url),
                normalize_url(t.gpu_url) if t.gpu_url else None,
                t.group,
                t.gpu_pod,
            )
            new[t.name] = t
        for name, old in self._targets.items():
            if name not in new or new[name] != old:
                self._not_before.pop(name, None)
                self._seen.discard(name)
                scrape = self._inflight.pop(name, None)
                if scrape is not None:  # asked of the old target: its answer no longer applies
                    scrape[0].cancel()
            if name not in new or new[name].url != old.url:
                client = self._clients.pop(name, None)
                if client is not None:
                    self._retired.append(client)
        used_gpu = {t.gpu_url for t in new.values() if t.gpu_url}
        # one kept-alive connection per replica and per GPU page: the soft `ulimit -n` raised to fit
        self.notice = make_room(len(new) + len(used_gpu))
        for url in list(self._gpu_clients):
            if url not in used_gpu:
                self._retired.append(self._gpu_clients.pop(url))
        self._targets = new

    # -- internals -----------------------------------------------------------------------------
    def _new_endpoint(self, url: str) -> _Endpoint:
        # user:password@ in the URL is Basic auth for that origin; never in the Host header
        url, creds = split_credentials(url)
        if not _wants_httpx(url, self.trust_env):
            auth = basic_auth(creds) if creds else None
            return _Endpoint(None, url, Http1Client(url, {"Accept": ACCEPT, "User-Agent": "kvwatch"}, self.max_bytes,
                                                    auth=auth))
        import httpx  # only for https or a proxy: ~60 ms of import that plain http never pays

        client = httpx.AsyncClient(
            auth=httpx.BasicAuth(*creds) if creds else None,  # httpx drops it on a cross-origin redirect
            verify=_ssl_context(),
            headers={"Accept": ACCEPT, "User-Agent": "kvwatch", "Accept-Encoding": "gzip"},  # what BodyDecoder reads
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=True,  # e.g. /metrics -> /metrics/ on a mounted ASGI app
            trust_env=self.trust_env,
            cookies=_NoCookies(),
        )
        return _Endpoint(client, url, proxied=self.trust_env and _uses_proxy(url))

    def _endpoint(self, t: Target) -> _Endpoint:
        e = self._clients.get(t.name)
        if e is None:
            e = self._clients[t.name] = self._new_endpoint(t.url)
        return e

    async def _close_retired(self) -> None:
        retired, self._retired = self._retired, []
        for e in retired:
            try:
                await e.aclose()
            except Exception:  # noqa: BLE001 - closing a broken client must not fail a poll
                pass

    async def _guarded(self, coro: Awaitable[_T], proxied: bool = False,
                       on_retry: Callable[[float], None] | None = None) -> tuple[_T | None, str | None]:
        """Run with the per-target deadline; returns (result, error reason). A connection-level
        reason through a proxy says so: the proxy, not the replica, may be what failed.

        The deadline is `asyncio.timeout`'s (the task cancelled `timeout` s after it began,
        the cancellation turned into a timeout), but every fetch shares one timer (_expire):
        an asyncio.timeout per scrape (its object, a timer handle pushed on the loop's heap and
        cancelled) was ~2% of a 256-replica --json process's CPU."""
        task = asyncio.current_task()
        assert task is not None  # a poll's scrapes and GPU fetches each run in a task of their own
        loop = asyncio.get_running_loop()
        due = loop.time() + self.timeout
        self._fetching[task] = (due, task.cancelling())
        # else a timer is set for an earlier deadline, and it sets the next (unless it was set
        # in another event loop: a source polled from one asyncio.run, then from another)
        if self._expiry is None or self._expiry_loop is not loop:
            self._expiry, self._expiry_loop = loop.call_at(due, self._expire), loop
        try:
            try:
                return await coro, None
            except asyncio.CancelledError:
                # as asyncio.timeout: a timeout only when no other cancellation is pending
                if task not in self._expired or task.uncancel() > self._fetching[task][1]:
                    raise
                raise TimeoutError from None
            finally:
                self._expired.discard(task)
                self._fetching.pop(task, None)
        except TimeoutError:
            reason = f"timeout after {float(self.timeout)}s"
        except ScrapeError as e:
            if e.retry_after is not None and on_retry is not None:
                on_retry(e.retry_after)
            return None, str(e)
        except OSError as e:
            reason = _os_reason(e)
        except Exception as e:  # noqa: BLE001 - one endpoint's odd failure must not stop the poll
            httpx = sys.modules.get("httpx")  # imported only where an endpoint uses it
            if httpx is None or not isinstance(e, httpx.HTTPError):
                return None, f"scrape failed ({type(e).__name__})"
            reason = _http_reason(e, self.timeout)
        return None, f"via proxy: {reason}" if proxied and not reason.startswith("proxy") else reason

    def _expire(self) -> None:
        """The fetches past their deadline cancelled (see _guarded); the timer set again for the
        earliest deadline still ahead. Deadlines come in the order the fetches began."""
        self._expiry = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        ahead = None
        for task, (due, _) in list(self._fetching.items()):
            if due > now:
                ahead = due if ahead is None else min(ahead, due)
            elif task not in self._expired and not task.done():
                self._expired.add(task)
                task.cancel()
        if ahead is not None:
            self._expiry = loop.call_at(ahead, self._expire)

    async def _fetch(self, endpoint: _Endpoint) -> str:
        if endpoint.lean is not None:
            return self._decode(*await self._fetch_lean(endpoint.lean))
        # The request is built once per target: httpx spends as much building one as sending it.
        assert endpoint.client is not None and endpoint.request is not None  # not lean: an httpx endpoint
        resp = await endpoint.client.send(endpoint.request, stream=True)
        try:
            if resp.status_code != 200:
                raise status_error(resp.status_code, resp.headers, await _peek_httpx(resp))
            ctype = resp.headers.get("content-type", "")
            reason = content_type_reason(ctype)  # before reading the body
            if reason is not None:
                raise ScrapeError(reason)
            declared = resp.headers.get("content-length")
            over = ScrapeError(f"response over {human_bytes(self.max_bytes)}")
            try:
                # the raw bytes through the lean client's decoder: the same cap after
                # decompression, the same check that a gzip stream reached its end
                body = BodyDecoder(resp.headers.get("content-encoding", ""), self.max_bytes)
                raw_cap = 2 * self.max_bytes + 65536
                if declared is not None and declared.isdigit() and int(declared) > (
                        raw_cap if body.enc else self.max_bytes):
                    raise over
                raw = 0
                async for chunk in resp.aiter_raw():
                    raw += len(chunk)
                    if raw > raw_cap:
                        raise over
                    body.feed(chunk)
                close_delimited = declared is None and "chunked" not in resp.headers.get("transfer-encoding", "")
                data = body.finish(close_delimited)
            except BodyTooLarge:
                raise over from None
            except HttpError as e:
                raise ScrapeError(str(e)) from None
        finally:
            await resp.aclose()
        return self._decode(data, ctype)

    async def _fetch_lean(self, client: Http1Client) -> tuple[bytes, str]:
        try:
            resp, body = await client.get(self._check_head)
        except BodyTooLarge:
            raise ScrapeError(f"response over {human_bytes(self.max_bytes)}") from None
        except HttpError as e:
            raise ScrapeError(str(e)) from None
        return body or b"", resp.headers.get("content-type", "")

    def _check_head(self, status: int, headers: dict[str, str], excerpt: bytes = b"") -> None:
        """What is known before the body: a wrong status (with its body's first bytes) or
        content type, a declared size."""
        if status != 200:
            raise status_error(status, headers, excerpt)
        reason = content_type_reason(headers.get("content-type", ""))
        if reason is not None:
            raise ScrapeError(reason)

    def _decode(self, body: bytes, ctype: str) -> str:
        try:
            text = body.decode(_charset(ctype), errors="replace")
        except LookupError:  # a codec that is not a text encoding (e.g. charset=rot13)
            text = body.decode("utf-8", errors="replace")
        reason = not_metrics_reason(text, ctype)
        if reason is not None:
            raise ScrapeError(reason)
        return text

    async def _fetch_gpu(self, url: str) -> Page:
        e = self._gpu_clients.get(url)
        if e is None:
            e = self._gpu_clients[url] = self._new_endpoint(url)
        return parse_dcgm(await self._fetch(e))

    def _gpu_task(self, url: str) -> asyncio.Task[Any]:
        """The node's exporter page, fetched and parsed once for every replica on it that asks
        while it is in flight (replicas of one node share the page)."""
        task = self._inflight_gpu.get(url)
        if task is None:
            task = self._inflight_gpu[url] = asyncio.ensure_future(self._guarded(self._fetch_gpu(url)))
            task.add_done_callback(functools.partial(self._gpu_done, url))
        return task

    def _gpu_done(self, url: str, _task: object) -> None:
        self._inflight_gpu.pop(url, None)

    async def _scrape(self, t: Target, ts: float) -> Scrape:
        # Started early so that it runs beside the replica's own fetch.
        gpu_task = self._gpu_task(t.gpu_url) if t.gpu_url else None
        t0 = time.perf_counter()
        endpoint = self._endpoint(t)
        asked_to_wait: list[float] = []
        text, error = await self._guarded(self._fetch(endpoint), endpoint.proxied, asked_to_wait.append)
        if asked_to_wait and error is not None:  # not asked again before Retry-After
            self._not_before[t.name] = (time.monotonic() + asked_to_wait[0], error)
        latency = time.perf_counter() - t0
        if error is not None or text is None:
            return Scrape(ts=ts, replica=t.name, error=error or "no page", group=t.group, latency_s=latency)
        sample, bad = engines.read_page(text)
        if bad is not None:
            # an engine-less page keeps its text for the recorder; an unreadable one does not
            raw = text if self.keep_raw and bad == engines.NO_ENGINE_METRICS else None
            return Scrape(ts=ts, replica=t.name, error=bad, raw=raw, group=t.group, latency_s=latency)
        gpu = await self._gpu(t, gpu_task) if gpu_task is not None else None
        return Scrape(
            ts=ts,
            replica=t.name,
            sample=sample,
            raw=text if self.keep_raw else None,
            gpu=gpu,
            group=t.group,
            latency_s=latency,
        )

    async def _gpu(self, t: Target, task: asyncio.Task[Any]) -> GpuSample | None:
        # A GPU endpoint failure leaves gpu None; it never fails the replica. shield: one
        # replica's scrape being cancelled must not cancel the page its node-mates wait for.
        page, error = await asyncio.shield(task)
        if error is not None or page is None:
            return None
        try:
            return to_gpu(page, pod=t.gpu_pod)
        except Exception:  # noqa: BLE001 - an odd exporter page must not fail the replica
            return None


def _http_reason(e: httpx.HTTPError, timeout: float) -> str:
    import httpx  # at run time: the module-level name exists only for type checking

    if isinstance(e, httpx.ProxyError):
        return "proxy refused the connection to the replica"
    if isinstance(e, httpx.TimeoutException):
        return f"timeout after {float(timeout)}s"
    if isinstance(e, httpx.ConnectError):
        return _connect_reason(e)
    if isinstance(e, httpx.RemoteProtocolError):
        if "message body" in str(e) or "incomplete chunked" in str(e):  # h11: closed before the body's end
            return f"{TRUNCATED} (connection closed mid-body)"
        return "bad HTTP response (connection closed or not HTTP)"
    if isinstance(e, httpx.ReadError):
        return "connection reset while reading"
    if isinstance(e, httpx.TooManyRedirects):
        return "too many redirects"
    if isinstance(e, httpx.UnsupportedProtocol):
        return "unsupported URL scheme"
    if isinstance(e, httpx.DecodingError):
        return "undecodable response body"
    return f"HTTP error: {type(e).__name__}"


def _connect_reason(e: Exception) -> str:
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return _tls_reason(cause)
        if isinstance(cause, OSError) and cause.errno is not None:
            return _os_reason(cause)
        cause = cause.__cause__ or cause.__context__
    text = str(e).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "host not found"
    if "ssl" in text or "certificate" in text:
        return "TLS error"
    return "cannot connect"


def _tls_reason(e: ssl.SSLError) -> str:
    """OpenSSL's own short words for why (its verify message or reason code), printable ASCII."""
    if isinstance(e, ssl.SSLCertVerificationError):
        why = e.verify_message or "certificate verify failed"
        head = "TLS: certificate not trusted"
    else:
        why = e.reason or type(e).__name__
        head = "TLS error"
    why = "".join(c for c in str(why) if " " <= c <= "~")[:80]
    return f"{head} ({why})"


def _os_reason(e: OSError) -> str:
    if e.errno == errno.ECONNREFUSED:
        return "connection refused"
    if e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return "host unreachable"
    if e.errno == errno.ECONNRESET:
        return "connection reset"
    if isinstance(e, socket.gaierror):
        return "host not found"
    return f"cannot connect ({e.strerror or type(e).__name__})"

"""DirectSource against real HTTP servers on 127.0.0.1: one good replica keeps yielding samples
while the others hang, fail, lie about being metrics, overflow, or are not there at all."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest
from aiohttp import web

from tui.core.model import Scrape
from tui.core.sources.base import Source
from tui.core.sources.direct import DirectSource, Target, human_bytes, normalize_url

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "samples"


def sample_text(name: str) -> str:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"reference sample {path} not found (the shared dir sits beside the checkout)")
    return path.read_text()


V0_PAGE = "vllm-0.6.x-v0-vllmComposer-test-fixture-codeindex-48058675646.prom"
SGLANG_PAGE = "sglang-0.5.1-issue-13485.prom"
DCGM_PAGE = (
    'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",pod="vllm-0"} 70000\n'
    'DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",pod="vllm-0"} 10000\n'
    'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",pod="vllm-0"} 97\n'
    'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",pod="other"} 100\n'
    'DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b",pod="other"} 79900\n'
)
TIMEOUT = 0.5
MAX_BYTES = 64 * 1024


class Servers:
    """A small aiohttp app with one route per behaviour; records what it saw."""

    def __init__(self) -> None:
        self.accept_headers: list[str] = []
        self.peers: dict[str, list[tuple]] = {}
        self.release = asyncio.Event()
        self.good_page = sample_text(V0_PAGE)
        self.port = 0
        self.runner: web.AppRunner | None = None

    def _seen(self, request: web.Request) -> None:
        self.accept_headers.append(request.headers.get("Accept", ""))
        self.peers.setdefault(request.path, []).append(request.transport.get_extra_info("peername"))

    async def good(self, request: web.Request) -> web.Response:
        self._seen(request)
        return web.Response(text=self.good_page, content_type="text/plain", charset="utf-8")

    async def hang(self, request: web.Request) -> web.Response:
        self._seen(request)
        await self.release.wait()  # never answers while the test runs
        return web.Response(text="late 1\n")

    async def error(self, request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    async def html(self, request: web.Request) -> web.Response:
        return web.Response(text="<html><body>Sign in</body></html>", content_type="text/html")

    async def html_as_text(self, request: web.Request) -> web.Response:
        return web.Response(text="<!DOCTYPE html><html></html>", content_type="text/plain")

    async def big(self, request: web.Request) -> web.Response:
        return web.Response(body=b"x 1\n" * (MAX_BYTES // 2), content_type="text/plain")

    async def big_chunked(self, request: web.Request) -> web.StreamResponse:
        # No Content-Length: the cap has to be enforced while streaming.
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for _ in range(64):
                await resp.write(b"x 1\n" * 1024)
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    async def trickle(self, request: web.Request) -> web.StreamResponse:
        # Headers at once, then a line every 0.1 s: each read beats httpx's per-read timeout,
        # so only the per-target deadline stops it.
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        try:
            for i in range(100):
                await resp.write(f"vllm:num_requests_running{{engine=\"{i}\"}} 1\n".encode())
                await asyncio.sleep(0.1)
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    async def odd_charset(self, request: web.Request) -> web.Response:
        return web.Response(body=self.good_page.encode(), headers={"Content-Type": "text/plain; charset=rot13"})

    async def sglang(self, request: web.Request) -> web.Response:
        return web.Response(text=sample_text(SGLANG_PAGE), content_type="text/plain")

    async def dcgm(self, request: web.Request) -> web.Response:
        return web.Response(text=DCGM_PAGE, content_type="text/plain")

    async def start(self) -> None:
        app = web.Application()
        app.add_routes(
            [
                web.get("/good/metrics", self.good),
                web.get("/good2/metrics", self.good),
                web.get("/hang", self.hang),
                web.get("/500", self.error),
                web.get("/html", self.html),
                web.get("/html-as-text", self.html_as_text),
                web.get("/big", self.big),
                web.get("/big-chunked", self.big_chunked),
                web.get("/sglang", self.sglang),
                web.get("/trickle", self.trickle),
                web.get("/odd-charset", self.odd_charset),
                web.get("/dcgm", self.dcgm),
            ]
        )
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        # Not HTTP at all: a line of text, then the connection closes.
        self.raw_server = await asyncio.start_server(self._not_http, "127.0.0.1", 0)
        self.raw_port = self.raw_server.sockets[0].getsockname()[1]

    async def _not_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
        writer.close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def stop(self) -> None:
        self.release.set()
        self.raw_server.close()
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def servers():
    s = Servers()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def by_name(scrapes: list[Scrape]) -> dict[str, Scrape]:
    return {s.replica: s for s in scrapes}


async def test_bad_replicas_get_reasons_while_the_good_one_updates(servers):
    targets = [
        Target("good", servers.url("/good/metrics"), group="dp-a"),
        Target("hang", servers.url("/hang")),
        Target("error", servers.url("/500")),
        Target("html", servers.url("/html")),
        Target("html-as-text", servers.url("/html-as-text")),
        Target("big", servers.url("/big")),
        Target("big-chunked", servers.url("/big-chunked")),
        Target("closed", f"http://127.0.0.1:{closed_port()}/metrics"),
        Target("sglang", servers.url("/sglang")),
        Target("trickle", servers.url("/trickle")),
        Target("not-http", f"http://127.0.0.1:{servers.raw_port}/metrics"),
        Target("odd-charset", servers.url("/odd-charset")),
    ]
    src = DirectSource(targets, timeout=TIMEOUT, max_bytes=MAX_BYTES, clock=lambda: 1234.5)
    assert isinstance(src, Source)
    await src.start()
    try:
        for _ in range(2):  # the second poll runs over kept-alive connections
            t0 = time.perf_counter()
            scrapes = await src.poll()
            elapsed = time.perf_counter() - t0
            assert elapsed < TIMEOUT + 0.5, f"poll took {elapsed:.2f}s with a {TIMEOUT}s timeout"
            got = by_name(scrapes)
            assert set(got) == {t.name for t in targets}
            good = got["good"]
            assert good.ok and good.error is None
            assert good.ts == 1234.5 and good.group == "dp-a"
            assert good.sample.value("running") == 3.0
            assert good.raw == servers.good_page
            assert good.latency_s is not None and good.latency_s < TIMEOUT
            assert got["odd-charset"].ok and got["odd-charset"].sample.value("waiting") == 2.0
            # a real SGLang 0.5.1 page is read as SGLang (engines/sglang.py), not refused
            assert got["sglang"].ok and got["sglang"].sample.engine == "sglang"
            assert got["sglang"].sample.value("running") == 1.0
            reasons = {n: s.error for n, s in got.items() if n not in ("good", "odd-charset", "sglang")}
            assert reasons == {
                "hang": f"timeout after {float(TIMEOUT)}s",
                "error": "HTTP 500: boom",
                "html": "not a metrics page (text/html)",
                "html-as-text": "not a metrics page (HTML)",
                "big": "response over 64 KiB",
                "big-chunked": "response over 64 KiB",
                "closed": "connection refused",
                "trickle": f"timeout after {float(TIMEOUT)}s",
                "not-http": "bad HTTP response (connection closed or not HTTP)",
            }
            assert all(s.sample is None and not s.ok for n, s in got.items() if n in reasons)
    finally:
        await src.close()
    assert servers.accept_headers and set(servers.accept_headers) == {"text/plain;version=0.0.4"}
    # Keep-alive: both polls of the good replica came over one connection.
    assert len(servers.peers["/good/metrics"]) == 2
    assert len(set(servers.peers["/good/metrics"])) == 1


async def test_a_poll_times_out_the_hanging_replicas_with_one_deadline_timer_not_one_per_scrape(servers):
    # an asyncio.timeout per scrape (an object, a timer handle on the loop's heap, cancelled)
    # was ~2% of a 256-replica --json process's CPU: the fetches share one timer
    targets = [Target(f"good-{i}", servers.url("/good/metrics")) for i in range(24)]
    targets += [Target(f"hang-{i}", servers.url("/hang")) for i in range(2)]
    targets.append(Target("trickle", servers.url("/trickle")))
    src = DirectSource(targets, timeout=TIMEOUT, max_bytes=MAX_BYTES)
    loop = asyncio.get_running_loop()
    deadline_timers = []
    call_at = loop.call_at

    def counting_call_at(when, callback, *args, **kwargs):
        owner = getattr(callback, "__self__", None)
        if isinstance(owner, (asyncio.Timeout, DirectSource)):
            deadline_timers.append(callback)
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counting_call_at  # type: ignore[method-assign]
    await src.start()
    try:
        for _ in range(2):
            deadline_timers.clear()
            t0 = time.perf_counter()
            got = by_name(await src.poll())
            elapsed = time.perf_counter() - t0
            assert elapsed < TIMEOUT + 0.5, f"poll took {elapsed:.2f}s with a {TIMEOUT}s timeout"
            assert all(got[f"good-{i}"].ok for i in range(24))
            for name in ("hang-0", "hang-1", "trickle"):
                assert got[name].error == f"timeout after {float(TIMEOUT)}s", (name, got[name].error)
            assert len(deadline_timers) <= 3, f"{len(deadline_timers)} deadline timers for {len(targets)} scrapes"
    finally:
        del loop.call_at
        await src.close()


async def test_gpu_page_joined_by_pod_and_its_failure_does_not_fail_the_replica(servers):
    src = DirectSource(
        [
            Target("a", servers.url("/good/metrics"), gpu_url=servers.url("/dcgm"), gpu_pod="vllm-0"),
            Target("b", servers.url("/good2/metrics"), gpu_url=servers.url("/500")),
            Target("c", servers.url("/sglang"), gpu_url=servers.url("/hang")),
        ],
        timeout=TIMEOUT,
    )
    try:
        t0 = time.perf_counter()
        got = by_name(await src.poll())
        assert time.perf_counter() - t0 < TIMEOUT + 0.5
    finally:
        await src.close()
    a = got["a"]
    assert a.ok and a.gpu is not None
    assert [d.uuid for d in a.gpu.devices] == ["GPU-a"]
    assert a.gpu.memory_pct == pytest.approx(87.5)
    assert a.gpu.compute_pct == 97.0
    b = got["b"]
    assert b.ok and b.gpu is None and b.error is None
    assert got["c"].ok and got["c"].gpu is None  # an SGLang page; its GPU endpoint hangs: no GPU, no failure


async def test_set_targets_adds_and_removes_at_run_time(servers):
    src = DirectSource([Target("one", servers.url("/good/metrics"))], timeout=TIMEOUT)
    try:
        assert [s.replica for s in await src.poll()] == ["one"]
        old_client = src._clients["one"]  # white-box: the removed target's client must be closed
        src.set_targets([Target("two", servers.url("/good2/metrics")), Target("three", servers.url("/500"))])
        got = by_name(await src.poll())
        assert set(got) == {"two", "three"}
        assert got["two"].ok and got["three"].error == "HTTP 500: boom"
        assert old_client.is_closed
        assert src.description == "direct: 2 endpoints"
    finally:
        await src.close()
    assert all(c.is_closed for c in (old_client,))


async def test_a_paced_poll_publishes_on_time_and_collects_the_slow_answer_later(servers):
    """Issue 10 defect 4: a poll waits for answers only `publish_s`; a replica with no answer by
    then is `pending` (its last value stale) and is never asked twice while it is."""
    src = DirectSource([Target("good", servers.url("/good/metrics")), Target("hang", servers.url("/hang"))],
                       timeout=2.0, clock=time.time)
    src.pace(1.0)
    assert src.publish_s == pytest.approx(0.08) and src.first_publish_s == 1.0
    try:
        polls = []
        for _ in range(4):
            t0 = time.perf_counter()
            got = by_name(await src.poll())
            polls.append((time.perf_counter() - t0, got, src.pending))
        first, *later = polls
        assert first[0] < 1.0 + 0.3 and set(first[1]) == {"good"}  # the first poll waits up to the interval
        for elapsed, got, pending in later:
            assert elapsed < 1.0, elapsed  # its publish point (0.08 s), not the 2 s timeout (a busy machine is slower)
            assert set(got) == {"good"} and got["good"].ok
            assert set(pending) == {"hang"}
        assert len(servers.peers.get("/hang", [])) == 1  # one request in flight, not one per poll
        end = time.monotonic() + 30  # its timeout passes: a next poll collects the failure
        while "hang" not in got and time.monotonic() < end:
            await asyncio.sleep(0.1)
            got = by_name(await src.poll())
        assert got["hang"].error == "timeout after 2.0s"
    finally:
        await src.close()


async def test_a_monitor_marks_an_unanswered_replica_stale_with_its_age():
    """The Monitor side of defect 4: a replica its source lists as pending keeps its last values,
    shown stale; `--json` gives their age."""
    from tui.core.export import fleet_json
    from tui.core.model import EngineSample, Sample
    from tui.core.monitor import Monitor

    class Late:
        description = "late"
        pending: dict = {}
        polled_at = 100.0

        async def start(self):  # a Source (the Monitor starts it on the first refresh)
            pass

        async def poll(self):
            t = self.polled_at
            page = Sample({"": EngineSample({"running": 1.0}, {})})
            out = [Scrape(ts=t, replica="a", sample=page)]
            if "b" not in self.pending:
                out.append(Scrape(ts=t, replica="b", sample=page))
            return out

    src = Late()
    mon = Monitor(src)
    states = {r.name: r.state for r in (await mon.refresh()).replicas}
    assert states == {"a": "ok", "b": "ok"}
    src.pending, src.polled_at = {"b": 101.0}, 107.0
    fleet = fleet_json(await mon.refresh())
    rows = {r["name"]: r for r in fleet["replicas"]}
    assert rows["b"]["state"] == "stale" and rows["b"]["age_s"] == 7.0 and rows["b"]["running"] == 1.0
    assert rows["a"]["state"] == "ok" and "age_s" not in rows["a"]
    src.pending, src.polled_at = {}, 108.0
    assert {r.name: r.state for r in (await mon.refresh()).replicas} == {"a": "ok", "b": "ok"}


async def test_the_first_scrape_runs_in_a_thread_before_the_screen_exists(servers):
    """Issue 14 start-up: launch starts the first --url scrape while the TUI imports; its
    scrapes come back through take(), from a client of its own (the source's stays unopened)."""
    from tui.launch import first_scrape

    src = DirectSource([Target("good", servers.url("/good/metrics")), Target("error", servers.url("/500"))],
                       timeout=2.0)
    take = first_scrape(src)
    assert take is not None
    got = by_name(await asyncio.to_thread(take, 5.0))
    assert got["good"].ok and got["good"].sample.value("running") == 3.0
    assert got["error"].error == "HTTP 500: boom"
    assert src._clients == {} and src.polled_at is None  # the source itself is untouched
    assert first_scrape(DirectSource([])) is None


def test_duplicate_target_names_are_rejected():
    with pytest.raises(ValueError, match="two targets named"):
        DirectSource([Target("x", "http://127.0.0.1:1"), Target("x", "http://127.0.0.1:2")])


@pytest.mark.parametrize(
    "given, expected",
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000/metrics"),
        ("http://10.0.0.5:8000/", "http://10.0.0.5:8000/metrics"),
        ("https://vllm.example/custom/path?x=1", "https://vllm.example/custom/path?x=1"),
    ],
)
def test_normalize_url(given, expected):
    assert normalize_url(given) == expected


@pytest.mark.parametrize("bad", ["", "ftp://host/metrics", "http://", "http://host:notaport/"])
def test_normalize_url_rejects_unusable_urls(bad):
    with pytest.raises(ValueError):
        normalize_url(bad)


def test_human_bytes():
    assert human_bytes(4 * 1024 * 1024) == "4 MiB"
    assert human_bytes(64 * 1024) == "64 KiB"
    assert human_bytes(1000) == "1000 bytes"

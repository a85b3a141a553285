"""Every transport's failures reach the replica's row: https (httpx), a proxy from the
environment (httpx), and the lean plain-http client. `kvwatch --url ... --json` against the fault
servers of tests/faultserver.py on 127.0.0.1; a failed scrape is a down replica with its reason,
never a missing one or a frozen "ok"."""

from __future__ import annotations

import asyncio
import base64
import gzip
import re
from pathlib import Path

import pytest

from tests.faultserver import FaultServer, clean_env, free_port, run_cli, self_signed

RUNNING = 7.0  # what the healthy page says
ESC = re.compile(r"[\x1b\x07\x9b]")


def urls(*us: str) -> list[str]:
    return [a for u in us for a in ("--url", u)]


def by_url(line: dict, url: str) -> dict:
    name = url.split("://", 1)[1]
    return next(r for r in line["replicas"] if r["name"] == name)


def tls_env(tmp: str, **extra: str) -> dict[str, str]:
    """The child trusts the fault server's self-signed certificate."""
    return clean_env(tmp, SSL_CERT_FILE=self_signed()[0], **extra)


async def test_https_to_a_closed_port_is_down_with_its_reason(tmp_path: Path) -> None:
    async with FaultServer(lifetime=30) as fs:
        ok = await fs.add("healthy", tls=True)
        closed = f"https://127.0.0.1:{free_port()}"
        run = await run_cli(str(tmp_path), *urls(ok, closed), "--json", "--duration", "2", "--interval", "0.5",
                            env=tls_env(str(tmp_path)))
    assert run.rc == 0, run.err
    assert "Traceback" not in run.err
    last = run.json_lines()[-1]
    assert by_url(last, ok)["state"] == "ok" and by_url(last, ok)["running"] == RUNNING
    r = by_url(last, closed)
    assert r["state"] == "down" and "refused" in r["error"], r


async def test_https_without_trust_is_down_with_a_tls_reason(tmp_path: Path) -> None:
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("healthy", tls=True)
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "1.5", "--interval", "0.5")
    assert "Traceback" not in run.err
    r = by_url(run.json_lines()[-1], url)
    assert r["state"] == "down" and ("TLS" in r["error"] or "certificate" in r["error"]), r


@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
async def test_a_replica_that_dies_mid_run_is_not_left_ok(tmp_path: Path, tls: bool) -> None:
    """Its row says the failure (stale with its age and reason, then down), on either client."""
    async with FaultServer(lifetime=40) as fs:
        ok, dying = await fs.add("healthy", tls=tls), await fs.add("healthy", tls=tls)
        task = asyncio.create_task(run_cli(str(tmp_path), *urls(ok, dying), "--json", "--duration", "4",
                                           "--interval", "0.5", "--timeout", "1", env=tls_env(str(tmp_path))))
        asked = asyncio.create_task(fs.until_requests(dying, 2))
        await asyncio.wait({asked, task}, return_when=asyncio.FIRST_COMPLETED)  # (or the run ended early)
        asked.cancel()
        await fs.kill(dying)
        run = await task
    assert run.rc == 0, run.err
    lines = run.json_lines()
    assert any(by_url(line, dying)["state"] == "ok" for line in lines)  # it was up first
    r = by_url(lines[-1], dying)
    assert r["state"] in ("stale", "down") and r["error"], r
    assert r["state"] == "down" or r["age_s"] >= 1.0, r
    assert by_url(lines[-1], ok)["state"] == "ok"


async def test_a_dead_proxy_puts_the_replicas_down_with_the_proxy_named(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("healthy")
        for var in ("http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
            run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "1.5", "--interval", "0.5",
                                env=clean_env(str(tmp_path), **{var: dead}))
            assert "Traceback" not in run.err, var
            lines = run.json_lines()
            r = by_url(lines[-1], url) if var != "HTTPS_PROXY" else None
            if r is None:  # an https proxy is not used for a plain http URL: still read directly
                assert by_url(lines[-1], url)["state"] == "ok", lines[-1]
                continue
            assert r["state"] == "down" and "proxy" in r["error"] and "refused" in r["error"], (var, r)
        https_url = await fs.add("healthy", tls=True)
        run = await run_cli(str(tmp_path), *urls(https_url), "--json", "--duration", "1.5", "--interval", "0.5",
                            env=tls_env(str(tmp_path), HTTPS_PROXY=dead))
    r = by_url(run.json_lines()[-1], https_url)
    assert r["state"] == "down" and "proxy" in r["error"], r


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_url_credentials_are_sent_as_basic_auth_and_never_shown(tmp_path: Path, tls: bool) -> None:
    secret = "pw-S3CRET-91c"
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("healthy", tls=tls)
        scheme, hostport = url.split("://", 1)
        with_creds = f"{scheme}://ops%40corp:{secret}@{hostport}"
        rec = tmp_path / "rec.jsonl"
        run = await run_cli(str(tmp_path), *urls(with_creds), "--json", "--duration", "1.5", "--interval", "0.5",
                            "--record", str(rec), env=tls_env(str(tmp_path)))
        reqs = fs.requests(url)
    assert run.rc == 0, run.err
    assert reqs, "no request reached the server"
    expected = "Basic " + base64.b64encode(f"ops@corp:{secret}".encode()).decode()
    assert all(r.headers.get("authorization") == expected for r in reqs), reqs[0].headers
    assert all(r.headers.get("host") == hostport for r in reqs), reqs[0].headers
    r = run.json_lines()[-1]["replicas"][0]
    assert r["name"] == hostport and r["state"] == "ok", r
    assert secret not in run.out and secret not in run.err and "ops" not in run.out
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert rec in written
    for p in written:
        data = p.read_bytes()
        if p.suffix == ".gz":
            data = gzip.decompress(data)
        assert secret.encode() not in data, p


async def test_a_bad_url_with_credentials_is_refused_without_showing_them(tmp_path: Path) -> None:
    secret = "pw-S3CRET-7ab"
    for bad in (f"http://u:{secret}@127.0.0.1:99999", f"ftp://u:{secret}@127.0.0.1:80"):
        run = await run_cli(str(tmp_path), "--url", bad, "--json", "--duration", "1")
        assert run.rc == 2, (bad, run.err)
        assert secret not in run.err and secret not in run.out, run.err


@pytest.mark.parametrize("mode", ["gzip_truncated", "close_cut", "short_length"])
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_a_truncated_page_is_a_failed_scrape(tmp_path: Path, mode: str, tls: bool) -> None:
    """A page cut short (gzip without its end, a close-delimited body cut mid-line, fewer bytes
    than Content-Length) is never read as the whole page."""
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add(mode, tls=tls)
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "1.5", "--interval", "0.5",
                            env=tls_env(str(tmp_path)))
        assert fs.requests(url)
    assert "Traceback" not in run.err
    for line in run.json_lines():
        r = by_url(line, url)
        assert r["state"] == "down" and "truncated" in r["error"], r
        assert r["running"] is None and r["kv_usage"] is None, r


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_gzip_in_a_huge_chunk_stops_at_the_body_cap(tmp_path: Path, tls: bool) -> None:
    async with FaultServer(lifetime=60) as fs:
        ok, bad = await fs.add("healthy", tls=tls), await fs.add("chunked_gzip_huge", tls=tls)
        run = await run_cli(str(tmp_path), *urls(ok, bad), "--json", "--duration", "3", "--interval", "1",
                            "--timeout", "2", timeout=60, env=tls_env(str(tmp_path)))
    assert run.rc == 0, run.err
    last = run.json_lines()[-1]
    r = by_url(last, bad)
    assert r["state"] == "down" and "over 4 MiB" in r["error"], r
    assert by_url(last, ok)["state"] == "ok"
    assert 0 < run.peak_rss_mb < 250, run.peak_rss_mb


async def test_429_with_retry_after_is_said_and_honoured(tmp_path: Path) -> None:
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("rate_limited", retry_after=2)
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "3.5", "--interval", "0.5")
        reqs = fs.requests(url)
    assert run.rc == 0, run.err
    lines = run.json_lines()
    first = by_url(lines[0], url)
    assert "429" in first["error"] and "retry" in first["error"].lower(), first
    assert len(reqs) >= 2, reqs  # asked again after the wait, and read
    assert reqs[1].at - reqs[0].at >= 1.9, [r.at for r in reqs]  # not before Retry-After
    assert by_url(lines[-1], url)["state"] == "ok"


@pytest.mark.parametrize(("mode", "reason"), [("continue_first", None), ("long_first_line", None),
                                              ("after_eof", None), ("protobuf", "protobuf")])
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_page_format_edges(tmp_path: Path, mode: str, reason: str | None, tls: bool) -> None:
    """100 Continue before the answer, a first sample line over 16 KiB and samples after `# EOF`
    read as the page says; a protobuf answer is named as such."""
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add(mode, tls=tls)
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "1.5", "--interval", "0.5",
                            env=tls_env(str(tmp_path)))
    assert run.rc in (0, 3), run.err
    r = by_url(run.json_lines()[-1], url)
    if reason is None:
        assert r["state"] == "ok" and r["running"] == RUNNING, r
    else:
        assert r["state"] == "down" and reason in r["error"], r


@pytest.mark.parametrize("mode", ["engine_flip", "counter_stepback"])
async def test_counters_are_not_mixed_or_reset_by_a_step_back(tmp_path: Path, mode: str) -> None:
    """A page that alternates vLLM / SGLang never subtracts one engine's counter from the
    other's; a counter that steps back by one is not a restart (both read as hundreds to
    millions of preemptions a second before)."""
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add(mode)
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "3", "--interval", "0.25")
        assert len(fs.requests(url)) >= 4
    assert run.rc == 0, run.err
    rows = [by_url(line, url) for line in run.json_lines()]
    rates = [r["preemptions_per_s"] for r in rows if r["preemptions_per_s"] is not None]
    assert max(rates, default=0.0) < 5, rates
    assert rates or mode == "engine_flip"  # a rate across two engines is none at all
    assert all(r["verdict"] != "kv-pressure" for r in rows), [r["verdict"] for r in rows]


async def test_values_far_out_of_range_are_marked_invalid(tmp_path: Path) -> None:
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("out_of_range")
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "1.5", "--interval", "0.5")
    assert run.rc == 0, run.err
    r = by_url(run.json_lines()[-1], url)
    assert r["kv_usage"] is None and r["running"] is None, r
    assert "kv_usage" in r["invalid"] and "running" in r["invalid"], r["invalid"]
    assert "1e+300" in r["invalid"]["kv_usage"] and "-5" in r["invalid"]["running"], r["invalid"]
    assert r["verdict"] != "kv-pressure"


async def test_an_answer_within_the_refresh_is_never_shown_stale(tmp_path: Path) -> None:
    """A replica that answers in 0.3 s of a 1 s refresh (after the publish point, as every
    replica does when the loop runs late under load) shows its values one refresh late, never
    "stale"; one that stops answering is stale."""
    async with FaultServer(lifetime=40) as fs:
        slow = await fs.add("slow", delay=0.3)
        stuck = await fs.add("hang_after", ok=2)
        run = await run_cli(str(tmp_path), *urls(slow, stuck), "--json", "--duration", "5", "--interval", "1",
                            "--timeout", "10", timeout=40)
    assert run.rc == 0, run.err
    lines = run.json_lines()
    assert len(lines) >= 5
    states = [by_url(line, slow)["state"] for line in lines]
    assert states == ["ok"] * len(states), states
    assert by_url(lines[-1], stuck)["state"] == "stale"


async def test_more_replicas_than_the_soft_open_files_limit(tmp_path: Path) -> None:
    """`ulimit -n 1024` (a common default) and 1100 replicas: kvwatch raises its soft limit
    toward the hard one at start, so no healthy replica is down with "Too many open files"."""
    n = 1100
    async with FaultServer(lifetime=90) as fs:
        base = await fs.add("small")
        targets = [f"{base}/r{i}/metrics" for i in range(n)]
        run = await run_cli(str(tmp_path), *urls(*targets), "--json", "--duration", "4", "--interval", "2",
                            "--timeout", "5", timeout=90, nofile=1024)
    assert run.rc == 0, run.err[-2000:]
    last = run.json_lines()[-1]["replicas"]
    assert len(last) == n
    failed = [r for r in last if r["error"]]  # on a loaded machine some may not have answered yet: no error
    assert not failed, (len(failed), failed[0]["error"])
    assert sum(r["state"] == "ok" for r in last) > n // 2
    assert "open files" not in run.out.lower()


async def test_a_hard_open_files_limit_too_low_is_said_with_the_number_needed(tmp_path: Path) -> None:
    async with FaultServer(lifetime=60) as fs:
        base = await fs.add("small")
        run = await run_cli(str(tmp_path), *urls(*(f"{base}/r{i}/metrics" for i in range(300))), "--json",
                            "--duration", "1", "--interval", "1", timeout=60, nofile=(256, 256))
    assert "Traceback" not in run.err
    assert "ulimit -n 428" in run.err and "300 connections" in run.err, run.err[-1000:]


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_through_a_live_proxy_faults_keep_their_reasons_and_nothing_raw_shows(tmp_path: Path, tls: bool) -> None:
    """The proxied path (httpx, CONNECT for https): a healthy page reads, an escape-laden page
    shows nothing raw, a truncated page is truncated, credentials are Basic auth and not shown."""
    secret = "pw-PROXY-5d1"
    async with FaultServer(lifetime=60) as fs:
        proxy = await fs.add_proxy()
        ok, esc, cut = [await fs.add(m, tls=tls) for m in ("healthy", "escapes", "gzip_truncated")]
        scheme, hostport = ok.split("://", 1)
        with_creds = f"{scheme}://u:{secret}@{hostport}"
        var = "HTTPS_PROXY" if tls else "http_proxy"
        run = await run_cli(str(tmp_path), *urls(with_creds, esc, cut), "--json", "--duration", "1.5",
                            "--interval", "0.5", env=tls_env(str(tmp_path), **{var: proxy}))
        assert fs.proxied, "the proxy was not used"
        seen = fs.requests(ok)
    assert run.rc == 0, run.err
    last = run.json_lines()[-1]
    assert by_url(last, ok)["state"] == "ok" and by_url(last, esc)["state"] == "ok"
    assert "truncated" in by_url(last, cut)["error"]
    assert seen and seen[0].headers.get("authorization", "").startswith("Basic ")
    assert not ESC.search(run.out) and not ESC.search(run.err)
    assert secret not in run.out and secret not in run.err

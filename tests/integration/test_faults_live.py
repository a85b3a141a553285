"""Issue 10, live ingestion: `kvwatch --url ... --json` (and `--prometheus`) against misbehaving
endpoints from tests/faultserver.py. A fault on one replica must stay on that replica: the healthy
ones keep their values, verdicts and refresh schedule, and nothing raw reaches the output."""

from __future__ import annotations

from itertools import pairwise
import asyncio
import json
import re
from pathlib import Path

import pytest

from tests.faultserver import FaultServer, clean_env, run_cli

ESC = re.compile(r"[\x1b\x07\x9b]")
RUNNING, KV = 7.0, 0.42  # what the healthy page says (tests/faultserver.healthy_page)


def urls(*us: str) -> list[str]:
    return [a for u in us for a in ("--url", u)]


def by_url(line: dict, url: str) -> dict:
    """The replica of a --url target in one JSON line (named host:port)."""
    name = url.split("://", 1)[1]
    return next(r for r in line["replicas"] if r["name"] == name)


async def test_inf_values_stay_on_their_replica(tmp_path: Path) -> None:
    async with FaultServer(lifetime=30) as fs:
        ok1, ok2, bad = await fs.add("healthy"), await fs.add("healthy"), await fs.add("nan_inf")
        run = await run_cli(str(tmp_path), *urls(ok1, ok2, bad), "--json", "--duration", "3", "--interval", "0.5")
    assert run.rc == 0, run.err
    lines = run.json_lines()
    assert len(lines) >= 4
    assert [line.get("error") for line in lines] == [None] * len(lines)  # never a fleet error
    for line in lines:
        assert len(line["replicas"]) == 3
        for u in (ok1, ok2):
            r = by_url(line, u)
            assert (r["running"], r["kv_usage"], r["state"]) == (RUNNING, KV, "ok")
        b = by_url(line, bad)
        assert b["running"] is None  # +Inf is not a request count
        said = json.dumps(b).lower()
        assert "inf" in said or "invalid" in said, b  # marked invalid, with the reason
    assert by_url(lines[-1], ok1)["verdict"] == by_url(lines[-1], ok2)["verdict"] != "unknown"


async def test_misbehaving_endpoints_do_not_touch_the_healthy_one(tmp_path: Path) -> None:
    """Faults that already hold (issue 10's preamble): each bad replica gets a reason, the healthy
    one keeps its values on every line, and no escape sequence reaches stdout or stderr."""
    modes = ("reset", "http500", "redirect_loop", "html", "gzip_bomb", "huge", "invalid_utf8", "escapes",
             "flapping", "counter_reset")
    async with FaultServer(lifetime=40) as fs:
        ok = await fs.add("healthy")
        bad = {m: await fs.add(m) for m in modes}
        run = await run_cli(str(tmp_path), *urls(ok, *bad.values()), "--json", "--duration", "4",
                            "--interval", "1", "--timeout", "3")
    assert run.rc == 0, run.err
    lines = run.json_lines()
    assert len(lines) >= 4
    times = [t for t, _ in run.lines]
    gaps = [b - a for a, b in pairwise(times[1:])]
    assert all(0.75 <= g <= 1.25 for g in gaps), gaps  # on schedule (loose: the 50 MB body and the bomb cost CPU)
    for line in lines:
        assert "error" not in line
        r = by_url(line, ok)
        assert (r["running"], r["kv_usage"], r["state"]) == (RUNNING, KV, "ok")
    last = lines[-1]
    for m in ("reset", "http500", "redirect_loop", "html", "gzip_bomb", "huge"):
        r = by_url(last, bad[m])
        assert r["state"] != "ok" and r["error"], (m, r)
    assert not ESC.search(run.out) and not ESC.search(run.err)
    assert peak_ok(run.peak_rss_mb, 400), run.peak_rss_mb


def peak_ok(mb: float, limit: float) -> bool:
    return 0 < mb < limit


async def test_hanging_replica_does_not_delay_the_refresh(tmp_path: Path) -> None:
    async with FaultServer(lifetime=40) as fs:
        ok1, ok2 = await fs.add("healthy"), await fs.add("healthy")
        slow = await fs.add("hang_after", ok=2)  # answers twice, then hangs: stale, with a last value
        run = await run_cli(str(tmp_path), *urls(ok1, ok2, slow), "--json", "--duration", "12", "--interval", "1",
                            "--timeout", "10", timeout=40)
        inflight = len(fs.requests(slow))
    assert run.rc == 0, run.err
    times = [t for t, _ in run.lines]
    gaps = [b - a for a, b in pairwise(times[1:])]  # skip the start-up refresh
    assert len(times) >= 11, times
    assert all(0.9 <= g <= 1.1 for g in gaps), gaps
    lines = run.json_lines()
    for line in lines:
        for u in (ok1, ok2):
            assert by_url(line, u)["state"] == "ok"
    r = by_url(lines[-1], slow)
    assert r["state"] == "stale", r
    ages = [v for k, v in r.items() if (k == "age" or k.endswith("age_s")) and isinstance(v, (int, float))]
    assert ages and 5 <= max(ages) <= 15, r  # its last value's age, in seconds
    assert inflight <= 2 + 2, inflight  # never more than one request in flight (10 s timeout, 12 s run)


@pytest.mark.parametrize("fail", ["500", "redirect", "refuse"])
async def test_prometheus_failing_at_start_is_retried(tmp_path: Path, fail: str) -> None:
    async with FaultServer(lifetime=30) as fs:
        # refused until kvwatch has said so (a time-bound refusal was over before a slow start)
        opts = {"refuse": True, "after": 0.0} if fail == "refuse" else {"fail": fail, "fails": 2}
        url = await fs.add("prometheus", **opts)
        listening: list[asyncio.Task] = []

        def on_line(line: str) -> None:
            if fail == "refuse" and '"error"' in line and not listening:
                listening.append(asyncio.ensure_future(fs.listen(url)))

        run = await run_cli(str(tmp_path), "--prometheus", url, "--json", "--duration", "5", "--interval", "0.5",
                            timeout=30, on_line=on_line)
    # recovered, but this Prometheus lists no replica: no endpoint was read, exit 3 (README)
    assert run.rc == 3, run.err
    assert "Traceback" not in run.err
    lines = run.json_lines()
    errors = [i for i, line in enumerate(lines) if "error" in line]
    assert errors and errors[0] == 0  # the failure is said, as JSON
    assert all("Traceback" not in lines[i]["error"] for i in errors)
    assert "error" not in lines[-1] and lines[-1]["replicas"] == []  # recovered by itself
    assert max(errors) < len(lines) - 2


async def test_high_cardinality_engines_keep_memory_bounded(tmp_path: Path) -> None:
    async with FaultServer(lifetime=40) as fs:
        url = await fs.add("engines", n=90_000)
        run = await run_cli(str(tmp_path), *urls(url), "--json", "--duration", "10", "--interval", "1",
                            "--timeout", "5", timeout=40)
    assert run.rc == 0, run.err
    lines = run.json_lines()
    assert len(lines) >= 6
    assert "error" not in lines[-1]
    r = lines[-1]["replicas"][0]
    assert r["state"] == "ok"
    grew = run.rss_at(9.0) - run.rss_at(3.0)  # ~33 MB a refresh before the bound: 200 MB here
    assert grew < 40, f"RSS grew {grew:.0f} MB in 6 refreshes; peak {run.peak_rss_mb:.0f} MB"
    assert run.peak_rss_mb < 600, f"peak RSS {run.peak_rss_mb:.0f} MB"


async def test_duplicate_series_take_the_last_value_and_warn(tmp_path: Path) -> None:
    async with FaultServer(lifetime=30) as fs:
        ok, dup = await fs.add("healthy"), await fs.add("duplicate")
        run = await run_cli(str(tmp_path), *urls(ok, dup), "--json", "--duration", "3", "--interval", "0.5")
    assert run.rc == 0, run.err
    lines = run.json_lines()
    r = by_url(lines[-1], dup)
    assert r["running"] == 50.0  # running 1 then 50: the last, as Prometheus does
    assert r["kv_usage"] == 0.30 and r["verdict"] != "kv-pressure"
    assert "duplicate" in json.dumps(r).lower(), r  # a warning for that replica
    assert by_url(lines[-1], ok)["running"] == RUNNING


async def test_bearer_token_with_a_newline_is_never_printed(tmp_path: Path) -> None:
    secret = "SECRET-B-7f3a9c"
    async with FaultServer(lifetime=40) as fs:
        url = await fs.add("prometheus", after=0.0)
        tok = tmp_path / "token"
        tok.write_text(f"tok-A\n{secret}\n")
        rec = tmp_path / "rec.jsonl"
        first = await run_cli(str(tmp_path), "--prometheus", url, "--prom-token-file", str(tok), "--json",
                              "--duration", "2", "--interval", "0.5", "--record", str(rec))
        env_run = await run_cli(str(tmp_path), "--prometheus", url, "--prom-token-env", "PT", "--json",
                                "--duration", "2", "--interval", "0.5",
                                env={**clean_env(str(tmp_path)), "PT": f"tok-A\n{secret}"})
        # a good token, rotated to a bad one while running
        tok.write_text("tok-A\n")
        asked = len(fs.requests(url))
        rotating = asyncio.create_task(run_cli(str(tmp_path), "--prometheus", url, "--prom-token-file", str(tok),
                                               "--json", "--duration", "4", "--interval", "0.5"))
        await asyncio.wait_for(fs.until_requests(url, asked + 2), 60)  # running with the good token
        tok.write_text(f"tok-A\n{secret}\n")
        rotated = await rotating
    for run in (first, env_run, rotated):
        assert secret not in run.out and secret not in run.err
        assert "Traceback" not in run.err
    assert "token" in (first.err + first.out).lower()  # refused, with a message that names the token file
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != tok]
    for p in written:
        assert secret.encode() not in p.read_bytes(), p


async def test_no_fault_path_prints_the_bearer_token(tmp_path: Path) -> None:
    """Every Prometheus failure mode, with a valid token: no output stream and no file written
    (recording, state) holds the token."""
    secret = "tok-9d2e-SECRET-c41b"
    tok = tmp_path / "token"
    tok.write_text(secret + "\n")
    runs = []
    async with FaultServer(lifetime=40) as fs:
        # refused for the whole run (a time-bound refusal could end before a slow start)
        for i, opts in enumerate(({"fail": "500", "fails": 1}, {"fail": "redirect", "fails": 1},
                                  {"refuse": True, "after": 0.0})):
            url = await fs.add("prometheus", **opts)
            runs.append(await run_cli(str(tmp_path), "--prometheus", url, "--prom-token-file", str(tok), "--json",
                                      "--duration", "2.5", "--interval", "0.5", "--record", str(tmp_path / f"r{i}.jsonl")))
        reqs = [r for ep in fs.endpoints for r in fs.requests(ep.url)]
    assert any(secret in " ".join(r.headers.values()) for r in reqs)  # the token was sent
    for run in runs:
        assert any("error" in line for line in run.json_lines()), run.out  # a failure path was taken
        assert secret not in run.out and secret not in run.err
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != tok]
    assert written  # the recordings at least
    for p in written:
        assert secret.encode() not in p.read_bytes(), p

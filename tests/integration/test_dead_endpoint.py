"""A replica whose last scrape failed is never reported healthy: `kvwatch --url ... --json`
against an endpoint that answers a few scrapes, then refuses connections (its server gone)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.faultserver import FaultServer, run_cli


def _replica(line: dict, url: str) -> dict:
    name = url.split("://", 1)[1]
    return next(r for r in line["replicas"] if r["name"] == name)


async def _kill_after(fs: FaultServer, url: str, n: int) -> None:
    """Close `url`'s listener once it has answered `n` scrapes: later ones are refused."""
    await fs.until_requests(url, n)
    next(e for e in fs.endpoints if e.url == url).server.close()


async def test_a_dead_endpoint_is_never_healthy(tmp_path: Path) -> None:
    async with FaultServer(lifetime=40) as fs:
        ok, dying = await fs.add("progressing"), await fs.add("progressing")
        killer = asyncio.create_task(_kill_after(fs, dying, 4))
        run = await run_cli(str(tmp_path), "--url", ok, "--url", dying, "--json", "--duration", "7",
                            "--interval", "0.5", "--timeout", "1")
        killer.cancel()
    assert run.rc == 0, run.err
    seen = [_replica(line, dying) for line in run.json_lines()]
    assert any(r["verdict"] == "healthy" for r in seen[:4])  # judged healthy while it answered
    failed = [r for r in seen if r["error"]]
    assert failed, seen[-1]
    stale = [r for r in failed if r["state"] == "stale"]
    assert stale, [r["state"] for r in failed]  # within the stale window: its last values, marked
    for r in failed:
        assert r["verdict"] != "healthy", r  # the last scrape failed: never healthy
    for r in stale:
        assert r["age_s"] is not None and r["age_s"] >= 0, r
    assert all(_replica(line, ok)["verdict"] == "healthy" for line in run.json_lines()[3:])

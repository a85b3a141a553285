"""An engine that answers /metrics with an error status says why in its body ("engine dead: CUDA
error"): that first line is the replica's reason, in `--json`'s error and in the table's REASON,
cut short and escaped (it comes from the network), and never carries a credential."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.faultserver import FaultServer, clean_env, run_cli, self_signed

from .test_faults_live import by_url, urls

ESC = re.compile(r"[\x1b\x07\x9b]")
SECRET = "hunter2-pass"
TOKEN = "tok-5ecret-abcdef"


def _error_of(run, url: str) -> str:
    r = by_url(run.json_lines()[-1], url)
    assert r["state"] != "ok", r
    return r["error"]


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_http_500_body_is_the_reason(tmp_path: Path, tls: bool) -> None:
    body = "engine dead: CUDA error: an illegal memory access\x1b[31m was encountered\nTraceback (most recent call last):\n"
    async with FaultServer(lifetime=30) as fs:
        dead = await fs.add("http500", body=body, tls=tls)
        chunked = await fs.add("http500", body="  \nEngineDeadError: background loop stopped\n", status=503,
                               chunked=True, tls=tls)
        ok = await fs.add("healthy", tls=tls)  # (a run with no readable endpoint exits 3)
        env = clean_env(str(tmp_path), SSL_CERT_FILE=self_signed()[0]) if tls else None
        run = await run_cli(str(tmp_path), *urls(ok, dead, chunked), "--json", "--duration", "1.5",
                            "--interval", "0.5", env=env)
    assert run.rc == 0, run.err
    err = _error_of(run, dead)
    assert err.startswith("HTTP 500: engine dead: CUDA error"), err
    assert "Traceback" not in err  # the first line only
    assert len(err) <= 140, err  # cut short
    assert not ESC.search(run.out), err  # escaped
    assert _error_of(run, chunked).startswith("HTTP 503: EngineDeadError: background loop stopped"), \
        _error_of(run, chunked)


async def test_http_error_body_never_shows_a_credential(tmp_path: Path) -> None:
    body = f"unauthorized: Authorization: Bearer {TOKEN} for http://admin:{SECRET}@127.0.0.1/metrics\n"
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("http500", body=body, status=401)
        ok = await fs.add("healthy")
        with_user = url.replace("http://", f"http://admin:{SECRET}@")
        run = await run_cli(str(tmp_path), "--url", ok, "--url", with_user, "--json", "--duration", "1.5", "--interval", "0.5")
    assert run.rc == 0, run.err
    assert SECRET not in run.out + run.err and TOKEN not in run.out + run.err, run.out[-2000:]
    err = next(r["error"] for r in run.json_lines()[-1]["replicas"] if r["error"])
    assert err.startswith("HTTP 401: unauthorized"), err


def test_reason_column_shows_the_http_body() -> None:
    """The REASON cell says what the engine said, not only its status (and a body that mentions
    a reset is still an HTTP answer, not a reset connection)."""
    from types import SimpleNamespace

    from tui.core.model import DOWN
    from widgets.fleet_table import short_reason

    view = SimpleNamespace(state="down", verdict=DOWN, error="HTTP 500: engine dead: CUDA error")
    assert short_reason(view).startswith("HTTP 500: engine dead"), short_reason(view)
    view = SimpleNamespace(state="down", verdict=DOWN, error="HTTP 500: connection reset by the engine")
    assert short_reason(view).startswith("HTTP 500"), short_reason(view)
    view = SimpleNamespace(state="down", verdict=DOWN, error="HTTP 500")
    assert short_reason(view) == "HTTP 500", short_reason(view)

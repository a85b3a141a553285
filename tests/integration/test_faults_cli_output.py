"""Where the output cannot go: `--json` to a closed stdout or to /dev/full, and `diagnose` with
stdout closed, fail with one line on stderr and a non-zero exit (never a traceback, never exit 0
having printed nothing); `diagnose -i a -i b` is a usage error, not a silent choice of b."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest

from tests.faultserver import ROOT, FaultServer, clean_env, healthy_page
from tests.integration.test_faults_offline import write_recording


async def sh(tmp: Path, argv: list[str], redirect: str) -> tuple[int, str]:
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "tui.cli", *argv]) + " " + redirect
    proc = await asyncio.create_subprocess_shell(cmd, cwd=ROOT, env=clean_env(str(tmp)),
                                                 stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full"])
async def test_json_to_a_closed_or_full_stdout_is_one_line_and_an_error(tmp_path: Path, redirect: str) -> None:
    async with FaultServer(lifetime=40) as fs:
        url = await fs.add("healthy")
        rc, err = await sh(tmp_path, ["--url", url, "--json", "--duration", "1", "--interval", "0.5"], redirect)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert rc not in (0, None), (rc, err)
    assert "standard output" in err, err


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full"])
async def test_diagnose_to_a_closed_or_full_stdout_fails(tmp_path: Path, redirect: str) -> None:
    rec = tmp_path / "r.jsonl"
    write_recording(rec, {"r": healthy_page()}, 3)
    for extra in ([], ["--json"]):
        rc, err = await sh(tmp_path, ["diagnose", str(rec), *extra], redirect)
        assert "Traceback" not in err and "Exception ignored" not in err, err
        assert rc != 0 and "standard output" in err, (extra, rc, err)


async def test_diagnose_input_given_twice_is_a_usage_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_recording(a, {"a": healthy_page()}, 3)
    write_recording(b, {"b": healthy_page()}, 3)
    rc, err = await sh(tmp_path, ["diagnose", "-i", str(a), "-i", str(b)], "> /dev/null")
    assert rc == 2 and "once" in err, (rc, err)

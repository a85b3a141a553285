"""The dashboard with stdin not a terminal: keys are read from the controlling terminal (`q`
quits at once), and with no terminal at all kvwatch refuses with a message instead of spinning."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from tests.faultserver import ROOT, ThreadedFaultServer, clean_env
from tests.ui.ptyrun import run_in_pty


def test_keys_come_from_the_terminal_when_stdin_is_dev_null(tmp_path: Path) -> None:
    with ThreadedFaultServer(lifetime=60) as fs:
        url = fs.add("healthy")
        code = ("import os, sys; fd = os.open(os.devnull, os.O_RDONLY); os.dup2(fd, 0); "
                f"from tui.cli import main; sys.exit(main(['--url', {url!r}]))")
        t0 = time.monotonic()
        run = run_in_pty(code, 100, 30, 5.0, env=clean_env(str(tmp_path)), quit_key=b"q")
        took = time.monotonic() - t0
    assert run.exit_status == 0, (run.exit_status, run.output[-600:])  # `q` was read: a clean exit
    assert took < 12, took


async def test_no_terminal_at_all_is_refused_with_a_message(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", "demo", cwd=ROOT, env=clean_env(str(tmp_path)),
        stdin=subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)  # no controlling terminal
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError("kvwatch kept running with no terminal to read keys from") from None
    assert proc.returncode == 2, (proc.returncode, err.decode()[-800:])
    assert b"not a terminal" in err and b"--json" in err

"""--record under stress: SIGTERM / SIGHUP close the .gz as Ctrl-C does (trailer written), a
symlink or an existing file that is not a kvwatch recording is refused (never appended to), and
a full disk (here: RLIMIT_FSIZE) is said at once in the --json frames."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import resource
import signal
import sys
from pathlib import Path

import pytest

from tests.faultserver import ROOT, FaultServer, ThreadedFaultServer, clean_env, run_cli
from tests.ui.ptyrun import run_in_pty


def hangup_as_a_terminal_gives_it() -> None:
    """In the child: SIGHUP's default action, whatever the suite was started under. kvwatch keeps
    an ignored SIGHUP ignored (`nohup kvwatch ...`), and `nohup bash .ci/test` hands that on."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


async def _start(tmp: Path, *argv: str, fsize: int | None = None) -> asyncio.subprocess.Process:
    def limit() -> None:
        hangup_as_a_terminal_gives_it()
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", *argv, cwd=ROOT, env=clean_env(str(tmp)), preexec_fn=limit,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=16 * 1024 * 1024)


def _records_so_far(path: Path) -> int:
    """Whole records in a gzip recording still being written (no trailer yet): what its
    flushes have put on disk so far."""
    import zlib

    try:
        data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(path.read_bytes())
    except (OSError, zlib.error):
        return 0
    return data.count(b"\n")


def _complete_gz(path: Path) -> list[dict]:
    """Every record; raises EOFError when the gzip stream has no end (no trailer)."""
    with gzip.open(path, "rt") as f:
        return [json.loads(x) for x in f.read().splitlines()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
async def test_json_mode_closes_the_recording_on_sigterm_and_sighup(tmp_path: Path, sig: int) -> None:
    rec = tmp_path / "rec.jsonl.gz"
    async with FaultServer(lifetime=40) as fs:
        url = await fs.add("healthy")
        proc = await _start(tmp_path, "--url", url, "--json", "--interval", "0.3", "--record", str(rec))
        for _ in range(3):  # three frames: three rounds recorded
            assert await asyncio.wait_for(proc.stdout.readline(), 20)
        proc.send_signal(sig)
        await asyncio.wait_for(proc.wait(), 20)
        err = (await proc.stderr.read()).decode()
    assert "Traceback" not in err, err
    records = _complete_gz(rec)
    assert len(records) >= 2 and all(r["replica"] for r in records)


def test_tui_closes_the_recording_on_sigterm(tmp_path: Path) -> None:
    rec = tmp_path / "tui.jsonl.gz"
    with ThreadedFaultServer(lifetime=60) as fs:
        url = fs.add("healthy")
        code = (f"import sys; from tui.cli import main; sys.exit(main(['--url', {url!r}, '--interval', '0.3', "
                f"'--record', {str(rec)!r}]))")
        env = clean_env(str(tmp_path))
        # until the recording holds a few rounds, then SIGTERM (as closing a tmux window does)
        run = run_in_pty(code, 100, 30, 6.0, env=env, quit_key=None)
    assert run.exit_status is not None
    records = _complete_gz(rec)
    assert len(records) >= 2


async def test_record_refuses_a_symlink_and_a_file_that_is_not_a_recording(tmp_path: Path) -> None:
    precious = tmp_path / "passwd"
    text = "root:x:0:0:root:/root:/bin/bash\n"
    precious.write_text(text)
    link = tmp_path / "rec.jsonl"
    link.symlink_to(precious)
    async with FaultServer(lifetime=40) as fs:
        url = await fs.add("healthy")
        for target in (link, precious):
            run = await run_cli(str(tmp_path), "--url", url, "--json", "--duration", "1", "--record", str(target))
            assert run.rc == 2, (target, run.err)
            assert "not a kvwatch recording" in run.err or "symbolic link" in run.err, run.err
            assert precious.read_text() == text  # untouched
        # a real recording is appended to, as before
        good = tmp_path / "good.jsonl"
        for _ in range(2):
            run = await run_cli(str(tmp_path), "--url", url, "--json", "--duration", "1", "--interval", "0.5",
                                "--record", str(good))
            assert run.rc == 0, run.err
    assert len({json.loads(x)["ts"] for x in good.read_text().splitlines()}) >= 3


async def test_a_full_disk_is_said_at_once_in_the_json_frames(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    async with FaultServer(lifetime=40) as fs:
        url = await fs.add("healthy")
        # the file may grow to 100 KB: the third or so page (42 KB each) does not fit
        proc = await _start(tmp_path, "--url", url, "--json", "--interval", "0.3", "--duration", "4",
                            "--record", str(rec), fsize=100_000)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    frames = [json.loads(x) for x in out.decode().splitlines()]
    stopped = [i for i, f in enumerate(frames) if f.get("recording_error")]
    assert stopped, frames[-1]
    assert stopped[0] <= 5 and all(i in stopped for i in range(stopped[0], len(frames)))
    assert "recording stopped" in frames[-1]["recording_error"] and str(rec) in frames[-1]["recording_error"]
    assert os.path.getsize(rec) <= 100_000
    assert "recording stopped" in err.decode()


def test_tui_flashes_a_recording_stopped_by_a_full_disk(tmp_path: Path) -> None:
    rec = tmp_path / "full.jsonl"
    with ThreadedFaultServer(lifetime=60) as fs:
        url = fs.add("healthy")
        code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (100000, 100000)); "
                f"from tui.cli import main; sys.exit(main(['--url', {url!r}, '--interval', '0.3', "
                f"'--record', {str(rec)!r}]))")
        run = run_in_pty(code, 160, 40, 6.0, env=clean_env(str(tmp_path)))
    # on the screen while it runs (before `q`), not only in the line printed at exit
    screen = run.output[: run.bytes_between(0.0, 6.0)].decode(errors="replace")
    assert "recording stopped" in screen, screen[-1500:]


def test_tui_closes_the_recording_when_its_terminal_goes_away(tmp_path: Path) -> None:
    """Closing the terminal (a tmux window, an SSH session) hangs the pty up: SIGHUP."""
    import pty
    import select
    import time

    rec = tmp_path / "hup.jsonl.gz"
    with ThreadedFaultServer(lifetime=60) as fs:
        url = fs.add("healthy")
        env = clean_env(str(tmp_path))
        pid, fd = pty.fork()
        if pid == 0:
            try:
                hangup_as_a_terminal_gives_it()
                os.chdir(ROOT)
                os.execve(sys.executable, [sys.executable, "-m", "tui.cli", "--url", url, "--interval", "0.3",
                                           "--record", str(rec)], env)
            finally:
                os._exit(127)
        deadline = time.monotonic() + 30
        screen = bytearray()
        try:
            # drain the screen until the fleet row is drawn and two rounds are recorded (one
            # real-size page's record alone can be 4 KB of gzip: a size was not a count)
            while time.monotonic() < deadline:
                if select.select([fd], [], [], 0.1)[0]:
                    screen += os.read(fd, 65536)
                if b"127.0.0.1" in screen and rec.exists() and _records_so_far(rec) >= 2:
                    break
        finally:
            os.close(fd)  # the terminal goes away
        end = time.monotonic() + 20
        while time.monotonic() < end:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("kvwatch kept running after its terminal went away")
    assert len(_complete_gz(rec)) >= 2

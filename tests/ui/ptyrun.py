"""Run kvwatch in a real pseudo-terminal and capture every byte it writes to it.

Used by the NO_COLOR test and by bench/bench_terminal_bytes.py. The child gets a pty of the
requested size as its controlling terminal (as under SSH, tmux or screen), so Textual's real
Linux driver runs, not the headless test driver.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SGR = re.compile(rb"\x1b\[([0-9;:]*)m")


@dataclass
class PtyRun:
    output: bytes = b""
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (seconds since start, bytes)
    exit_status: int | None = None

    def bytes_between(self, t0: float, t1: float) -> int:
        return sum(n for t, n in self.chunks if t0 <= t < t1)


def run_in_pty(code: str, cols: int, rows: int, seconds: float, env: dict[str, str] | None = None,
               keys: list[tuple[float, bytes]] = (), quit_key: bytes | None = b"q",
               until: tuple[bytes, ...] = ()) -> PtyRun:
    """Run `python -c code` in a cols x rows pty for `seconds`, typing `keys` at given times; then
    press `quit_key` (or send SIGTERM) and collect everything until the child exits. With `until`,
    stop as soon as every one of those byte strings has been written (the state the test waits
    for), `seconds` being only the deadline: a busy machine draws later, not differently."""
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = ROOT + os.pathsep + child_env.get("PYTHONPATH", "")
    pid, fd = pty.fork()
    if pid == 0:  # child
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-c", code], child_env)
        finally:
            os._exit(127)
    run = PtyRun()
    out = bytearray()
    start = time.monotonic()
    pending = sorted(keys)

    def pump(deadline: float, wait_for: tuple[bytes, ...] = ()) -> bool:
        """Read until `deadline` (monotonic) or all of `wait_for` is seen; False when the child closed the pty."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            r, _, _ = select.select([fd], [], [], min(left, 0.05))
            if pending and time.monotonic() - start >= pending[0][0]:
                os.write(fd, pending.pop(0)[1])
            if not r:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child is gone
                return False
            if not data:
                return False
            out.extend(data)
            run.chunks.append((time.monotonic() - start, len(data)))
            if wait_for and not pending and all(u in out for u in wait_for):
                return True  # the state waited for is on screen

    try:
        alive = pump(start + seconds, until)
        if alive:
            if quit_key:
                os.write(fd, quit_key)
            else:
                os.kill(pid, signal.SIGTERM)
            alive = pump(time.monotonic() + 10)
        if alive:
            os.kill(pid, signal.SIGKILL)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    run.output = bytes(out)
    run.exit_status = os.waitstatus_to_exitcode(status)
    return run


def colour_sgr(output: bytes) -> list[bytes]:
    """SGR sequences that set a colour (foreground/background: 30-38, 40-48, 90-97, 100-107)."""
    bad = []
    for m in SGR.finditer(output):
        params = re.split(rb"[;:]", m.group(1)) if m.group(1) else [b"0"]
        i = 0
        while i < len(params):
            p = int(params[i] or b"0")
            if 30 <= p <= 38 or 40 <= p <= 48 or 90 <= p <= 97 or 100 <= p <= 107:
                bad.append(m.group(0))
                break
            i += 1
    return bad


# The scripted fleet (tests/ui/scripted.py) as a child program: n replicas, a 1 s refresh.
SCRIPTED_APP = """
import sys
from tests.ui.scripted import ScriptedSource
from tui.app import KvwatchApp
from tui.core.monitor import Monitor
kinds = ["healthy", "pressure", "compute", "healthy", "fault", "healthy", "down", "healthy"]
n = {n}
profiles = {{f"vllm-{{i:02d}}": kinds[i % len(kinds)] for i in range(n)}}
app = KvwatchApp(Monitor(ScriptedSource(profiles, step=1.0)), {interval}, **{kw!r})
app.run()
"""


def scripted_app(n: int = 16, interval: float = 1.0, **kw) -> str:
    return SCRIPTED_APP.format(n=n, interval=interval, kw=kw)

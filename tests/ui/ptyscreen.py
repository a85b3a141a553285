"""An interactive pseudo-terminal session: kvwatch runs as a child in a real pty (Textual's Linux
driver), every byte it writes goes through a VT emulator (pyte), and the test waits for what the
screen shows before it types the next key, as a user at the keyboard does.

    with PtyScreen(code, cols=80, rows=24, env=env) as term:
        term.wait_for(lambda text: "kv-pressure" in text, timeout=60)
        term.press("enter")

`on_capture` sees every screen state the emulator reached after each read (the test's
invariants: what a user could have seen at any moment, not only at the checks). The terminal
answers Textual's query for synchronized output (mode 2026) as most terminals today do, so the
app brackets each frame; a read that ends inside a frame waits for the rest of it, as such a
terminal shows only whole frames (a frame half drawn is not what a user sees).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from typing import Callable

import pyte

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SYNC_QUERY = b"\x1b[?2026$p"  # DECRQM: is synchronized output supported?
SYNC_REPLY = b"\x1b[?2026;2$y"  # DECRPM: supported, currently reset
SYNC_START, SYNC_END = b"\x1b[?2026h", b"\x1b[?2026l"

KEYS = {
    "enter": b"\r", "escape": b"\x1b", "tab": b"\t", "ctrl+r": b"\x12",
    "f3": b"\x1bOR", "f8": b"\x1b[19~", "down": b"\x1b[B", "up": b"\x1b[A",
}


class PtyScreen:
    def __init__(self, code: str, cols: int, rows: int, env: dict[str, str],
                 on_capture: Callable[[list[str]], None] | None = None) -> None:
        self.code, self.cols, self.rows, self.env = code, cols, rows, dict(env)
        self.env["PYTHONPATH"] = ROOT + os.pathsep + self.env.get("PYTHONPATH", "")
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.on_capture = on_capture
        self.pid = -1
        self.fd = -1
        self.captures = 0
        self._held = b""  # bytes of a frame not yet ended (after its SYNC_START)
        self.recent: list[bytes] = []  # the last reads, raw: what a failed check was drawn from

    def __enter__(self) -> "PtyScreen":
        pid, fd = pty.fork()
        if pid == 0:  # child
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", self.rows, self.cols, 0, 0))
                os.chdir(ROOT)
                os.execve(sys.executable, [sys.executable, "-c", self.code], self.env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        return self

    def __exit__(self, *exc) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
            end = time.monotonic() + 10
            while time.monotonic() < end:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
                self._read(0.05)
            else:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        finally:
            os.close(self.fd)

    def lines(self) -> list[str]:
        return list(self.screen.display)

    def text(self) -> str:
        return "\n".join(self.lines())

    def _read(self, wait: float) -> bool:
        """Feed what the child wrote within `wait` s to the emulator; False when it is gone."""
        r, _, _ = select.select([self.fd], [], [], wait)
        if not r:
            return True
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return False
        if not data:
            return False
        self.recent = [*self.recent[-5:], data]
        if SYNC_QUERY in data:
            os.write(self.fd, SYNC_REPLY)
        data, self._held = self._held + data, b""
        start = data.rfind(SYNC_START)
        if start > data.rfind(SYNC_END):  # the last frame is not finished: show it when it is
            data, self._held = data[:start], data[start:]
        if data:
            self.stream.feed(data)
            self.captures += 1
            if self.on_capture is not None:
                self.on_capture(self.lines())
        return True

    def wait_for(self, cond: Callable[[str], object], timeout: float, what: str = "") -> object:
        """Read until cond(screen text) is truthy; AssertionError with the screen after `timeout`."""
        end = time.monotonic() + timeout
        while True:
            got = cond(self.text())
            if got:
                return got
            if time.monotonic() > end:
                raise AssertionError(f"not on screen within {timeout:.0f} s: {what}\n{self.text()}")
            if not self._read(0.05):
                raise AssertionError(f"kvwatch exited while waiting for: {what}\n{self.text()}")

    def press(self, *keys: str) -> None:
        for k in keys:
            os.write(self.fd, KEYS.get(k, k.encode()))
            self._read(0.02)

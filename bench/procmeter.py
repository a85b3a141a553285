"""Run a tool as its own process (in a pty, as a terminal user would, or headless with its
stdout piped) and read its whole-process CPU and RSS from /proc.

CPU counts the process and its descendants (threads are part of the process; exited children
through cutime/cstime), so a tool that forks helpers cannot hide their cost.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass, field

from bench.machine import rss_mib

_TICK = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="utf-8") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def tree_cpu_s(pid: int) -> float:
    total = 0.0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
    return total


def tree_rss_mib(pid: int) -> float:
    return sum(rss_mib(p) for p in tree(pid))


@dataclass
class Tool:
    """A running tool; `output` gathers what it wrote, `first_at` when a needle first appeared."""

    pid: int
    fd: int | None = None
    popen: subprocess.Popen | None = None
    started: float = 0.0
    output: bytearray = field(default_factory=bytearray)
    lines: int = 0
    keep_output: bool = False

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 5 s; returns the exit status."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            done, status = os.waitpid(self.pid, os.WNOHANG) if self.popen is None else (self.pid, self.popen.poll())
            if (self.popen is None and done) or (self.popen is not None and status is not None):
                return status
            time.sleep(0.05)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.popen is not None:
            return self.popen.wait()
        return os.waitpid(self.pid, 0)[1]


def _drain(tool: Tool, read) -> None:
    while True:
        try:
            data = read()
        except OSError:  # EIO: the pty's child is gone
            return
        if not data:
            return
        tool.lines += data.count(b"\n")
        if tool.keep_output:
            tool.output.extend(data)


def spawn_pty(argv: list[str], env: dict[str, str], cols: int = 200, rows: int = 50,
              keep_output: bool = False) -> Tool:
    """`argv` with a cols x rows pty as its controlling terminal; its output is read and dropped
    (or kept) by a thread, as a terminal would."""
    started = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    tool = Tool(pid=pid, fd=fd, started=started, keep_output=keep_output)
    threading.Thread(target=_drain, args=(tool, lambda: os.read(fd, 65536)), daemon=True).start()
    return tool


def spawn_piped(argv: list[str], env: dict[str, str], keep_output: bool = False) -> Tool:
    """`argv` headless: stdout piped and counted (one line per refresh for `--json`)."""
    started = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    tool = Tool(pid=p.pid, popen=p, started=started, keep_output=keep_output)
    threading.Thread(target=_drain, args=(tool, lambda: p.stdout.read1(65536)), daemon=True).start()
    return tool


@dataclass
class Window:
    cpu_pct: float  # % of one core over the window
    hz: float  # refreshes kept: /metrics requests per endpoint per second
    rss_mib: float  # after the window
    alive: bool
    t0: float = 0.0  # the window, time.monotonic()
    t1: float = 0.0


def measure(tool: Tool, fleet, warmup_s: float, window_s: float) -> Window:
    """CPU and kept refresh rate of `tool` over a steady window after `warmup_s`."""
    time.sleep(warmup_s)
    c0, r0, t0 = tree_cpu_s(tool.pid), fleet.metrics_requests(), time.monotonic()
    time.sleep(window_s)
    c1, r1, t1 = tree_cpu_s(tool.pid), fleet.metrics_requests(), time.monotonic()
    rss = tree_rss_mib(tool.pid)
    alive = os.path.exists(f"/proc/{tool.pid}") and rss > 0
    return Window(100.0 * (c1 - c0) / (t1 - t0), (r1 - r0) / fleet.n / (t1 - t0), rss, alive, t0, t1)

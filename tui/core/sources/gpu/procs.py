"""Which local process serves a port, and its descendants, read from /proc.

A server's GPUs are the ones whose running compute processes include the process listening on
its port or one of its children (vLLM and SGLang run their GPU workers as child processes of
the API server). The listening socket's inode comes from /proc/net/tcp{,6}; the process holding
it from /proc/PID/fd links ("socket:[INODE]"). Another user's processes may be unreadable:
that is an answer too ("not found"), never an exception. The /proc root is a parameter so
tests can hand in a small fake tree.
"""

from __future__ import annotations

import os
from pathlib import Path

_LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp


def listening_inodes(port: int, proc: Path = Path("/proc")) -> set[str]:
    """Inodes of sockets listening on `port` (any address, IPv4 and IPv6)."""
    out: set[str] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 10 or f[3] != _LISTEN:
                continue
            try:
                if int(f[1].rsplit(":", 1)[1], 16) == port:
                    out.add(f[9])
            except (IndexError, ValueError):
                continue
    return out


def _pids(proc: Path) -> list[int]:
    try:
        return [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []


def pid_listening(port: int, proc: Path = Path("/proc")) -> int | None:
    """The process holding a socket that listens on `port`; None when none can be seen."""
    inodes = listening_inodes(port, proc)
    if not inodes:
        return None
    want = {f"socket:[{i}]" for i in inodes}
    for pid in sorted(_pids(proc)):
        fd_dir = proc / str(pid) / "fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(fd_dir / fd) in want:
                    return pid
            except OSError:
                continue
    return None


def _ppid(proc: Path, pid: int) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "PID (comm) STATE PPID ...": comm may hold spaces and parentheses, so split after the last ")"
    rest = stat.rsplit(")", 1)[-1].split()
    try:
        return int(rest[1])
    except (IndexError, ValueError):
        return None


def with_descendants(pid: int, proc: Path = Path("/proc")) -> set[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for p in _pids(proc):
        parent = _ppid(proc, p)
        if parent is not None:
            children.setdefault(parent, []).append(p)
    out, todo = {pid}, [pid]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out

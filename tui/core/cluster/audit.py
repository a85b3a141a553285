"""Append-only audit log of cluster actions: one JSON object per line.

Default place: `$XDG_STATE_HOME/kvwatch/audit.jsonl` (`~/.local/state/kvwatch/audit.jsonl`).
Each line: time (and `data_ts`, the simulated clock, in the demo), the authenticated user (and where that name came from), context, action,
target, diff, patch, result. Credentials never reach it: callers pass names only, and the
patch is what was sent to the API server.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from pathlib import Path
from typing import Any

from ..textsafe import redact


def default_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "kvwatch" / "audit.jsonl"


class AuditLog:
    """Thread-safe JSON-lines appender. A write failure is kept in `last_error`, never raised:
    the action already happened and the dashboard must keep running. Before an action the gate
    asks `unwritable()`: a log that cannot be opened stops the change unless `unaudited_ok`
    (the user's explicit --allow-unaudited)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, unaudited_ok: bool = False) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.unaudited_ok = unaudited_ok
        self.last_error: str | None = None
        self._lock = threading.Lock()

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def unwritable(self) -> str | None:
        """Why no line can be appended now (the file cannot be created or opened), or None."""
        with self._lock:
            try:
                os.close(self._open())
            except OSError as e:
                return f"audit log {self.path}: {e.strerror or e}"
        return None

    def record(
        self,
        *,
        user: str,
        context: str,
        action: str,
        target: str,
        diff: str = "",
        ok: bool,
        message: str,
        status: int | None = None,
        patch: Any = None,
        user_source: str | None = None,
        kubeconfig_user: str | None = None,
        data_ts: float | None = None,
    ) -> dict[str, Any]:
        entry = {
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            # the metrics' clock when it is not the wall clock (the demo's simulated time), so a
            # report joins the action onto the recording's timeline
            **({"data_ts": data_ts} if data_ts is not None else {}),
            "user": user,
            **({"user_source": user_source} if user_source else {}),
            **({"kubeconfig_user": kubeconfig_user} if kubeconfig_user is not None else {}),
            "context": context,
            "action": action,
            "target": target,
            "diff": diff,
            "patch": patch,
            "result": {"ok": ok, "message": message, "status": status},
        }
        line = redact(json.dumps(entry, separators=(",", ":"), default=str)) + "\n"  # e.g. an API error quoting headers
        with self._lock:
            try:
                fd = self._open()
                with os.fdopen(fd, "a", encoding="utf-8") as f:
                    f.write(line)
                self.last_error = None
            except OSError as e:
                self.last_error = f"audit log {self.path}: {e.strerror or e}"
        return entry

    def read(self) -> list[dict[str, Any]]:
        """All entries (for tests and an audit view); unreadable lines are skipped."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return []
        out = []
        for ln in text.splitlines():
            try:
                out.append(json.loads(ln))
            except ValueError:
                continue
        return out

"""`R` / `:report`: write the postmortem report of the running session, from what it records.

The report is built from the file the recorder writes (`--record FILE`) and the audit log the
session's cluster writes to, in a thread (a long recording takes seconds to replay), and lands
beside the recording as `<recording>-report-<UTC time>.html`; a toast says where.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from typing import Any

NOT_RECORDING = ("not recording: start kvwatch with --record FILE to report this session "
                 "(or run `kvwatch report FILE` on an earlier recording)")


def recording_path(monitor: Any) -> str | None:
    """The file the session records to, when it does (the Monitor's `on_scrapes` is the recorder's
    `write`); a recorder stopped at its cap or by a full disk still left a file to report."""
    rec = getattr(getattr(monitor, "on_scrapes", None), "__self__", None)
    path = getattr(rec, "path", None)
    return path if isinstance(path, str) else None


def report_path(recording: str, now: float | None = None) -> str:
    stamp = dt.datetime.fromtimestamp(now if now is not None else dt.datetime.now().timestamp(),
                                      dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = recording[:-3] if recording.endswith(".gz") else recording
    base = base[:-6] if base.endswith(".jsonl") else base
    return f"{base}-report-{stamp}.html"


def _write(recording: str, audit: str | None, out: str, monitor: Any) -> str:
    from tui.core.report import build_report, write_report

    report = build_report(recording, audit if audit and os.path.exists(audit) else None,
                          thresholds=monitor.thresholds, windows=monitor.windows)
    write_report(report, out)
    return out


async def write_session_report(app: Any) -> None:
    """Write the report and say where (or why not), as a toast."""
    recording = recording_path(app.monitor)
    if recording is None:
        app.notify(NOT_RECORDING, severity="warning", timeout=6, markup=False)
        return
    cluster = app.mitigation_gate.cluster()
    audit = getattr(getattr(cluster, "audit", None), "path", None)
    out = report_path(recording)
    app.notify(f"writing the report of {recording} ...", timeout=3, markup=False)
    try:
        path = await asyncio.to_thread(_write, recording, str(audit) if audit else None, out, app.monitor)
    except (OSError, ValueError) as e:
        app.notify(f"report failed: {getattr(e, 'strerror', None) or e}", severity="error", timeout=8, markup=False)
        return
    app.notify(f"report written: {path}", timeout=10, markup=False)

"""`--json` mode: the same Monitor as the screen, one JSON object per refresh on stdout."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TextIO

from .export import fleet_json
from .monitor import Monitor
from .textsafe import redact


async def run_json(monitor: Monitor, interval: float, duration: float | None, out: TextIO = sys.stdout,
                   backfill_s: float | None = None) -> int:
    """One line per refresh until `duration` ends. A failing source (at start too: Prometheus
    down, redirecting, answering 500) is a line `{"error": ...}` and is retried, with backoff.
    Exit status: 0 when the source answered at least once, 1 when it never did."""
    src = monitor.source
    end = None if duration is None else time.monotonic() + duration
    try:
        try:
            await monitor.start(backfill_s)
        except Exception as e:  # said on the first line; each refresh retries the start
            _error_line(out, e)
            if end is not None and time.monotonic() + interval > end + 0.01:
                return 1
            await asyncio.sleep(interval)
        while True:
            t0 = time.monotonic()
            try:
                state = await monitor.refresh()
            except Exception as e:  # whole-source failure: report it as data and keep trying
                _error_line(out, e)
            else:
                out.write(json.dumps(fleet_json(state)) + "\n")
                out.flush()
            if end is not None and time.monotonic() + interval > end + 0.01:
                break
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - t0)))
    finally:
        await src.close()
    return 0 if monitor.ok_refreshes else 1


def _error_line(out: TextIO, e: BaseException) -> None:
    out.write(json.dumps({"ts": time.time(), "error": redact(f"{type(e).__name__}: {e}"), "replicas": []}) + "\n")
    out.flush()

"""`--json` mode: the same Monitor as the screen, one JSON object per refresh on stdout."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TextIO

from .export import fleet_json
from .model import OK
from .monitor import Monitor

# `--json` read no endpoint during the whole run: scripts must not take silence for health
NO_ENDPOINT_EXIT = 3


async def run_json(monitor: Monitor, interval: float, duration: float | None, out: TextIO = sys.stdout,
                   backfill_s: float | None = None) -> int:
    src = monitor.source
    await monitor.start(backfill_s)
    end = None if duration is None else time.monotonic() + duration
    read_any = False
    try:
        while True:
            t0 = time.monotonic()
            try:
                state = await monitor.refresh()
            except Exception as e:  # whole-source failure: report it as data and keep trying
                out.write(json.dumps({"ts": time.time(), "error": f"{type(e).__name__}: {e}", "replicas": []}) + "\n")
            else:
                read_any = read_any or any(r.state == OK for r in state.replicas)
                out.write(json.dumps(fleet_json(state)) + "\n")
            out.flush()
            if end is not None and time.monotonic() + interval > end + 0.01:
                break
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - t0)))
    finally:
        await src.close()
    if not read_any:
        print(f"kvwatch: no endpoint could be read during the run (exit {NO_ENDPOINT_EXIT})", file=sys.stderr)
        return NO_ENDPOINT_EXIT
    return 0

"""`--json` mode: the same Monitor as the screen, one JSON object per refresh on stdout."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Awaitable, Callable, TextIO, TypeVar

from .export import fleet_json, replica_json
from .model import OK, FleetState
from .monitor import Monitor
from .perf import FrozenRefreshes
from .textsafe import redact

_T = TypeVar("_T")

# `--json` read no endpoint during the whole run: scripts must not take silence for health
NO_ENDPOINT_EXIT = 3


async def run_json(monitor: Monitor, interval: float, duration: float | None, out: TextIO | None = None,
                   backfill_s: float | None = None, extra: Callable[[], dict[str, Any]] | None = None) -> int:
    """One line per refresh until `duration` ends. A failing source (at start too: Prometheus
    down, redirecting, answering 500) is a line `{"error": ...}` and is retried, with backoff.
    Exit status: 0 when the source answered at least once, 1 when it never did."""
    if out is None:
        out = sys.stdout  # the stdout of the run, not the one there was when this module was imported
    src = monitor.source
    end = None if duration is None else time.monotonic() + duration

    def bounded(aw: Awaitable[_T]) -> Awaitable[_T]:
        """`aw`, cut when --duration ends: a source that hangs must not hold the run past it."""
        if end is None:
            return aw
        return asyncio.wait_for(aw, max(0.0, end - time.monotonic()) + 0.5)

    read_any = False
    collector = FrozenRefreshes()  # short collector pauses: a large fleet's history is frozen
    collector.start()
    freezer = asyncio.ensure_future(collector.keep_freezing())
    try:
        try:
            await bounded(monitor.start(backfill_s))
        except Exception as e:  # said on the first line; each refresh retries the start
            _error_line(out, e)
            if end is not None and time.monotonic() + interval > end + 0.01:
                return 1
            await asyncio.sleep(interval)
        # Each refresh is due `interval` after the previous one was due, not after it began: a
        # wake-up that comes late (a busy loop, a busy machine) is not added to every later one.
        # A refresh that runs past the next one's time is followed at once, and the schedule
        # starts again from there (no burst of refreshes to catch up).
        due = time.monotonic()
        while True:
            collector.wake()  # its allocations are frozen at the loop's turns (idle, the freezer waits longer)
            try:
                state = await bounded(monitor.refresh())
            except TimeoutError as e:
                if end is None or time.monotonic() < end:
                    _error_line(out, e)
                    continue
                # --duration ended while the source was still answering
                _error_line(out, TimeoutError("no answer from the source before --duration ended"))
                break
            except Exception as e:  # whole-source failure: report it as data and keep trying
                _error_line(out, e)
            else:
                read_any = read_any or any(r.state == OK for r in state.replicas)
                out.write(await frame_text(state, extra, monitor.yield_after_s) + "\n")
                out.flush()
                collector.after_refresh()
            if end is not None and time.monotonic() + interval > end + 0.01:
                break
            due = max(due + interval, time.monotonic())
            await asyncio.sleep(due - time.monotonic())
    finally:
        freezer.cancel()
        collector.stop()
        if src is not None:
            await src.close()
    if not monitor.ok_refreshes:  # the source itself never answered (e.g. Prometheus down)
        return 1
    if not read_any:
        print(f"kvwatch: no endpoint could be read during the run (exit {NO_ENDPOINT_EXIT})", file=sys.stderr)
        return NO_ENDPOINT_EXIT
    return 0


async def frame_text(state: FleetState, extra: Callable[[], dict[str, Any]] | None = None,
                     yield_after_s: float = 0.01) -> str:
    """`json.dumps` of the frame, the same text, with the event loop handed back while its rows
    are encoded: 1024 rows took 50-80 ms of CPU in one callback (the loop's longest one)."""
    clock = time.perf_counter
    t = clock()
    rows = []
    encode = _ROW_ENCODER
    for r in state.replicas:
        rows.append("".join(encode(replica_json(r, state.ts), 0)))
        if clock() - t >= yield_after_s:
            await asyncio.sleep(0)
            t = clock()
    frame = fleet_json(state, replicas=[])
    if extra is not None:
        frame.update(extra())  # e.g. "recording_error" once the recording stopped
    # json.dumps of a dict with its default separators, the rows' text put in as it is
    return "{" + ", ".join(json.dumps(k) + ": " + ("[" + ", ".join(rows) + "]" if k == "replicas" else json.dumps(v))
                           for k, v in frame.items()) + "}"


# json.dumps' own C encoder with its default settings, made once: json.dumps builds one per call
# (and an id table for its cycle check) for each row, half of a row's encoding time (256 rows:
# 2.3-2.5 against 1.1-1.6 ms). A row is a tree of fresh dicts and lists (replica_json), never
# cyclic, so the check finds nothing; the text is the same (tests/unit/test_headless_frame.py).
_ROW_ENCODER = (c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, None, ": ", ", ",
                               False, False, True)
                if c_make_encoder is not None else lambda obj, _level: (json.dumps(obj),))


def _error_line(out: TextIO, e: BaseException) -> None:
    out.write(json.dumps({"ts": time.time(), "error": redact(f"{type(e).__name__}: {e}"), "replicas": []}) + "\n")
    out.flush()

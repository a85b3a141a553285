"""`--json`: a frame's text is json.dumps of the frame, and encoding a large fleet's frame hands
the event loop back (1024 rows were one 50-80 ms callback, the loop's longest)."""

from __future__ import annotations

import asyncio
import json

from tui.core.export import fleet_json
from tui.core.headless import frame_text
from tui.core.model import Evidence, Finding, FleetState, ReplicaMetrics, ReplicaView


def _state(n: int) -> FleetState:
    views = tuple(
        ReplicaView(f'r-{i}"\\\u00e9', "stale" if i % 3 else "ok",
                    Finding("kv_pressure" if i % 2 else "healthy",
                            (Evidence("kv", "0.97", 0.95, "warn", True, 'text "quoted"'),), since=5.0),
                    ReplicaMetrics(kv_usage=0.5 + i / 1e4, waiting=float(i), ttft_p95_s=float("nan")), {},
                    error="boom" if i == 1 else None, last_ok_ts=1.0, warnings=("dup",) if i == 2 else ())
        for i in range(n))
    return FleetState(ts=10.0, source='direct "x"', replicas=views, source_warnings=("partial",))


def test_frame_text_is_json_dumps_of_the_frame():
    for n in (0, 1, 7):
        state = _state(n)
        extra = {"recording_error": "disk full"}
        extra_fn = dict(extra).copy
        got = asyncio.run(frame_text(state, extra_fn))
        frame = fleet_json(state)
        frame.update(extra)
        assert got == json.dumps(frame)
        assert asyncio.run(frame_text(state)) == json.dumps(fleet_json(state))


def test_frame_text_hands_the_loop_back_while_it_encodes_the_rows():
    state = _state(200)
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def main() -> str:
        t = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        start = ticks
        text = await frame_text(state, yield_after_s=0.0)  # hand back after every row
        t.cancel()
        return text, ticks - start

    text, ran = asyncio.run(main())
    assert json.loads(text)["replicas"][199]["key"] == 'r-199"\\\u00e9'
    assert ran >= 200  # the other task ran between rows, not only once the frame was done

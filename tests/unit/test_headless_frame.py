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


class _Clock:
    """A monotonic clock that moves only when the run sleeps (plus a wake-up latency) or a
    refresh works: the schedule is checked exactly, without waiting on real time."""

    def __init__(self, wake_latency: float) -> None:
        self.now = 1000.0
        self.wake_latency = wake_latency

    def monotonic(self) -> float:
        return self.now


def _run_schedule(monkeypatch, works: list[float], wake_latency: float = 0.05) -> list[float]:
    import time as real_time
    import types

    from tui.core import headless

    clock = _Clock(wake_latency)
    starts: list[float] = []

    async def fake_sleep(s: float) -> None:
        clock.now += max(0.0, s) + clock.wake_latency
        await asyncio.sleep(0)

    monkeypatch.setattr(headless, "time", types.SimpleNamespace(monotonic=clock.monotonic, time=real_time.time,
                                                                 perf_counter=real_time.perf_counter))
    shim = types.SimpleNamespace(**{k: getattr(asyncio, k) for k in dir(asyncio) if not k.startswith("_")})
    shim.sleep = fake_sleep
    monkeypatch.setattr(headless, "asyncio", shim)

    class Mon:
        source = None
        ok_refreshes = 0
        yield_after_s = 0.01

        async def start(self, backfill_s=None) -> None:
            return None

        async def refresh(self) -> FleetState:
            starts.append(clock.now)
            clock.now += works[min(len(starts) - 1, len(works) - 1)]
            self.ok_refreshes += 1
            return _state(1)

    class Out:
        def write(self, s: str) -> int:
            return len(s)

        def flush(self) -> None:
            pass

    asyncio.run(headless.run_json(Mon(), 1.0, 8.0, Out()))
    return starts


def test_refreshes_are_scheduled_from_the_previous_start_without_drift(monkeypatch):
    # each wake-up comes 50 ms late (a busy loop): the schedule must not add it up
    starts = _run_schedule(monkeypatch, [0.3])
    assert len(starts) >= 6
    for k, s in enumerate(starts[1:]):
        assert abs(s - starts[1] - k) < 1e-6, starts


def test_a_late_refresh_is_followed_at_once_and_the_next_ones_do_not_crowd_in(monkeypatch):
    starts = _run_schedule(monkeypatch, [0.3, 1.6, 0.3], wake_latency=0.0)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert abs(gaps[1] - 1.6) < 1e-6, gaps  # the late one: the next starts as it ends
    assert all(abs(g - 1.0) < 1e-6 for g in gaps[2:]), gaps  # then a second apart again, no burst

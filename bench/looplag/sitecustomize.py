"""Imported at start-up by the kvwatch process that `bench_fleet_cpu.py --loop-lag` starts (this
folder is put on its PYTHONPATH): times every asyncio callback (a key press waits for the one
running when it arrives) and appends those of 20 ms or more to $KVWATCH_BENCH_LOOPLAG as
`end (monotonic s)  duration (ms)  what ran`. Nothing happens without that variable."""

import os

_PATH = os.environ.get("KVWATCH_BENCH_LOOPLAG")
if _PATH:
    import asyncio.events
    import time

    _run = asyncio.events.Handle._run
    _out = open(_PATH, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def _what(handle) -> str:
        cb = handle._callback
        get_coro = getattr(getattr(cb, "__self__", None), "get_coro", None)  # a task's step
        try:
            return get_coro().__qualname__ if get_coro else getattr(cb, "__qualname__", repr(cb))
        except Exception:  # noqa: BLE001 - a label only
            return "?"

    def _timed(self) -> None:
        t0 = time.monotonic()
        _run(self)
        d = time.monotonic() - t0
        if d >= 0.02:
            _out.write(f"{t0 + d:.4f} {d * 1e3:.1f} {_what(self)}\n")

    asyncio.events.Handle._run = _timed

"""Probes for the kvwatch process that `bench_fleet_cpu.py` starts with `--loop-lag` or
`--mem-trace` (this folder is put on its PYTHONPATH, so Python imports this at start-up).
Nothing happens unless the bench sets the variable named below.

KVWATCH_BENCH_LOOPLAG=FILE: times every asyncio callback (a key press waits for the one running
when it arrives) and appends those of 20 ms or more as `end (monotonic s)  duration (ms)  its CPU (ms)  what ran`.

KVWATCH_BENCH_MEMTRACE=FILE: every 15 s, from a thread, appends `monotonic s`, RSS, Python's
allocated blocks and glibc's heap (arena / in use / free, KiB, from mallinfo2); every fourth
line also the object types whose counts changed most since the last such line (this walks all
objects once a minute: a little CPU, and it may itself move the allocation pattern).

KVWATCH_BENCH_GCTRACE=FILE: every garbage collection of 5 ms or more, as `end (monotonic s)
generation  duration (ms)  objects in the young generation's list when it began  gen-0 count
then  collected`: the count is what triggers a collection, the list's length what it costs
(listing it is itself O(n): a diagnosis, not a figure)."""

import os

_LAG = os.environ.get("KVWATCH_BENCH_LOOPLAG")
_MEM = os.environ.get("KVWATCH_BENCH_MEMTRACE")
_GC = os.environ.get("KVWATCH_BENCH_GCTRACE")

if _LAG:
    import asyncio.events
    import time

    _run = asyncio.events.Handle._run
    _lag_out = open(_LAG, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def _what(handle) -> str:
        cb = handle._callback
        get_coro = getattr(getattr(cb, "__self__", None), "get_coro", None)  # a task's step
        try:
            return get_coro().__qualname__ if get_coro else getattr(cb, "__qualname__", repr(cb))
        except Exception:  # noqa: BLE001 - a label only
            return "?"

    def _timed(self) -> None:
        t0, c0 = time.monotonic(), time.thread_time()
        _run(self)
        d = time.monotonic() - t0
        if d >= 0.02:
            # the CPU the callback itself used: on a busy machine the wall time is mostly the
            # waits for a core between the process's time slices
            _lag_out.write(f"{t0 + d:.4f} {d * 1e3:.1f} {(time.thread_time() - c0) * 1e3:.1f} {_what(self)}\n")

    asyncio.events.Handle._run = _timed

if _MEM:
    import threading

    def _trace(path: str) -> None:
        import collections
        import ctypes
        import gc
        import sys
        import time

        class _MallInfo2(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in
                        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

        try:
            mallinfo2 = ctypes.CDLL(None).mallinfo2
            mallinfo2.restype = _MallInfo2
        except (OSError, AttributeError):  # not glibc 2.33+
            mallinfo2 = None
        out = open(path, "a", buffering=1)  # noqa: SIM115
        last = None
        k = 0
        while True:
            time.sleep(15)
            with open("/proc/self/status") as f:
                rss = next(line.split()[1] for line in f if line.startswith("VmRSS"))
            line = f"{time.monotonic():.1f} rss_kib={rss} blocks={sys.getallocatedblocks()}"
            if mallinfo2 is not None:
                mi = mallinfo2()
                line += f" arena={mi.arena >> 10} inuse={mi.uordblks >> 10} free={mi.fordblks >> 10}"
            k += 1
            if k % 4 == 0:
                counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
                if last is not None:
                    moved = sorted(((t, counts[t] - last.get(t, 0)) for t in counts | last),
                                   key=lambda tv: -abs(tv[1]))[:6]
                    line += " types=" + ",".join(f"{t}:{v:+d}" for t, v in moved)
                line += f" objects={sum(counts.values())}"
                last = counts
            out.write(line + "\n")

    threading.Thread(target=_trace, args=(_MEM,), daemon=True, name="bench-memtrace").start()

if _GC:
    import gc as _gc
    import time as _time

    _gc_out = open(_GC, "a", buffering=1)  # noqa: SIM115
    _began: list = []

    def _on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            young = len(_gc.get_objects(0)) if info["generation"] == 0 else -1
            _began[:] = [_time.monotonic(), young, _gc.get_count()[0]]
            return
        if _began:
            t0, young, count = _began
            d = _time.monotonic() - t0
            if d >= 0.005:
                _gc_out.write(f"{t0 + d:.4f} {info['generation']} {d * 1e3:.1f} {young} {count} {info['collected']}\n")

    _gc.callbacks.append(_on_gc)

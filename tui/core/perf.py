"""Process-wide settings that keep a refresh of hundreds of replicas inside its CPU budget."""

from __future__ import annotations

from typing import Any

import asyncio
import functools
import gc
import time


def tune_gc() -> None:
    """Collect less often: each refresh allocates tens of thousands of short-lived objects
    (parsed samples), and CPython's default gen-0 threshold of 700 then runs collections that
    rescan the long-lived history. Measured with bench/bench_refresh.py at 256 replicas:
    0.256 -> 0.243 CPU-s per refresh. Import-time objects are frozen out of collection."""
    gc.set_threshold(50_000, 20, 100)
    gc.freeze()


@functools.cache
def _malloc_trim() -> Any:
    """glibc's malloc_trim from the C library the interpreter runs on; None where there is none
    (musl, macOS, Windows)."""
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def release_memory() -> None:
    """A full collection (the command collects rarely, see tune_gc), then the allocator's free
    pages handed back to the system. Each refresh allocates and frees a page-sized buffer per
    replica among objects that live on, and glibc keeps the freed pages between them resident:
    at 256 replicas, 2-8 MiB of RSS after each minute of a run, released in ~1 ms (measured)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class FrozenRefreshes:
    """Short collector pauses for a process that refreshes a large fleet (`--json`): what
    survives a refresh (the history) is frozen after it (`gc.freeze`, O(1)), so a collection
    scans only objects made since the last refresh, and the young generation is collected early
    (at 10,000 objects instead of tune_gc's 50,000). At 1024 replicas a generation-0 collection
    held the event loop 30-90 ms of CPU; at 2,000 objects 6-11 ms, with no more collector CPU in
    all (bench/bench_busy_fleet.py). The freezer's turns (keep_freezing) freeze the objects a
    refresh makes every few ms, so the young generation rarely reaches 10,000: at 2,000 it did
    ~4 times a second at 256 live pages, each collection walking the refresh's cold working set
    to free nothing (2.7 collections a second at 10,000 with the sampled turns below; 18 before
    both). A reference cycle frozen and dropped later is freed only by
    the full collection run every `full_every` refreshes (none seen in a healthy fleet's run:
    the turns collect before they freeze while their collections find any, see turn())."""

    def __init__(self, full_every: int = 600, young: int = 10_000) -> None:
        self.full_every = full_every
        self.young = young
        self.refreshes = 0
        self._saved: tuple[int, int, int] | None = None
        self._wake: asyncio.Future[None] | None = None  # keep_freezing's wait, ended by wake()
        self._woken = False
        self.wait_s = 0.0  # keep_freezing's current wait between turns
        self.turns = 0  # keep_freezing's turns so far
        self._clean = 0  # turns in a row whose collection found no garbage
        self._sample_due = False  # a sampled collection not yet run (its turn came after a burst)
        self._turn_cpu = time.process_time()  # the process's CPU at the last turn

    def start(self) -> None:
        self._saved = gc.get_threshold()
        gc.set_threshold(self.young, 1_000, 1_000)  # older generations hold one refresh at most
        gc.freeze()

    def after_refresh(self) -> None:
        self.refreshes += 1
        if self.refreshes % self.full_every == 0:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        else:
            self.turn()

    async def keep_freezing(self, every_s: float = 0.005, idle_s: float = 0.25) -> None:
        """Freeze at the event loop's turns during a refresh too: the young generation's list
        holds every object made since the last freeze (a collection is due when allocations
        outnumber frees by `young`, however long the list), so freezing only after each refresh
        left 10-24 ms collections at 1024 replicas.

        Every `every_s` while the process works. A turn that finds it idle since the one before
        (less CPU used than a quarter of `every_s`, or than 5% of the time since: a process
        starved of CPU beside other work still counts as working) doubles the wait, up to
        `idle_s`; `wake()` (a refresh begins) brings it back to `every_s`. A fixed 5 ms timer woke
        the idle loop 200 times a second: 2.8% of a core doing nothing on this machine, where the
        floor for 256 pages a second is 9-11% (bench/floor.py); a --json run at 16 replicas went
        from 4.3% to 1.8% of a core, side by side."""
        loop = asyncio.get_running_loop()
        clock, wall = time.process_time, time.monotonic
        wait = every_s
        cpu, at = clock(), wall()
        while True:
            self.turn()
            self._woken = False
            self._wake = woken = loop.create_future()
            timer = loop.call_later(wait, _resolve, woken)
            try:
                await woken
            finally:
                timer.cancel()
                self._wake = None
            used, now = clock() - cpu, wall()
            busy = used >= 0.25 * every_s and used >= 0.05 * (now - at)
            wait = every_s if self._woken or busy else min(idle_s, 2 * wait)
            cpu, at = cpu + used, now
            self.wait_s = wait

    # A turn's collection walks every object made since the last turn that is still alive (the
    # refresh's working set, cold in cache) to find what is cyclic garbage; in a healthy fleet's
    # run it finds none (256 live pages: 0 objects freed in ~1,800 collections over 40 s), and
    # the collections were ~7% of the --json process's CPU. So after CLEAN_TURNS collections in a
    # row that found nothing, a turn only freezes, and one turn in SAMPLE_EVERY still collects:
    # the first that finds garbage brings a collection back to every turn. What a turn without
    # a collection freezes that is already garbage waits for the full collection (`full_every`).
    CLEAN_TURNS = 64
    SAMPLE_EVERY = 8
    # asyncio runs every callback that is ready before it looks at its timers: at 1024 replicas
    # the answers that come in together are parsed in one loop iteration (~0.3 s of CPU), and
    # the turn after it found ~22,000 objects holding ~150,000 references (the pages' histogram
    # counts) in the young generation: a 26-48 ms collection, the longest callbacks of a run
    # (bench/bench_busy_fleet.py with KVWATCH_BENCH_GCTRACE). A turn after more CPU than this
    # since the one before only freezes; the next turn after less work collects in its place.
    COLLECT_WITHIN_CPU_S = 0.02

    def turn(self) -> None:
        """One turn: the young generation's cyclic garbage freed (while turns find some, and
        at a sample of the others, unless a burst of work came since the last turn), then what
        survives frozen."""
        self.turns += 1
        cpu = time.process_time()
        burst = cpu - self._turn_cpu > self.COLLECT_WITHIN_CPU_S
        self._turn_cpu = cpu
        if self.turns % self.SAMPLE_EVERY == 0:
            self._sample_due = True
        if (self._clean < self.CLEAN_TURNS or self._sample_due) and not burst:
            # what became cyclic garbage since the last turn (an exception and its traceback,
            # say) is freed first: frozen, it would wait for the full collection
            self._sample_due = False
            found = gc.collect(0)
            self._clean = 0 if found else self._clean + 1
        gc.freeze()

    def wake(self) -> None:
        """Work begins (a refresh): freeze at the loop's turns again from now."""
        woken = self._wake
        if woken is not None and not woken.done():
            self._woken = True
            woken.set_result(None)

    def stop(self) -> None:
        """The process's collector as before (a run inside a longer-lived process, a test):
        everything frozen becomes collectable again (O(1): the objects join the oldest generation)."""
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        gc.unfreeze()


def _resolve(woken: "asyncio.Future[None]") -> None:
    if not woken.done():
        woken.set_result(None)


class CollectorHold:
    """The garbage collector held off while a screen opens (from the key to its first frame
    with content), then let run: at 64 replicas a collection that landed inside an opening held
    it up to ~0.4 s (freeing the cyclic garbage of the screen closed before it), the p95 of
    bench/bench_screen_open.py. The collection due runs right after the frame, while the screen
    is being read. `release()` is the caller's to arrange on every path (a frame, a time cap);
    a hold never disables a collector that someone else turned off, nor enables one."""

    def __init__(self) -> None:
        self.held = False

    def hold(self) -> bool:
        """Hold the collector; False where it is off already (held, or turned off elsewhere)."""
        if self.held or not gc.isenabled():
            return False
        gc.disable()
        self.held = True
        return True

    def release(self) -> None:
        if self.held:
            self.held = False
            gc.enable()

"""core/perf.py: what the command does to keep a long session's memory bounded."""

from __future__ import annotations

import contextlib
import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest


ROOT = Path(__file__).resolve().parents[2]


_TRIM_CASE = """
import json
from tui.core.perf import release_memory

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

big, keep = [], []
for i in range(2000):
    big.append(b"x" * 40_000 + bytes([i % 256]))  # touched: resident
    keep.append(b"y" * 600 + bytes([i % 256]))  # over pymalloc's 512 B: from malloc, between them
before = rss()
del big
after_free = rss()
release_memory()
print(json.dumps([before, after_free, rss(), len(keep)]))
"""


def _frozen(objs: list) -> bool:
    """Every one of `objs` (tracked containers) frozen: in no generation the collector scans.
    (Not a count of frozen objects: a frozen object that dies leaves the count, which made a
    count-based check one short under load.)"""
    import gc

    young = {id(o) for g in range(3) for o in gc.get_objects(generation=g)}
    return not any(id(o) in young for o in objs)


@contextlib.contextmanager
def _young_collections(threshold: int | None = None) -> Iterator[list[int]]:
    """The generation-0 collections that start inside it, one entry each; with `threshold`, no
    automatic one meanwhile (only the freezer turns' own count). The collector as it was after."""
    import gc

    starts: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 0:
            starts.append(1)

    before = gc.get_threshold()
    if threshold is not None:
        gc.set_threshold(threshold)
    gc.callbacks.append(count)
    try:
        yield starts
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*before)
        gc.unfreeze()


async def _turns(f: Any, n: int) -> None:
    """Until `f` (a FrozenRefreshes keeping on freezing) has taken `n` more turns."""
    import asyncio

    target = f.turns + n
    while f.turns < target:
        await asyncio.sleep(0)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"),
                    reason="glibc's malloc_trim")
def test_release_memory_hands_the_free_pages_between_live_objects_back_to_the_system():
    # Each refresh allocates and frees a page-sized buffer (~42 KB) per replica among objects
    # that live on: the allocator keeps the freed pages between them (RSS grew ~8 MiB in the
    # first minute at 256 replicas, measured), which only malloc_trim returns. In a fresh
    # interpreter: in a test worker the heap's layout depends on the tests before (one run of the
    # suite saw glibc give back 53 of the 76 MiB at the free, as the top of its heap).
    out = subprocess.run([sys.executable, "-c", _TRIM_CASE], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, check=True).stdout
    before, after_free, after, kept = json.loads(out)
    assert kept == 2000
    # ~76 MiB freed; without the trim the heap keeps nearly all of it resident
    assert after_free - after > 40, (before, after_free, after)


def test_frozen_refreshes_keep_what_survived_a_refresh_out_of_collections_and_free_frozen_cycles_later():
    import gc
    import weakref

    from tui.core.perf import FrozenRefreshes

    class Node:
        pass

    before = gc.get_threshold()
    s = FrozenRefreshes(full_every=3)
    s.start()
    try:
        assert gc.get_threshold()[0] == 10_000
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle that outlives the refresh
        alive = weakref.ref(a)
        frozen_before = gc.get_freeze_count()
        s.after_refresh()
        assert gc.get_freeze_count() > frozen_before  # survivors are no longer scanned
        del a, b
        gc.collect()
        assert alive() is not None  # frozen: the price, paid back by the periodic full collection
        s.after_refresh()
        assert alive() is not None
        s.after_refresh()  # the third: unfreeze and collect everything
        assert alive() is None
    finally:
        s.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0  # the process's collector as it was


def test_keep_freezing_freezes_at_the_loops_turns_within_a_refresh():
    import asyncio
    import gc

    from tui.core.perf import FrozenRefreshes

    async def main() -> bool:
        task = asyncio.ensure_future(FrozenRefreshes().keep_freezing(every_s=0.0))
        await asyncio.sleep(0)
        kept = [[i] for i in range(5_000)]  # survivors made mid-refresh
        assert not _frozen(kept)
        for _ in range(3):
            await asyncio.sleep(0)  # the refresh hands the loop back
        task.cancel()
        return _frozen(kept)

    try:
        assert asyncio.run(main())
    finally:
        gc.unfreeze()


def test_keep_freezing_frees_cyclic_garbage_before_it_freezes():
    import asyncio
    import gc
    import weakref

    from tui.core.perf import FrozenRefreshes

    class Node:
        pass

    async def main() -> bool:
        task = asyncio.ensure_future(FrozenRefreshes().keep_freezing(every_s=0.0))
        await asyncio.sleep(0)
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b  # garbage now, but only the collector can tell
        for _ in range(3):
            await asyncio.sleep(0)
        task.cancel()
        return gone() is None

    before = gc.get_threshold()
    gc.set_threshold(1_000_000)  # no automatic collection meanwhile: the turn's own must free it
    try:
        assert asyncio.run(main())
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_keep_freezing_backs_off_while_the_loop_is_idle():
    # a fixed 5 ms timer woke an idle process 200 times a second (~3% of a core doing nothing)
    import asyncio

    from tests.waits import eventually
    from tui.core.perf import FrozenRefreshes

    async def main(turns: list[int]) -> int:
        f = FrozenRefreshes()
        task = asyncio.ensure_future(f.keep_freezing(every_s=0.005, idle_s=0.2))
        # idle: nothing runs but the freezer (and this poll); a fixed timer never backs off
        await eventually(lambda: f.wait_s >= 0.2, what="the freezer backing off to idle_s while idle")
        task.cancel()
        return len(turns)

    with _young_collections() as turns:
        idle_turns = asyncio.run(main(turns))
    assert idle_turns <= 20, f"{idle_turns} collections before backing off (a 5 ms timer makes ~200 a second)"


def test_keep_freezing_turns_at_every_s_again_when_work_begins():
    import asyncio
    import gc

    from tests.waits import eventually
    from tui.core.perf import FrozenRefreshes

    async def main() -> None:
        f = FrozenRefreshes()
        task = asyncio.ensure_future(f.keep_freezing(every_s=0.005, idle_s=60.0))
        await eventually(lambda: f.wait_s >= 0.5, what="the freezer backing off while idle")
        kept = [[i] for i in range(5_000)]  # a refresh begins: its survivors are frozen at the next turns
        assert not _frozen(kept)
        f.wake()
        for _ in range(3):
            await asyncio.sleep(0)  # the refresh hands the loop back
        assert _frozen(kept), "no turn at once after wake()"
        assert f.wait_s == 0.005
        task.cancel()
        assert len(kept) == 5_000

    try:
        asyncio.run(main())
    finally:
        gc.unfreeze()


def test_keep_freezing_stops_collecting_at_each_turn_once_turns_find_no_garbage_and_starts_again_when_one_does():
    # A turn's collection walks the refresh's working set made since the last turn; in a healthy
    # fleet's run it frees nothing (256 live pages: ~1,800 such collections in 40 s, ~7% of the
    # --json process's CPU). After a run of clean turns only a sample of turns collects; the
    # first sampled collection that finds garbage brings the collection back to every turn.
    import asyncio
    import weakref

    from tui.core.perf import FrozenRefreshes

    class Node:
        pass

    async def main(starts: list[int]) -> None:
        f = FrozenRefreshes()
        task = asyncio.ensure_future(f.keep_freezing(every_s=0.0))
        try:
            clean, every = f.CLEAN_TURNS, f.SAMPLE_EVERY
            await _turns(f, clean + 2)  # as many clean turns in a row, each with its collection
            starts.clear()
            await _turns(f, 40 * every)
            assert len(starts) <= 40 + 2, f"{len(starts)} collections in {40 * every} clean turns"
            # garbage made just before a sampled turn is found there, and every turn collects again
            while (f.turns + 1) % every:
                await _turns(f, 1)
            a, b = Node(), Node()
            a.other, b.other = b, a
            gone = weakref.ref(a)
            del a, b
            await _turns(f, 1)
            assert gone() is None, "the sampled turn's collection did not free the cycle"
            starts.clear()
            await _turns(f, clean // 2)
            assert len(starts) >= clean // 2, f"{len(starts)} collections in {clean // 2} turns after garbage was found"
        finally:
            task.cancel()

    with _young_collections(1_000_000) as starts:
        asyncio.run(main(starts))


def test_a_turn_after_a_burst_of_work_freezes_without_collecting():
    # asyncio runs every callback that is ready before a timer's: at 1024 replicas the answers
    # that arrive together are parsed in one loop iteration (~0.3 s of CPU), and the freezer's
    # next turn found ~22,000 objects with ~150,000 references in the young generation; its
    # collection held the loop 26-48 ms (bench/bench_busy_fleet.py, KVWATCH_BENCH_GCTRACE).
    # Such a turn only freezes; a turn after little work still collects (the test above).
    import asyncio
    import time

    from tui.core.perf import FrozenRefreshes

    async def main(starts: list[int]) -> tuple[int, bool]:
        f = FrozenRefreshes()
        task = asyncio.ensure_future(f.keep_freezing(every_s=0.0))
        try:
            await _turns(f, 2)  # a few turns first: each collects (none has found garbage yet)
            assert f._clean < f.CLEAN_TURNS
            starts.clear()
            # a burst: one stretch of the loop with much more CPU than a turn's budget
            cpu0 = time.process_time()
            kept = []
            while time.process_time() - cpu0 < 3 * f.COLLECT_WITHIN_CPU_S:
                kept.append([len(kept)])
            await _turns(f, 1)
            return len(starts), _frozen(kept)
        finally:
            task.cancel()

    with _young_collections(100_000_000) as starts:
        collections, frozen = asyncio.run(main(starts))
    assert collections == 0, "the turn after the burst walked it in a collection"
    assert frozen, "the burst's survivors were not frozen at the turn after it"

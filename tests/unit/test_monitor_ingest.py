"""Monitor.refresh hands the event loop back while it takes in a large fleet's scrapes, so the
screen keeps answering keys; what it computes is the same as taking them in at once."""

from __future__ import annotations

import asyncio

from tui.core.model import EngineSample, Sample, Scrape
from tui.core.monitor import Monitor


def scrape(name: str, ts: float, kv: float) -> Scrape:
    vals = {"running": 8.0, "waiting": 2.0, "kv_usage": kv, "preemptions": ts}
    return Scrape(ts, name, Sample(engines={"0": EngineSample(vals, {})}, generation="v1"))


class ListSource:
    """Answers each poll at once (no await inside) with the next prepared batch."""

    description = "prepared batches"

    def __init__(self, batches: list[list[Scrape]]) -> None:
        self.batches = list(batches)

    async def start(self) -> None:
        pass

    async def poll(self) -> list[Scrape]:
        return self.batches.pop(0)

    async def close(self) -> None:
        pass


def batches(n: int, rounds: int) -> list[list[Scrape]]:
    return [[scrape(f"r{i:03d}", 100.0 + t, (i % 10) / 10) for i in range(n)] for t in range(rounds)]


def rows(state):
    return [(v.name, v.state, v.verdict, v.metrics, v.error) for v in state.replicas]


async def test_a_refresh_lets_the_event_loop_run_while_it_takes_in_the_scrapes() -> None:
    m = Monitor(ListSource(batches(64, 1)))
    m.yield_after_s = 0.0  # hand the loop back after every replica (the default: every few ms)
    ticks = 0
    stop = False

    async def ticker() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    await m.start()
    state = await m.refresh()
    during = ticks - before
    stop = True
    await task
    assert len(state.replicas) == 64
    assert during >= 64  # once per scrape taken in and per replica judged, at least


async def test_the_state_is_the_same_as_taking_the_scrapes_in_at_once() -> None:
    data = batches(40, 5)
    live = Monitor(ListSource(data))
    live.yield_after_s = 0.0
    await live.start()
    at_once = Monitor()
    for batch in data:
        state = await live.refresh()
        assert rows(state) == rows(at_once.ingest(batch, now=state.ts))
    assert rows(state) and all(r[2] for r in rows(state))


async def test_a_replica_forgotten_while_a_refresh_runs_is_not_in_its_state() -> None:
    m = Monitor(ListSource(batches(30, 2)))
    m.yield_after_s = 0.0
    await m.start()
    await m.refresh()

    async def forget_soon() -> None:
        for _ in range(45):  # the scrapes are in, the replicas' views are being made
            await asyncio.sleep(0)
        m.forget(["r005", "r025"])

    task = asyncio.create_task(forget_soon())
    state = await m.refresh()
    await task
    names = [v.name for v in state.replicas]
    assert len(names) == 28 and "r005" not in names and "r025" not in names
    assert not m.knows("r005")


async def test_refreshes_that_overlap_take_their_scrapes_in_one_after_the_other() -> None:
    m = Monitor(ListSource(batches(20, 2)))
    m.yield_after_s = 0.0
    await m.start()
    first, second = await asyncio.gather(m.refresh(), m.refresh())
    assert first.ts == 100.0 and second.ts == 101.0
    h = m.histories["r003"]
    assert [ts for ts, _ in h.points] == [100.0, 101.0]

"""RequestBudget: request starts spaced 1/rps apart in real time, at most `concurrency` open."""

from __future__ import annotations

from itertools import pairwise
import asyncio
import time

import pytest

from tui.core.sources.budget import RequestBudget


async def test_starts_are_spaced_even_after_the_event_loop_stalls() -> None:
    budget = RequestBudget(rps=50.0, concurrency=4)
    starts: list[float] = []

    async def one() -> None:
        async with budget.slot():
            starts.append(time.monotonic())
            await asyncio.sleep(0.01)

    tasks = [asyncio.create_task(one()) for _ in range(20)]
    await asyncio.sleep(0.05)
    time.sleep(0.2)  # a busy event loop: every waiter wakes late
    await asyncio.gather(*tasks)
    gaps = [b - a for a, b in pairwise(starts)]
    assert len(starts) == 20 and min(gaps) >= 1 / 50 - 0.002, min(gaps)


async def test_at_most_concurrency_open() -> None:
    budget = RequestBudget(rps=1000.0, concurrency=3)
    open_now = peak = 0

    async def one() -> None:
        nonlocal open_now, peak
        async with budget.slot():
            open_now += 1
            peak = max(peak, open_now)
            await asyncio.sleep(0.02)
            open_now -= 1

    await asyncio.gather(*(one() for _ in range(12)))
    assert peak == 3


def test_a_budget_needs_a_rate_and_a_connection() -> None:
    with pytest.raises(ValueError):
        RequestBudget(rps=0, concurrency=1)
    with pytest.raises(ValueError):
        RequestBudget(rps=1, concurrency=0)

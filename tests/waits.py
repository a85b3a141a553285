"""Waiting for a state in tests, never for a time: poll a condition until it holds, with a
generous deadline (a busy machine is slower, not different), and fail saying so instead of
hanging when it never does."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable


async def eventually(cond: Callable[[], Any], timeout: float = 30.0, step: float = 0.02, what: str = "") -> Any:
    """cond()'s value once truthy (polled every `step` s on the running loop)."""
    end = asyncio.get_running_loop().time() + timeout
    while not (v := cond()):
        assert asyncio.get_running_loop().time() < end, f"not within {timeout:.0f} s: {what or 'the condition'}"
        await asyncio.sleep(step)
    return v


def eventually_sync(cond: Callable[[], Any], timeout: float = 30.0, step: float = 0.05, what: str = "") -> Any:
    """cond()'s value once truthy (polled every `step` s, blocking: for tests without a loop)."""
    end = time.monotonic() + timeout
    while not (v := cond()):
        assert time.monotonic() < end, f"not within {timeout:.0f} s: {what or 'the condition'}"
        time.sleep(step)
    return v

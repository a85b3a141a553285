"""A request budget for scrapes that go through the API server (the pod proxy).

The API server treats `pods/proxy` as a long-running request (k8s.io/kubernetes
pkg/controlplane/apiserver/config.go: LongRunningFunc = BasicLongRunningRequestCheck(verbs watch,
proxy; subresources attach, exec, proxy, log, portforward)), and priority-and-fairness does not
limit those (k8s.io/apiserver pkg/server/filters/priority-and-fairness.go: "Skip tracking long
running non-watch requests"), so each kvwatch must limit itself. `RequestBudget` spaces
request starts at least 1/rps apart (a leaky bucket: never more than rps + 1 start in any second)
and keeps at most `concurrency` open; a caller's timeout starts only once it holds a slot, when
the request is actually sent, never while it waits its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import AsyncIterator, Callable

DEFAULT_PROXY_RPS = 40.0  # one kvwatch stays under ~50 proxy requests/s (256 pods: each every 6.4 s)
DEFAULT_PROXY_CONCURRENCY = 8


class RequestBudget:
    def __init__(self, rps: float = DEFAULT_PROXY_RPS, concurrency: int = DEFAULT_PROXY_CONCURRENCY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rps <= 0 or concurrency < 1:
            raise ValueError("a request budget needs rps > 0 and concurrency >= 1")
        self.rps = float(rps)
        self.concurrency = int(concurrency)
        self.clock = clock
        self._sem = asyncio.Semaphore(self.concurrency)
        self._turn = asyncio.Lock()  # one waiter at a time claims the next start, in arrival order
        self._next = 0.0  # the earliest start of the next request

    def period_for(self, n: int) -> float:
        """Seconds it takes to send `n` requests within the budget."""
        return n / self.rps

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait for a free connection, then for a start time within the rate, then hold it.

        The spacing is measured from when each request really starts (a late wake-up after a
        busy event loop does not let the waiting requests out in a burst), and the connection is
        taken first so that no request that has its start time then waits for one."""
        async with self._sem:
            async with self._turn:
                wait = self._next - self.clock()
                if wait > 0:
                    await asyncio.sleep(wait)
                self._next = self.clock() + 1.0 / self.rps
            yield

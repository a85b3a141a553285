"""The demo's game day, stepped at simulator speed: the simulated fleet and cluster advance in
simulated time (no HTTP, no threads), each replica's pages go through the same parser as a live
scrape, and the Monitor judges them as in `kvwatch demo` with a scrape every `interval` seconds.

Used by the game-day tests and to measure verdict changes per replica-hour.
"""

from __future__ import annotations

from tui.core import engines
from tui.core.cluster.sim import SimCluster
from tui.core.metrics.extract import parse_dcgm, to_gpu
from tui.core.model import Scrape
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9
# not judgements of the running engine: no verdict change counts into or out of these
LIFECYCLE = ("unknown", "down", "starting")


class SteppedDemo:
    """A stepped `kvwatch demo`: `tick()` advances the fleet one scrape interval and refreshes."""

    def __init__(self, scenario: str = "long-prompts", replicas: int = 4, seed: int = 3,
                 interval: float = 10.0, audit=None, load_delay_s: float = 60.0) -> None:
        self.fleet = SimFleet(scenario, replicas=replicas, seed=seed, start_time=T0)
        self.cluster = SimCluster(self.fleet, audit=audit, load_delay_s=load_delay_s, stepped=True)
        self.monitor = Monitor(None)
        self.interval = interval
        self.changes: dict[str, list[tuple[float, str]]] = {}  # replica -> [(ts, verdict)] on change
        self.span: dict[str, list[float]] = {}  # replica -> [first, last] judged refresh

    def scrapes(self) -> list[Scrape]:
        now = self.fleet.clock()
        pods = {p.name: p for p in _run(self.cluster.list_pods())}
        out = []
        for name in self.fleet.replica_names():
            if name not in pods:
                continue
            route = self.fleet._route_fn(self.fleet._get(name))
            code, _ctype, body = route("/metrics")
            if code != 200:
                out.append(Scrape(ts=now, replica=name, error=f"HTTP {code}", group="llama-8b", pod=pods[name]))
                continue
            sample = engines.parse_page(body.decode())
            gpu = to_gpu(parse_dcgm(route("/dcgm")[2].decode()))
            out.append(Scrape(ts=now, replica=name, sample=sample, gpu=gpu, group="llama-8b", pod=pods[name]))
        return out

    def tick(self):
        _run(self.cluster.sleep(self.interval))
        gone = set(self.monitor.histories) - set(self.fleet.replica_names())
        self.monitor.forget(gone)
        state = self.monitor.ingest(self.scrapes(), now=self.fleet.clock())
        for v in state.replicas:
            seen = self.changes.setdefault(v.name, [])
            if not seen or seen[-1][1] != v.verdict:
                seen.append((state.ts, v.verdict))
            if v.verdict not in LIFECYCLE:
                self.span.setdefault(v.name, [state.ts, state.ts])[1] = state.ts
        return state

    def run(self, seconds: float):
        state = None
        for _ in range(int(seconds / self.interval)):
            state = self.tick()
        return state

    def flips_per_replica_hour(self) -> float:
        """Verdict changes per replica-hour of judged time (the first verdict is no change)."""
        flips = sum(max(0, len([v for _, v in seq if v not in LIFECYCLE]) - 1)
                    for seq in self.changes.values())
        hours = sum(b - a for a, b in self.span.values()) / 3600
        return flips / hours if hours else 0.0


def _run(coro):
    """Drive a coroutine that never really waits (the stepped cluster) to completion."""
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    # a stepped SimCluster only yields through asyncio.sleep(0): keep sending
    while True:
        try:
            coro.send(None)
        except StopIteration as e:
            return e.value



class SteppedDemoSource:
    """`kvwatch demo`'s Source over a stepped fleet: each poll advances the simulated fleet and
    cluster one scrape interval, then reads every pod's pages in process (the app's refresh is
    the clock, so a game day plays at simulator speed and the same way every time)."""

    def __init__(self, demo: SteppedDemo) -> None:
        self.demo = demo
        self.cluster = demo.cluster
        self.description = f"demo (stepped): {demo.fleet.description}"
        self._known: set[str] = set()
        self._removed: set[str] = set()

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def take_removed(self) -> set[str]:
        out, self._removed = self._removed, set()
        return out

    async def poll(self) -> list[Scrape]:
        await self.cluster.sleep(self.demo.interval)
        out = self.demo.scrapes()
        names = set(self.demo.fleet.replica_names())
        self._removed |= self._known - names
        self._known = names
        return out

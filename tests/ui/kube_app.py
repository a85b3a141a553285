"""The app over the Kubernetes emulator (official client, real HTTP on 127.0.0.1), for Pilot tests
of the mitigation keys, and small waiting helpers (bounded, no bare sleeps)."""

from __future__ import annotations

import time
from typing import Any, Callable

from tests.integration.kube_env import NS, Env
from tui.app import KvwatchApp
from tui.core.sources.kube import ClusterSource
from tui.core.monitor import Monitor

_M = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'


def page(running: float, waiting: float, kv: float = 0.97, preemptions: float = 10.0) -> str:
    """A vLLM V1 /metrics page with the gauges kvwatch reads first."""
    return "".join(
        f"# TYPE vllm:{name} {typ}\nvllm:{name}{{{_M}}} {value}\n"
        for name, typ, value in (
            ("num_requests_running", "gauge", running),
            ("num_requests_waiting", "gauge", waiting),
            ("kv_cache_usage_perc", "gauge", kv),
            ("num_preemptions_total", "counter", preemptions),
        )
    )


class Pages:
    """Per-pod metrics the emulator's pod proxy serves; tests change the load as they go."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.load: dict[str, tuple[float, float]] = {}

    def set(self, pod: str, running: float, waiting: float) -> None:
        self.load[pod] = (running, waiting)
        self.env.emu.pod_metrics[(NS, pod)] = lambda: page(*self.load[pod])


def kube_app(env: Env, *, readonly: bool = False, cluster_kw: dict[str, Any] | None = None, **app_kw: Any):
    cluster = env.cluster(watch_timeout_s=2, readonly=readonly, **(cluster_kw or {}))
    src = ClusterSource(cluster, timeout=2.0)
    return KvwatchApp(Monitor(src), 1.0, autostart=False, readonly=readonly, **app_kw), src


async def until(pilot, cond: Callable[[], Any], timeout: float = 30.0, refresh: bool = False, step: float = 0.05,
                what: Callable[[], str] | None = None) -> Any:
    """Wait (bounded) until cond() is truthy; its value. With refresh, run one refresh of the app
    per turn. `what` describes the state when the wait times out. The deadline is generous (a
    busy machine is slower, not different): a test waits for the state it checks, never a time."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            state = what() if what is not None else type(pilot.app.screen).__name__
            raise AssertionError(f"condition not met within {timeout}s: {state}")
        if refresh:
            await pilot.app.refresh_once()
        await pilot.pause(step)


async def start(pilot, src: ClusterSource, refreshes: int = 2) -> None:
    await src.start()
    for _ in range(refreshes):
        await pilot.app.refresh_once()
        await pilot.pause()
    await until(pilot, lambda: pilot.app.screen.query_one("FleetTable").row_count > 0)
    # the RBAC answer arrives in a worker: wait for it before looking at the keys
    await until(pilot, lambda: pilot.app.mitigation_gate.perms or pilot.app.mitigation_gate.failed)
    await pilot.pause()


def select(pilot, name: str) -> None:
    table = pilot.app.screen.query_one("FleetTable")
    row = table.get_row_index(name)  # by the row key (the replica name): a long name is cut on screen
    table.move_cursor(row=row)


def notes(app) -> list[str]:
    return [str(n.message) for n in app._notifications]

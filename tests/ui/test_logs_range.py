"""The logs screen's time range (`t`): all / last 5 min / last 1 min / since the replica's incident
began (offered only while it has one), said in the title, asked of the API server as
sinceSeconds (a huge log is never fetched whole) and applied to the demo's simulated logs."""

from __future__ import annotations

from textual.widgets import Static

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import kube_app, until
from tests.ui.test_mitigation_keys import ready
from tui.app import KvwatchApp
from tui.core.cluster.sim import SimCluster
from tui.core.cluster.values import LogLines
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet
from tui.core.sources.demo import DemoSource
from tui.screens.logs import LogsScreen


def title(screen: LogsScreen) -> str:
    return str(screen.query_one("#logs-title", Static).render())


def log_asks(env: Env, pod: str) -> list[dict]:
    return [c.query for c in env.emu.calls if c.method == "GET" and c.path.endswith(f"/pods/{pod}/log")]


async def test_t_cycles_the_range_and_asks_the_api_server_for_since_seconds(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        pod = await ready(pilot, env, src)
        env.emu.pod_logs[(NS, pod, "vllm", False)] = "ERROR torch.OutOfMemoryError: CUDA out of memory\n"
        await pilot.press("l")
        logs = await until(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.logs and app.screen)
        assert "sinceSeconds" not in log_asks(env, pod)[-1] and "all time" in title(logs)
        for want, secs in (("last 5 min", "300"), ("last 1 min", "60")):
            await pilot.press("t")
            await until(pilot, lambda secs=secs: log_asks(env, pod)[-1].get("sinceSeconds") == secs,
                        what=lambda: str(log_asks(env, pod)[-3:]))
            assert want in title(logs), title(logs)
            await until(pilot, lambda: logs.logs is not None and logs.logs.lines)
        # the replica has no incident: the range goes back to all, and the follow keeps the range
        await pilot.press("t")
        await until(pilot, lambda: "sinceSeconds" not in log_asks(env, pod)[-1])
        assert "all time" in title(logs)


class Recorder:
    """A cluster that answers only the log read, recording the range asked."""

    def __init__(self) -> None:
        self.asked: list[float | None] = []

    async def logs(self, namespace, pod, container, *, previous, tail, filtered, since_s=None) -> LogLines:
        self.asked.append(since_s)
        return LogLines(pod, "vllm", previous, ("ERROR x",), 1, filtered)


async def test_since_the_incident_began_is_offered_while_the_replica_has_one() -> None:
    app = make_app({"node-sick": "fault", "fine": "healthy"})
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        sick = next(r for r in app.monitor.state.replicas if r.name == "node-sick")
        assert sick.verdict == "node-fault" and sick.finding.since is not None
        cluster = Recorder()
        screen = LogsScreen(cluster, "ns", "node-sick", replica="node-sick")  # type: ignore[arg-type]
        await app.push_screen(screen)
        await until(pilot, lambda: screen.logs is not None)
        for _ in range(3):
            await pilot.press("t")
        await until(pilot, lambda: "since the incident began" in title(screen), what=lambda: title(screen))
        began = app.monitor.state.ts - sick.finding.since
        await until(pilot, lambda: cluster.asked[-1] is not None and cluster.asked[-1] >= began,
                    what=lambda: str(cluster.asked))
        assert "node-fault" in title(screen)
        await pilot.press("t")
        await until(pilot, lambda: cluster.asked[-1] is None)  # all again

        healthy = LogsScreen(Recorder(), "ns", "fine", replica="fine")  # type: ignore[arg-type]
        await pilot.press("escape")
        await app.push_screen(healthy)
        await until(pilot, lambda: healthy.logs is not None)
        for _ in range(3):  # all -> 5 min -> 1 min -> all: no incident to offer
            await pilot.press("t")
        await until(pilot, lambda: "all time" in title(healthy))


async def test_the_demo_logs_are_cut_to_the_range() -> None:
    fleet = SimFleet("steady", replicas=1, speed=20.0, seed=1)
    fleet.start()
    try:
        cluster = SimCluster(fleet)
        app = KvwatchApp(Monitor(DemoSource(cluster)), 0.25)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.monitor.state.replicas and app.monitor.state.replicas[0].pod, timeout=30)
            name = app.monitor.state.replicas[0].name
            await until(pilot, lambda: fleet.clock() - fleet.status(name).created > 200, timeout=30)
            every = await cluster.logs("inference", name, filtered=False)
            last = await cluster.logs("inference", name, filtered=False, since_s=60)
            assert 0 < len(last.lines) < len(every.lines), (len(last.lines), len(every.lines))
            assert every.lines[-len(last.lines):] == last.lines or set(last.lines) <= set(every.lines)
            # the first line kept is within the minute: its stamp is not older than the cut
            await pilot.press("l")
            logs = await until(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.logs and app.screen)
            await pilot.press("f")  # every line, so that the cut shows
            await until(pilot, lambda: logs.logs is not None and not logs.logs.filtered)
            n_all = logs.logs.total
            await pilot.press("t", "t")
            await until(pilot, lambda: "last 1 min" in title(logs) and logs.logs.total < n_all,
                        what=lambda: f"{title(logs)} {logs.logs.total} of {n_all}")
    finally:
        fleet.stop()

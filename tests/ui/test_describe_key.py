"""`y` on a replica: the YAML of its pod and of its owner, read-only, as the cluster returns them
(managedFields left out), every line escaped; the same from the demo's simulated cluster; hidden
with the reason where RBAC denies reading pods, as the logs key is."""

from __future__ import annotations

from textual.widgets import Static

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import kube_app, notes, until
from tests.ui.test_mitigation_keys import ready
from tui.app import KvwatchApp
from tui.core.cluster.sim import SimCluster
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet
from tui.core.sources.demo import DemoSource
from tui.screens.describe import DescribeScreen
from tui.screens.fleet import FleetScreen


def shown(screen: DescribeScreen) -> str:
    return str(screen.query_one("#describe-text", Static).render())


async def test_y_shows_the_pod_and_its_deployment_escaped(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        pod = await ready(pilot, env, src)
        obj = env.emu.get("pods", NS, pod)
        assert obj is not None
        obj["metadata"].setdefault("annotations", {})["note"] = "\x1b[31mred\x1b[0m [b]bold[/b] \x1b]0;title\x07"
        obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
        env.emu._write("pods", obj, "MODIFIED")
        await pilot.press("y")
        screen = await until(pilot, lambda: isinstance(app.screen, DescribeScreen) and app.screen)
        await until(pilot, lambda: "kind: Deployment" in shown(screen), what=lambda: shown(screen))
        text = shown(screen)
        assert f"Pod/{pod}" in text and "Deployment/llama" in text and f"name: {pod}" in text
        assert "--gpu-memory-utilization" in text or "vllm" in text  # the owner's template
        note = next(line for line in text.splitlines() if "note:" in line)
        assert "\x1b" not in text and "\x07" not in text and "[b]bold[/b]" in note, note  # markup shown as text
        assert "managedFields" not in text
        assert "read-only" in str(screen.query_one("#describe-title", Static).render())
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        assert env.writes() == []


async def test_y_is_hidden_when_rbac_denies_reading_pods(env: Env) -> None:
    env.emu.deny("get", "pods")
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        screen = app.screen
        await until(pilot, lambda: screen.check_action("describe", ()) is False)
        await pilot.press("y")
        await until(pilot, lambda: any("RBAC does not allow get pods" in n for n in notes(app)),
                    what=lambda: notes(app))
        assert app.screen is screen


async def test_y_without_a_cluster_says_why() -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        screen = app.screen
        await pilot.press("y")
        await until(pilot, lambda: any("no cluster" in n for n in notes(app)), what=lambda: notes(app))
        assert app.screen is screen


async def test_the_demo_answers_y() -> None:
    fleet = SimFleet("steady", replicas=2, speed=10.0, seed=1)
    fleet.start()
    try:
        cluster = SimCluster(fleet)
        app = KvwatchApp(Monitor(DemoSource(cluster)), 0.25)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: len(app.monitor.state.replicas) == 2, timeout=30)
            await pilot.press("y")
            screen = await until(pilot, lambda: isinstance(app.screen, DescribeScreen) and app.screen)
            await until(pilot, lambda: "kind: Deployment" in shown(screen), what=lambda: shown(screen))
            text = shown(screen)
            assert "kind: Pod" in text and "ownerReferences" in text and "--gpu-memory-utilization" in text, text
    finally:
        fleet.stop()

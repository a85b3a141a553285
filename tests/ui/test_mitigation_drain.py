"""Pilot tests of the drain progress over the Kubernetes emulator: each step shown as it happens
with the target's live running + waiting from the Monitor as the load, the exact requests, and
cancel (the target goes back in rotation, the spare goes away)."""

from __future__ import annotations

import pytest

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.kube_app import Pages, kube_app, notes, select, start, until
from tui.screens.confirm import ConfirmScreen
from tui.screens.drain import DrainScreen
from tui.screens.fleet import FleetScreen


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setattr(DrainScreen, "POLL_S", 0.05)


def seq(screen: DrainScreen) -> list[tuple[str, str]]:
    return [(st.step, st.status) for _, st in screen.rows if st.step != "check"]


async def begin_drain(pilot, env: Env, src) -> tuple[DrainScreen, str, Pages]:
    pages = Pages(env)
    pods = [p["metadata"]["name"] for p in env.pods()]
    for p in pods:
        pages.set(p, 6, 2)
    await start(pilot, src)
    target = pods[0]
    select(pilot, target)
    await pilot.press("ctrl+d")
    dialog = await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen) and pilot.app.screen)
    assert dialog.plan.action == "drain" and dialog.plan.target.name == target
    lines = dialog.plan.diff.splitlines()
    assert lines[0] == "routes: Service llama" and "1. scale deployment/llama 2 -> 3; wait until one more pod is ready" in lines
    assert any(ln.startswith("mechanism: scale-down") for ln in lines)
    assert env.writes() == []
    await pilot.press("enter")
    screen = await until(pilot, lambda: isinstance(pilot.app.screen, DrainScreen) and pilot.app.screen)
    return screen, target, pages


async def test_drain_shows_each_step_and_waits_for_the_live_load(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        screen, target, pages = await begin_drain(pilot, env, src)
        # the spare comes up (the emulator's pods start ready), the target leaves rotation and the
        # drain waits on the target's own running + waiting as the dashboard scrapes it
        await until(pilot, lambda: ("wait-idle", "running") in seq(screen), refresh=True)
        assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "draining"
        # (the load line follows the refreshes: the one that shows the target's page may come
        # after the step above on a busy machine)
        await until(pilot, lambda: "running 6  waiting 2  in flight 8" in str(screen.query_one("#drain-load").render()),
                    refresh=True, what=lambda: str(screen.query_one("#drain-load").render()))
        assert app.screen.check_action("cancel_drain", ()) is True and app.screen.check_action("restore", ()) is False
        pages.set(target, 0, 0)  # in-flight requests finished
        await until(pilot, lambda: screen.finished, refresh=True)
        assert seq(screen) == [("scale-up", "running"), ("scale-up", "ok"), ("wait-spare", "ok"), ("cordon", "ok"), ("endpoints", "ok"),
                               ("wait-idle", "running"), ("wait-idle", "ok"), ("remove", "ok"), ("done", "ok")]
        # each line carries a wall-clock time and the elapsed seconds
        assert all(ts > 0 for ts, _ in screen.rows)
        assert screen.rows[-1][1].elapsed_s >= screen.rows[0][1].elapsed_s
        writes = [(c.method, c.path.rsplit("/", 2)[-2:], c.query.get("dryRun")) for c in env.writes()]
        assert writes == [
            ("PATCH", ["llama", "scale"], "All"), ("PATCH", ["llama", "scale"], None),
            ("PATCH", ["pods", target], "All"), ("PATCH", ["pods", target], None),
            ("PATCH", ["pods", target], "All"), ("PATCH", ["pods", target], None),
            ("PATCH", ["llama", "scale"], "All"), ("PATCH", ["llama", "scale"], None),
        ]
        # the ReplicaSet removed exactly the target (pod-deletion-cost): nothing to restore afterwards
        assert env.emu.deleted == [(NS, target, 60)] and env.deployment()["spec"]["replicas"] == 2
        assert any("drain " + target in n and "done ok" in n for n in notes(app))
        assert app.screen.check_action("restore", ()) is False and app.screen.check_action("cancel_drain", ()) is False
        actions = [e["action"] for e in env.audit.read()]
        assert actions == ["drain", "scale", "cordon", "deletion-cost", "scale", "drain"]
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))


async def test_cancel_while_waiting_puts_the_target_back_in_rotation(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        screen, target, _ = await begin_drain(pilot, env, src)
        await until(pilot, lambda: ("wait-idle", "running") in seq(screen), refresh=True)
        await pilot.press("escape")  # leaving mid-drain is refused: cancel first
        assert app.screen is screen and any("a drain is running" in n for n in notes(app))
        await pilot.press("c")
        await until(pilot, lambda: screen.finished, refresh=True)
        assert seq(screen)[-3:] == [("cancel", "cancelled"), ("uncordon", "ok"), ("scale-down", "ok")]
        assert env.emu.get("pods", NS, target)["metadata"]["labels"]["serving"] == "true"
        assert target not in [name for _, name, _ in env.emu.deleted] and env.deployment()["spec"]["replicas"] == 2
        assert screen.restore is None  # the spare went with the cancel
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))

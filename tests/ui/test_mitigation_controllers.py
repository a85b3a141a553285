"""The keys on workloads another controller owns or that kubectl would refuse (issue 13 defects 7
and 8): the confirm dialog shows the reason and its Confirm button stays disabled, nothing is sent."""

from __future__ import annotations

from textual.widgets import Button, Static

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.kube_app import kube_app, until
from tests.ui.test_mitigation_keys import ready
from tui.screens.confirm import ConfirmScreen
from tui.screens.prompt import PromptScreen


async def refused_dialog(pilot) -> ConfirmScreen:
    dialog = await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen) and pilot.app.screen)
    assert dialog.query_one("#confirm", Button).disabled
    return dialog


async def test_scale_key_on_an_hpa_managed_deployment_says_change_the_hpa(env: Env) -> None:
    env.emu.add({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "llama", "namespace": NS},
                 "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}, "minReplicas": 2, "maxReplicas": 4}})
    env.emu.calls.clear()
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press("3", "enter")
        dialog = await refused_dialog(pilot)
        shown = str(dialog.query_one("#confirm-errors", Static).render())
        assert "managed by HorizontalPodAutoscaler/llama" in shown and "change it there" in shown
        await pilot.press("escape")
    assert env.emu.mutating_calls() == []


async def test_restart_and_roll_back_keys_on_a_paused_deployment_are_refused_like_kubectl(env: Env) -> None:
    d = env.deployment()
    d["spec"]["paused"] = True
    env.emu._update("deployments", env.deployment(), d)
    env.emu.calls.clear()
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        for key in ("r", "ctrl+l"):
            await pilot.press(key)
            dialog = await refused_dialog(pilot)
            assert "is paused: resume it first" in str(dialog.query_one("#confirm-errors", Static).render())
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
    assert env.emu.mutating_calls() == []

"""The mitigation keys are bound only when allowed: --readonly, RBAC denials and replay hide them
(footer and help never lie, a pressed hidden key says why), and the emulator receives no
mutating request while every mitigation key is pressed."""

from __future__ import annotations

from widgets.footer import footer_keys as shown_keys

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.kube_app import Pages, kube_app, notes, select, start, until
from tests.ui.recordings import phases, write_log
from tui.app import KvwatchApp
from tui.core.monitor import Monitor
from tui.core.sources.replay import ReplaySource
from tui.screens.events import EventsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.logs import LogsScreen
from tui.screens.mitigation import NEEDS
from tui.screens.rollout import RolloutScreen

MUTATING_KEYS = {"e": "edit_args", "ctrl+d": "drain", "r": "rollout_restart", "s": "scale", "ctrl+l": "rollback"}


def footer_keys(app) -> set[str]:
    return {k.key for k in shown_keys(app.screen)}


async def prepared(pilot, env: Env, src) -> str:
    pages = Pages(env)
    pods = [p["metadata"]["name"] for p in env.pods()]
    for p in pods:
        pages.set(p, 5, 1)
    env.emu.pod_logs[(NS, pods[0], "vllm", False)] = "INFO KV cache usage 97%\n"
    await start(pilot, src)
    select(pilot, pods[0])
    await pilot.pause()
    return pods[0]


async def test_readonly_hides_every_mitigation_key_and_sends_nothing(env: Env) -> None:
    app, src = kube_app(env, readonly=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await prepared(pilot, env, src)
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        for action in MUTATING_KEYS.values():
            assert screen.check_action(action, ()) is False
        shown = footer_keys(app)
        assert not shown & {"e", "ctrl+d"} and {"z", "l"} <= shown  # reads stay
        for key, action in MUTATING_KEYS.items():
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is screen, key  # nothing opened
            assert any(n.startswith(screen_desc(action)) and "read-only" in n for n in notes(app)), key
        # the read keys still work (and read only)
        loaded = {RolloutScreen: lambda s: s.status is not None, LogsScreen: lambda s: s.logs is not None,
                  EventsScreen: lambda s: bool(s.events)}
        for key, kind in (("z", RolloutScreen), ("l", LogsScreen), ("v", EventsScreen)):
            await pilot.press(key)
            # read: what the screen shows came back from the API server (an error would say so)
            await until(pilot, lambda kind=kind: isinstance(app.screen, kind) and app.screen.error is None
                        and loaded[kind](app.screen), what=lambda: f"{app.screen!r} error {getattr(app.screen, 'error', '')}")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is screen)
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        listed = {action for _, action, _ in help_.rows}
        assert not listed & {"Edit args", "Drain", "Restart", "Scale", "Roll back"} and "Logs" in listed
        assert [(k, why.split(" (")[0]) for k, _, why in help_.hidden] == [("e,ctrl+d,r,s,ctrl+l", "read-only")]
        await pilot.press("escape")
        assert env.emu.mutating_calls() == [] and env.writes() == []


def screen_desc(action: str) -> str:
    from tui.screens.mitigation import DESCRIPTION

    return DESCRIPTION[action] + ":"


async def test_rbac_denials_hide_exactly_the_denied_keys_with_the_reason(env: Env) -> None:
    env.emu.deny("patch", "deployments")
    env.emu.deny("delete", "pods")
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await prepared(pilot, env, src)
        screen = app.screen
        allowed = {a for a in NEEDS if screen.check_action(a, ()) is not False}
        assert allowed == {"rollout_status", "scale", "logs", "events", "describe"}
        await pilot.press("e")
        await pilot.pause()
        assert app.screen is screen and any("RBAC does not allow patch deployments" in n for n in notes(app))
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        hidden = {k: why for k, _, why in help_.hidden}
        assert "patch deployments" in hidden["e,r,ctrl+l"] and "delete pods" in hidden["ctrl+d"]
        assert env.writes() == []


async def test_replay_offers_no_mitigation_key(tmp_path) -> None:
    path = tmp_path / "incident.jsonl"
    write_log(path, phases(10))
    src = ReplaySource.open(path, 1.0)
    app = KvwatchApp(Monitor(src), src.interval, autostart=False, mode="replay")
    async with app.run_test(size=(120, 36)) as pilot:
        app.replay_goto(5)
        await pilot.pause()
        screen = app.screen
        assert all(screen.check_action(a, ()) is False for a in NEEDS)
        assert not footer_keys(app) & {"e", "ctrl+d", "z", "l"}
        await pilot.press("ctrl+d")
        await pilot.pause()
        assert app.screen is screen and any("replay" in n for n in notes(app))

"""The other mitigation keys over the Kubernetes emulator: rollout restart, scale, roll back (with
its args diff), logs (filtered, all lines, --previous), events newest first, the `:` prompt with a
context switch into a production context (typed-name confirmation), and API errors that flash
while the dashboard keeps running."""

from __future__ import annotations

import json

from textual.widgets import Button, Input, Static

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.kube_app import Pages, kube_app, notes, select, start, until
from tui.core.cluster.kube import KubeCluster
from tui.core.sources.kube import ClusterSource
from tui.core.config import Config, ContextProfile
from tui.core.monitor import Monitor
from tui.app import KvwatchApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.events import EventsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.logs import LogsScreen
from tui.screens.prompt import PromptScreen
from tui.screens.rollout import RolloutScreen


async def ready(pilot, env: Env, src) -> str:
    pages = Pages(env)
    pods = [p["metadata"]["name"] for p in env.pods()]
    for p in pods:
        pages.set(p, 5, 1)
    await start(pilot, src)
    select(pilot, pods[0])
    await pilot.pause()
    return pods[0]


async def confirm(pilot) -> ConfirmScreen:
    dialog = await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen) and pilot.app.screen)
    await pilot.press("enter")
    return dialog


async def back_to_fleet(pilot) -> None:
    await pilot.press("escape")
    await until(pilot, lambda: isinstance(pilot.app.screen, FleetScreen))


async def test_restart_scale_rollback_and_an_api_error(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        # rollout restart: the restartedAt annotation, then the rollout view
        await pilot.press("r")
        dialog = await confirm(pilot)
        assert "kubectl.kubernetes.io/restartedAt" in dialog.plan.diff
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        ann = env.deployment()["spec"]["template"]["metadata"].get("annotations") or {}
        assert "kubectl.kubernetes.io/restartedAt" in ann
        await back_to_fleet(pilot)
        # scale: asks for the count, shows 2 -> 3, patches the scale subresource
        await pilot.press("s")
        prompt = await until(pilot, lambda: isinstance(app.screen, PromptScreen) and app.screen)
        assert "now 2" in prompt.detail
        await pilot.press("3", "enter")
        dialog = await confirm(pilot)
        assert dialog.plan.diff == "-replicas: 2\n+replicas: 3"
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        assert env.deployment()["spec"]["replicas"] == 3
        await back_to_fleet(pilot)
        # roll back to the previous revision, with its args diff
        await pilot.press("ctrl+l")
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert dialog.plan.action == "rollback" and "revision" in dialog.plan.summary
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        assert "kubectl.kubernetes.io/restartedAt" not in (env.deployment()["spec"]["template"]["metadata"].get("annotations") or {})
        await back_to_fleet(pilot)
        # an API error is a flash; the dashboard keeps running
        env.emu.fail("PATCH", r"/deployments/llama$", 500, "etcdserver: request timed out")
        await pilot.press("r")
        await confirm(pilot)
        await until(pilot, lambda: any("API server error 500" in n and "etcdserver" in n for n in notes(app)))
        assert isinstance(app.screen, FleetScreen)
        await app.refresh_once()
        assert app.monitor.state.replicas
        actions = [(e["action"], e["result"]["ok"]) for e in env.audit.read()]
        assert actions == [("restart", True), ("scale", True), ("rollback", True), ("restart", False)]
        # scale whose read of the Deployment fails: no prompt opens, so the keys held for it
        # (tui/keyhold.py) are let go at once, not kept from the dashboard for seconds
        env.emu.fail("GET", r"/deployments/llama$", 500, "etcdserver: leader changed", times=1)
        await pilot.press("s")
        await until(pilot, lambda: any("leader changed" in n for n in notes(app)))
        assert not app.keyhold.holding
        assert isinstance(app.screen, FleetScreen)


async def test_logs_and_events(env: Env, monkeypatch) -> None:
    ticks = [0]  # turns of the logs screen's follow timer
    follow = LogsScreen._follow

    def counted(self) -> None:
        ticks[0] += 1
        follow(self)

    monkeypatch.setattr(LogsScreen, "_follow", counted)
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        pod = await ready(pilot, env, src)
        env.emu.pod_logs[(NS, pod, "vllm", False)] = (
            "INFO api server up\nINFO GPU KV cache usage: 99.1%\n"
            "\x1b[31mERROR\x1b[0m torch.OutOfMemoryError: CUDA out of memory [red]x[/red]\n"
        )
        await pilot.press("l")
        logs = await until(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.logs and app.screen)
        # the stats line says "KV cache" but is no trouble: only the OOM is kept
        assert logs.logs.lines == ("ERROR torch.OutOfMemoryError: CUDA out of memory [red]x[/red]",)
        shown = str(logs.query_one("#logs-text", Static).render())
        assert "[red]x[/red]" in shown and "\x1b" not in shown  # literal text, never markup or escapes
        # followed live: a new trouble line shows up by itself; space pauses (and says so)
        key = (NS, pod, "vllm", False)
        env.emu.pod_logs[key] += "WARNING Sequence group 9 is preempted by PreemptionMode.RECOMPUTE\n"
        await until(pilot, lambda: len(logs.logs.lines) == 2)
        await pilot.press("space")
        assert not logs.following and "PAUSED" in str(logs.query_one("#logs-title", Static).render())
        env.emu.pod_logs[key] += "ERROR EngineCore_0 died unexpectedly\n"
        seen = ticks[0]
        await until(pilot, lambda: ticks[0] >= seen + 2)  # the follow timer came round while paused
        await pilot.pause()
        assert len(logs.logs.lines) == 2
        await pilot.press("space")
        await until(pilot, lambda: len(logs.logs.lines) == 3)
        await pilot.press("f")
        await until(pilot, lambda: logs.logs is not None and not logs.logs.filtered)
        assert len(logs.logs.lines) == 5
        await pilot.press("P")  # previous container: none here, said plainly
        await until(pilot, lambda: logs.error is not None)
        assert "no previous (restarted) container" in logs.error
        await back_to_fleet(pilot)
        env.emu.add_event(NS, "Scheduled", "assigned to gpu-node-1", name=pod, ts=env.emu.now - 300)
        env.emu.add_event(NS, "BackOff", "Back-off restarting failed container vllm", name=pod, type="Warning",
                          ts=env.emu.now - 10)
        await pilot.press("v")
        ev = await until(pilot, lambda: isinstance(app.screen, EventsScreen) and app.screen.events and app.screen)
        assert [e.reason for e in ev.events if e.object == f"Pod/{pod}"] == ["BackOff", "Scheduled"]  # newest first
        assert [e.ts for e in ev.events] == sorted((e.ts for e in ev.events), reverse=True)
        await pilot.press("w")
        await pilot.pause()
        assert ev.query_one("DataTable").row_count == 1
        await back_to_fleet(pilot)


def _kubeconfig(path, url: str) -> str:
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "sre", "user": {"token": "s3cr3t-token"}}],
        "contexts": [{"name": "staging", "context": {"cluster": "emu", "user": "sre", "namespace": NS}},
                     {"name": "prod-eu", "context": {"cluster": "emu", "user": "sre", "namespace": NS}}],
        "current-context": "staging",
    }
    path.write_text(json.dumps(cfg))
    return str(path)


async def test_command_prompt_switches_to_a_production_context_that_wants_the_name_typed(env: Env) -> None:
    kc = _kubeconfig(env.tmp / "kubeconfig", str(env.srv.url).rstrip("/"))
    cfg = Config(contexts=(ContextProfile("prod-*", production=True),))
    cluster = KubeCluster.connect(kubeconfig=kc, audit=env.audit, policy_config=cfg, watch_timeout_s=2)
    src = ClusterSource(cluster)
    app = KvwatchApp(Monitor(src), 1.0, autostart=False, config=cfg, context=cluster.context)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        assert not app.production
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*"ctx prod-eu", "enter")
        await until(pilot, lambda: app.monitor.source is not src and app.production, refresh=True)
        new = app.monitor.source.cluster
        assert new.context == "prod-eu" and new.production
        await until(pilot, lambda: app.screen.query_one("FleetTable").row_count == 2, refresh=True)
        await until(pilot, lambda: app.mitigation_gate.perms)
        select(pilot, env.pods()[0]["metadata"]["name"])
        await pilot.press("r")
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert dialog.has_class("-production")
        ok = dialog.query_one("#confirm", Button)
        assert ok.disabled
        dialog.query_one("#confirm-name", Input).focus()
        await pilot.press(*"llam")
        assert ok.disabled
        await pilot.press("a")
        assert not ok.disabled
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
        entry = env.audit.read()[-1]
        assert (entry["context"], entry["action"], entry["result"]["ok"]) == ("prod-eu", "restart", True)
        await back_to_fleet(pilot)
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*"rollout llama", "enter")
        await until(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.status)
        await back_to_fleet(pilot)
        # :ns switches the namespace: another namespace's (no) pods, then back
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*"ns other", "enter")
        await until(pilot, lambda: app.monitor.source.cluster.namespace == "other", refresh=True)
        await until(pilot, lambda: app.screen.query_one("FleetTable").row_count == 0, refresh=True)
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*f"ns {NS}", "enter")
        await until(pilot, lambda: app.screen.query_one("FleetTable").row_count == 2, refresh=True)
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press(*"q", "enter")
        await until(pilot, lambda: app.return_code == 0)  # :q quits


async def test_a_rollout_that_waits_for_gpus_is_reported_stuck(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        env.emu.pod_start = "unschedulable"  # no free GPU for a new pod
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen))
        await pilot.press("3", "enter")
        await confirm(pilot)
        view = await until(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.status
                           and app.screen.status.state == "stuck" and app.screen)
        assert "Insufficient nvidia.com/gpu" in view.status.reason
        shown = str(view.query_one("#rollout-text", Static).render())
        assert "STUCK" in shown and "waiting for GPUs" in shown and "Unschedulable" in shown, shown

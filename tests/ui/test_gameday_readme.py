"""The README's game-day loop, played exactly as written, keys and all, at simulator speed: the
long-prompts pressure -> banner -> enter (evidence) -> t / g -> e, preset "cut max-num-seqs 50%"
-> confirm -> the rollout -> preemptions ~0 and KV off the ceiling, but the queue persists:
`overloaded`, the queue / latency alarm, and the runbook's "scale out to N" with its arithmetic
-> s (pre-filled with N) -> confirm -> the runbook's verification: RECOVERY CONFIRMED.

The fleet is stepped: every refresh of the app advances the simulated fleet and cluster one
scrape interval (10 s, `kvwatch demo --speed 10`), so the whole incident plays in seconds and the
same way every time."""

from __future__ import annotations

import re
from pathlib import Path

from textual.widgets import Input

from tests.gameday import SteppedDemo, SteppedDemoSource
from tests.ui.kube_app import until
from tui.app import KvwatchApp
from tui.core.cluster.audit import AuditLog
from tui.core.monitor import Monitor
from tui.screens.confirm import ConfirmScreen
from tui.screens.detail import DetailScreen
from tui.screens.edit_args import EditArgsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.prompt import PromptScreen
from tui.screens.rollout import RolloutScreen
from tui.screens.triage import TriageScreen
from widgets.header import PressureBanner

README = Path(__file__).resolve().parents[2] / "README.md"


def body(app) -> str:
    return app.screen.body_text


def describe(app) -> str:
    return "; ".join(f"{v.name} {v.verdict} kv={v.metrics.kv_usage} w={v.metrics.waiting}"
                     for v in app.monitor.state.replicas)


def test_the_readme_describes_this_loop():
    text = " ".join(README.read_text().split())
    loop = text[text.index("The game-day loop"):]
    for step in ("wait for the red banner", "`enter`", "`t` triage", "`g` guided runbook", "`e` edit engine args",
                 "cut max-num-seqs 50%", "`s`", "scale out to", "RECOVERY CONFIRMED"):
        assert step in loop, step


async def test_the_readme_game_day_ends_recovered(tmp_path) -> None:
    demo = SteppedDemo("long-prompts", replicas=4, seed=3, audit=AuditLog(tmp_path / "audit.jsonl"))
    app = KvwatchApp(Monitor(SteppedDemoSource(demo)), 1.0, autostart=False)
    seen: dict[str, set[str]] = {}  # replica -> every verdict it was shown with
    async with app.run_test(size=(160, 45)) as pilot:

        async def refreshes(n: int) -> None:
            for _ in range(n):
                await app.refresh_once()
                await pilot.pause()
                for v in app.monitor.state.replicas:
                    seen.setdefault(v.name, set()).add(v.verdict)

        async def refreshed_until(cond, what=lambda: describe(app), limit=400):
            for _ in range(limit):
                got = cond()
                if got:
                    return got
                await refreshes(1)
            raise AssertionError(f"not reached: {what()}")

        await refreshes(2)
        await until(pilot, lambda: app.mitigation_gate.perms or app.mitigation_gate.failed)
        # wait for the red banner
        await refreshed_until(lambda: app.screen.query_one(PressureBanner).has_class("-on")
                              and sum(v.verdict == "kv-pressure" for v in app.monitor.state.replicas) >= 3)
        # `enter` on a pressured replica for the evidence, `t` triage / `g` guided runbook
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TriageScreen))
        await pilot.press("g")
        await until(pilot, lambda: "Guided runbook: KV-cache preemption thrash" in body(app))
        # one model of the replica's capacity: the runbook's cap step shows the planner's figure
        fits = app.screen.plan.suggested_max_num_seqs
        assert fits and "max-num-seqs that fits = " in body(app) and f"-> {fits}" in body(app)
        # `e` edit engine args, preset "cut max-num-seqs 50%"
        await pilot.press("e")
        form = await until(pilot, lambda: isinstance(app.screen, EditArgsScreen) and app.screen.cmd and app.screen)
        await pilot.press("f3")
        await pilot.pause()
        assert form.value_of("max-num-seqs") == "32"
        # confirm the diff, watch the rollout
        await pilot.press("f8")  # review & apply
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        # a cut of max-num-seqs does not shrink the KV pool, but 32 is above what the plan says
        # fits: the preflight says so with the runbook's and the planner's figure, never "ok"
        pf = dialog.plan.preflight
        if fits < 32:
            assert pf.status == "warn" and any(f"max-num-seqs 32 > {fits} that fits" in m for m in pf.messages), pf
        else:
            assert pf.status == "ok", pf
        await pilot.press("enter")
        rollout = await until(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen)
        await refreshed_until(lambda: rollout.status is not None and rollout.status.state == "done",
                              what=lambda: f"{rollout.status}")
        await pilot.press("escape")  # back to the runbook, which follows the workload's new pods
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        # preemptions fall to ~0 and KV leaves the ceiling, but the queue persists: overloaded,
        # never healthy, and the queue / latency alarm is up
        state = await refreshed_until(
            lambda: (s := app.monitor.state).alarms and all(v.verdict == "overloaded" for v in s.replicas) and s)
        assert all((v.metrics.preemptions_per_s or 0) < 0.05 and v.metrics.kv_usage < 0.9 for v in state.replicas)
        assert "QUEUE/LATENCY ALARM" in app.screen.query_one(PressureBanner).render().plain
        # `g`: the runbook names the next step, scale out, with the arithmetic
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, TriageScreen) and "scale out to" in body(app))
        text = body(app)
        assert "Guided runbook: queue over capacity: scale out" in text
        n = int(re.search(r"scale out to (\d+) replicas \(now 4\)", text).group(1))
        assert n > 4 and f"-> {n} replicas (now 4)" in text and "req/s" in text
        assert "raise --max-num-seqs" not in text  # never the opposite remedy in the same view
        # the planner agrees with the table (no preemption at the cap) and with the runbook (no
        # room to raise the cap): it neither predicts preemption at 32 nor suggests more
        plan = app.screen.plan
        assert not any("vLLM preempts" in ln for ln in plan.lines), plan.lines
        assert plan.suggested_max_num_seqs is None or plan.suggested_max_num_seqs <= 32, plan.lines
        # `s`: the scale prompt is pre-filled with the computed count
        await pilot.press("s")
        prompt = await until(pilot, lambda: isinstance(app.screen, PromptScreen) and app.screen)
        assert prompt.query_one(Input).value == str(n)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")
        rollout = await until(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen)
        await refreshes(1)
        assert rollout.status.state == "progressing" and "deadline" not in rollout.status.reason
        await refreshed_until(lambda: rollout.status.state == "done", what=lambda: f"{rollout.status}")
        assert len(demo.fleet.replica_names()) == n
        await pilot.press("escape")
        # the runbook's verification: the queue drains and recovery is confirmed
        await refreshed_until(lambda: isinstance(app.screen, TriageScreen) and "RECOVERY CONFIRMED" in body(app)
                              and not any(v.verdict in ("kv-pressure", "overloaded") for v in app.monitor.state.replicas)
                              and not app.monitor.state.alarms,
                              what=lambda: body(app)[:600] + describe(app), limit=600)
        # confirmed on the evidence it lists: latency compared with the workload's pre-incident
        # baseline (the new pods were born into the incident), no criterion short of its data
        verify = body(app)[body(app).rfind("Verify:"):]
        assert re.search(r"✔ TTFT p95 \S+ s vs \S+ s before the incident", verify), verify
        assert "not yet" not in verify and "…" not in verify, verify
        assert sum("starting" in v for v in seen.values()) >= n  # new pods showed `starting`, never `down`
        assert not any("down" in v for v in seen.values()), seen


async def test_under_kv_pressure_the_gmu_presets_are_greyed_out_and_refused(tmp_path) -> None:
    demo = SteppedDemo("long-prompts", replicas=2, seed=3, audit=AuditLog(tmp_path / "audit.jsonl"))
    app = KvwatchApp(Monitor(SteppedDemoSource(demo)), 1.0, autostart=False)
    async with app.run_test(size=(160, 45)) as pilot:
        for _ in range(15):
            await app.refresh_once()
            await pilot.pause()
        await until(pilot, lambda: app.mitigation_gate.perms or app.mitigation_gate.failed)
        assert app.monitor.state.replicas[0].verdict == "kv-pressure"
        await pilot.press("e")
        form = await until(pilot, lambda: isinstance(app.screen, EditArgsScreen) and app.screen.cmd and app.screen)
        await app.refresh_once()
        await pilot.pause()
        from textual.widgets import Button

        gmu = form.query_one("#preset-gmu-0_7", Button)
        assert gmu.disabled and "shrinks the KV pool" in str(gmu.tooltip)
        assert not form.query_one("#preset-seqs-50", Button).disabled
        before = form.value_of("gpu-memory-utilization")
        await pilot.press("f4")
        await pilot.pause()
        assert form.value_of("gpu-memory-utilization") == before  # refused, said why

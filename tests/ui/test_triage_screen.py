"""Triage view (diagnostics.md steps 2-8) of one replica: live values, pass/fail/missing marks,
what was not fetched, cluster text escaped; the t / g / c keys."""

from __future__ import annotations

from pathlib import Path

from tests.ui.conftest import make_app, prime
from tests.ui.triage_helpers import TriageSource, app_for, open_on, sim_cluster
from tui.screens.detail import DetailScreen
from tui.screens.triage import TriageScreen

PRESSURED = "llama-8b-7d9f-abcde"


def body(app) -> str:
    return app.screen._body.plain


async def test_triage_shows_each_step_with_its_value_and_lists_missing_evidence() -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, PRESSURED, "t")
        scr = app.screen
        assert isinstance(scr, TriageScreen) and scr.mode == "triage" and scr.replica == PRESSURED
        text = body(app)
        # the verdict with each piece of evidence and its value
        assert "Verdict ▲ kv-pressure" in text
        assert "✔ KV usage 0.97 >= 0.90" in text and "✔ waiting 12 >= 1" in text
        # step 3 against the runbook's 85% / 60%
        assert "3 ! warn    GPU memory and utilisation" in text
        assert "✔ GPU memory 92% > 85%" in text and "✔ GPU util 35% < 60%" in text
        # step 8 fails: KV near the ceiling with preemptions
        assert "8 ✗ fail    Batch collapse, preemptions and KV usage" in text
        # no cluster: pod status, logs and events are missing, and said so
        r = scr.report
        assert {i.key: i.status for i in r.items} == {"restarts": "missing", "gpu": "warn", "logs": "missing",
                                                       "shape": "missing", "events": "missing", "metrics": "ok",
                                                       "batch": "bad"}
        missing_line = next(ln for ln in text.splitlines() if ln.startswith("Missing evidence: "))
        for gap in ("pod status not available", "logs not fetched", "events not fetched"):
            assert gap in missing_line
        assert "no cluster: no logs, events or rollouts" in scr._head.plain
        # the values are live: the next refresh redraws with the new history
        before = scr.report.ts
        await app.refresh_once()
        await pilot.pause()
        assert scr.report.ts == before + 5.0


async def test_a_healthy_replica_passes_its_steps() -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, "llama-8b-7d9f-xyz12", "t")
        r = app.screen.report
        assert r.verdict == "healthy"
        assert r.item("batch").status == "ok" and r.item("gpu").status == "ok"
        assert "8 ✔ pass    Batch collapse" in body(app)


async def test_with_a_cluster_logs_and_events_are_fetched_and_escaped(tmp_path: Path) -> None:
    f, c = sim_cluster(tmp_path, "steady")
    await c.sleep(60)
    pods = {p.name: p for p in await c.list_pods()}
    name = sorted(pods)[0]
    # what a hostile or broken container could print: terminal escapes and markup
    with f.lock:
        f._get(name).replica.log.extend([
            "ERROR torch.OutOfMemoryError: CUDA out of memory. [bold red]Tried[/] \x1b]0;pwned\x07",
            "WARNING scheduler.py:1560 Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode because "
            "there is not enough KV cache space. \x1b[31mtotal_num_cumulative_preemption=51\x1b[0m",
        ])
    app = app_for(TriageSource({name: "pressure"}, pods, t0=c.now()), c)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, name, "t")
        scr = app.screen
        assert scr.facts.logs is not None and scr.facts.events is not None
        r = scr.report
        logs = r.item("logs")
        assert logs.status == "bad" and logs.summary == "1 allocation failure(s): CUDA OOM"
        # a CUDA OOM in the logs is a hard failure at step 2 too, pod status notwithstanding
        assert r.item("restarts").status == "bad"
        ev = r.item("events")  # none for a new pod is no data, never a pass
        assert ev.status in ("ok", "warn") or (ev.status == "missing" and "no events returned" in ev.summary)
        assert "logs not fetched" not in " ".join(r.missing)
        text = body(app)
        assert "[bold red]Tried[/]" in text  # markup shown literally, never interpreted
        assert "\x1b" not in text and "\x07" not in text  # the title-setting sequence never reaches the terminal
        assert "CUDA out of memory" in text and "is preempted by" in text
        assert "cluster: logs " in scr._head.plain and "events " in scr._head.plain


async def test_t_g_c_switch_views_and_open_from_the_detail_view() -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, PRESSURED, "enter")
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("c")
        await pilot.pause()
        scr = app.screen
        assert isinstance(scr, TriageScreen) and scr.mode == "capacity" and "Capacity planner" in body(app)
        await pilot.press("g")
        await pilot.pause()
        assert scr.mode == "runbook" and "Guided runbook" in body(app)
        await pilot.press("t")
        await pilot.pause()
        assert scr.mode == "triage" and "Diagnostics steps 2-8" in body(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        # in a replay the seek key is `T`, so triage stays on `t` there too
        fleet = app.screen_stack[1]
        app.mode = "replay"
        try:
            assert app.screen.check_action("triage", ()) is True and fleet.check_action("triage", ()) is True
            bound = {b.key: b.action for b in app.BINDINGS}
            assert bound.get("T") == "replay_seek" and "t" not in bound
        finally:
            app.mode = "live"


async def test_a_replaced_replica_is_followed_to_its_workloads_worst_replica() -> None:
    app = make_app({"old-pod": "pressure", "new-pod-b": "healthy", "new-pod-a": "compute"})
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, "old-pod", "g")
        scr = app.screen
        del app.monitor.source.profiles["old-pod"]
        app.monitor.forget(["old-pod"])  # the pod was deleted (drain, rollout)
        await app.refresh_once()
        await pilot.pause()
        # same group ("grp"): the most severe of the rest
        assert scr.replica == "new-pod-a" and scr.mode == "runbook"
        assert "new-pod-a" in scr._head.plain
        assert any("old-pod is gone" in str(n.message) for n in app._notifications)

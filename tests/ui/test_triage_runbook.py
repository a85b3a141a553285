"""The guided runbook in the UI: each branch of preemption-thrash.md with the key that acts on it.

Deploy in the burn window (rollback offered, with the args diff), node fault (tuning
discouraged, visibly, and `e` asks twice), mitigation steps moved on by what the cluster shows,
and recovery confirmed live.
"""

from __future__ import annotations

from pathlib import Path

from tests.ui.conftest import make_app, prime
from tests.ui.triage_helpers import DEP, TriageSource, app_for, open_on, roll_out, sim_cluster
from tui.core.diagnosis import Thresholds
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit_args import EditArgsScreen
from tui.screens.triage import TriageScreen


def body(app) -> str:
    return app.screen._body.plain


def step_block(text: str, title: str) -> str:
    """The lines of one step: its title line up to the next step's."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if title in ln and ln[1:2].isdigit())
    out = [lines[i]]
    for ln in lines[i + 1:]:
        if ln[:1] in (" ", "▶") and ln[1:3].strip().isdigit():
            break
        out.append(ln)
    return "\n".join(out)


async def test_deploy_in_the_burn_window_offers_the_rollback_key_with_the_diff(tmp_path: Path) -> None:
    f, c = sim_cluster(tmp_path)
    await c.sleep(30)
    await roll_out(c, f.namespace, {"max-num-seqs": 128})  # the deploy: more concurrent sequences
    pods = {p.name: p for p in await c.list_pods()}
    hot, calm = sorted(pods)
    app = app_for(TriageSource({hot: "pressure", calm: "healthy"}, pods, t0=c.now() + 60), c)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 5)
        await open_on(pilot, hot, "g")
        rb = app.screen.book
        assert rb.branch == "rollback" and rb.current == "deploy"
        deploy = step_block(body(app), "Deploy in the burn window?")
        assert deploy.startswith("▶3 ✗ yes")
        assert "args diff of the rollout:" in deploy
        assert "--max-num-seqs: 64 -> 128  (raised: more KV demand)" in deploy
        assert f"ctrl+l  roll back deployment/{DEP}" in deploy
        # the key is the real one: the roll-back plan with its diff, Cancel first
        await pilot.press("ctrl+l")
        for _ in range(50):  # the worker reads the plan, then waits on the dialog it pushes
            await pilot.pause()
            if isinstance(app.screen, ConfirmScreen):
                break
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert dialog.plan.action == "rollback" and dialog.plan.target.name == DEP
        assert "128" in dialog.plan.diff and "64" in dialog.plan.diff
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, TriageScreen)
        assert f.engine_args(hot).max_num_seqs == 128  # cancelled: nothing changed


async def test_a_rollout_that_lowered_the_cap_is_no_suspect_and_counts_as_capped(tmp_path: Path) -> None:
    f, c = sim_cluster(tmp_path)
    await c.sleep(30)
    pods0 = {p.name for p in await c.list_pods()}
    app = app_for(TriageSource({}, {}, t0=c.now()), c)
    app.started_at -= 3600  # kvwatch was watching before the change
    await roll_out(c, f.namespace, {"max-num-seqs": 32})
    pods = {p.name: p for p in await c.list_pods()}
    assert not pods0 & set(pods)
    hot = sorted(pods)[0]
    app.monitor.source.profiles.update({hot: "pressure"})
    app.monitor.source.pods.update(pods)
    app.monitor.source.t = c.now()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 5)
        await open_on(pilot, hot, "g")
        rb = app.screen.book
        assert rb.step("deploy").status == "no"
        assert rb.step("cap").status == "done"
        assert rb.current == "drain"  # cap is done, the drain was not: it is still the step to take
        assert "ctrl+d  cordon + drain" in step_block(body(app), "Cordon and drain")


async def test_node_fault_discourages_tuning_visibly_and_e_asks_twice(tmp_path: Path) -> None:
    f, c = sim_cluster(tmp_path)
    await c.sleep(30)
    pods = {p.name: p for p in await c.list_pods()}
    sick = sorted(pods)[0]
    app = app_for(TriageSource({sick: "fault"}, pods, t0=c.now()), c)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, sick, "g")
        rb = app.screen.book
        assert rb.finding.verdict == "node-fault" and rb.tuning_discouraged and rb.branch == "divert"
        text = body(app)
        assert "⚠ TUNING DISCOURAGED" in text and "do not edit engine args" in text
        node = step_block(text, "Node healthy?")
        assert node.startswith("▶1 ✗ no") and "hw_thermal_slowdown" in node
        assert "ctrl+d  drain the replica off this node" in node  # the key that acts: drain
        for title in ("Cap concurrency", "Add KV headroom"):
            assert "⚠ DISCOURAGED the GPU is sick" in step_block(text, title)
        assert "DISCOURAGED" not in step_block(text, "Cordon and drain")
        # `e` warns instead of opening the form; a second press means it
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, TriageScreen)
        assert any("tuning cannot fix" in str(n.message) or "cannot fix it" in str(n.message)
                   for n in app._notifications)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EditArgsScreen)


async def test_without_a_cluster_the_steps_show_their_keys_as_not_offered() -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 4)
        await open_on(pilot, "llama-8b-7d9f-abcde", "g")
        text = body(app)
        assert "Mitigation keys not offered: no cluster" in text
        assert "ctrl+d cordon + drain: not offered (see above)" in step_block(text, "Cordon and drain")
        assert app.screen.book.step("deploy").status == "unknown"
        assert "rollout history not available" in step_block(text, "Deploy in the burn window?")


async def test_recovery_is_tracked_live_and_confirmed_after_the_window() -> None:
    src = TriageSource({"r0": "recovering", "r1": "healthy"}, recover_after=8, calm_for=14)
    app = app_for(src, thresholds=Thresholds(recovery_window_s=30.0))
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 14 + 6)  # a calm stretch (the latency baseline), then the pressure
        await open_on(pilot, "r0", "g")
        scr = app.screen
        seen, kv_marks = [], []
        for _ in range(12):
            line = next(ln for ln in body(app).splitlines() if ln.startswith("Recovery:"))
            seen.append(line.split()[1])
            kv_marks.append(next(ln.split()[0] for ln in step_block(body(app), "Verify:").splitlines()
                                 if "KV usage <" in ln and ln.split()[0] in "✔…✗?"))
            await app.refresh_once()
            await pilot.pause()
        # pressure, then clean scrapes held for less than the window (KV "…" not yet: no tick
        # before its window), then the window passes (TTFT p95 back once the slow requests leave it)
        assert seen[0] == "NOT" and seen[-1] == "RECOVERY"
        assert "…" in kv_marks and kv_marks == sorted(kv_marks, key="✗…✔".index), kv_marks
        assert all(m == "✔" for m in kv_marks[seen.index("RECOVERY"):])
        v = scr.book.verification
        assert v.confirmed and v.confirmed_at is not None
        assert scr.book.step("verify").status == "met"
        verify = step_block(body(app), "Verify:")
        assert "✔ preemptions ~0" in verify and "✔ KV usage < 0.90" in verify and "✔ waiting drained" in verify
        assert "✔ TTFT p95" in verify and "before the incident" in verify  # latency compared, not assumed


async def test_other_verdicts_name_their_remedy_and_nothing_to_verify() -> None:
    app = make_app({"wedged": "stalled", "capped": "capped", "ok": "healthy"})
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 5)
        await open_on(pilot, "wedged", "g")
        rb = app.screen.book
        assert rb.finding.verdict == "stalled"
        text = body(app)
        assert "Branch: not KV pressure: the preemption-thrash runbook does not apply" in text
        assert "The verdict is stalled: requests in flight but the engine makes no progress" in text
        assert "r restart the workload (drain first if it still serves): not offered (see above)" in text
        assert "Recovery: no KV-pressure breach in the retained history" in text
        assert "act on:" not in text
        assert " 8 · n/a" in step_block(text, "Verify:")
        await pilot.press("escape")
        await open_on(pilot, "capped", "g")
        text = body(app)
        assert "The verdict is concurrency-capped: queue held by the concurrency cap" in text
        assert "e raise --max-num-seqs (KV has headroom): not offered" in text

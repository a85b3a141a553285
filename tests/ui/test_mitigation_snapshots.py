"""Snapshots of the mitigation screens over the stepped simulated cluster (deterministic: fixed
seed and start time, a fixed clock for the drain's timestamps, UTC): the edit form after the 50%
preset, the drain progress once done, and a production confirm dialog."""

from __future__ import annotations

from tests.ui.conftest import make_app as _make_app
from tests.ui.conftest import prime
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.base import ContextPolicy, EditArgsRequest
from tui.core.cluster.sim import SimCluster
from tui.core.config import Config
from tui.core.sim.fleet import SimFleet
from tui.screens.confirm import ConfirmScreen
from tui.screens.drain import DrainScreen
from tui.screens.edit_args import EditArgsScreen

T0 = 1.75e9
DEP = "llama-8b"


def make_app():
    return _make_app(config=Config(bell=False))  # no kv-pressure toast over the screen under test


def sim(tmp_path, scenario: str = "long-prompts", **kw) -> tuple[SimFleet, SimCluster]:
    f = SimFleet(scenario, replicas=2, seed=3, start_time=T0)
    return f, SimCluster(f, audit=AuditLog(tmp_path / "audit.jsonl"), load_delay_s=60, **kw)


async def wait(pilot, cond, turns: int = 400) -> None:
    for _ in range(turns):
        if cond():
            return
        await pilot.pause(0.02)
    raise AssertionError("not ready")


async def edit_form_after_preset(pilot, fleet: SimFleet, cluster: SimCluster) -> EditArgsScreen:
    """The edit form for DEP, loaded, after the 50% preset (f3)."""
    await prime(pilot, 2)
    form = EditArgsScreen(cluster, fleet.namespace, DEP)
    await pilot.app.push_screen(form)
    await wait(pilot, lambda: form.cmd is not None)
    await pilot.press("f3")
    await pilot.pause()
    assert form.changes == {"max-num-seqs": 32}
    return form


def test_edit_form_snapshot(snap_compare, tmp_path):
    fleet, cluster = sim(tmp_path)

    async def run_before(pilot):
        await edit_form_after_preset(pilot, fleet, cluster)

    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=run_before)


def test_drain_progress_snapshot(snap_compare, tmp_path):
    fleet, cluster = sim(tmp_path, scenario="steady")
    target = fleet.replica_names()[0]

    async def run_before(pilot):
        await prime(pilot, 2)
        plan = await cluster.plan_drain(fleet.namespace, target)
        screen = DrainScreen(cluster, plan, lambda: fleet.load(target), clock=lambda: T0, poll_s=2.0)
        await pilot.app.push_screen(screen)
        await wait(pilot, lambda: screen.finished, turns=1500)
        assert [s.step for _, s in screen.rows][-3:] == ["wait-idle", "delete", "done"]
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=run_before)


def test_production_confirm_snapshot(snap_compare, tmp_path):
    fleet, cluster = sim(tmp_path, policy=ContextPolicy(production=True), context="prod-eu")

    async def run_before(pilot):
        await prime(pilot, 2)
        plan = await cluster.plan_edit_args(EditArgsRequest(fleet.namespace, DEP, {}, preset="seqs-50"))
        assert plan.requires_typed_name
        await pilot.app.push_screen(ConfirmScreen(plan, production=cluster.production))
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=run_before)

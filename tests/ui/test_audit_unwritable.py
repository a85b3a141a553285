"""The demo's scale key with an audit log that cannot be written: the change is refused and the
flash says why (the simulated Deployment keeps its replica count)."""

from __future__ import annotations

from textual.widgets import Input

from tests.ui.kube_app import notes, until
from tui.app import KvwatchApp
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.sim import SimCluster
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet
from tui.core.sources.demo import DemoSource
from tui.screens.confirm import ConfirmScreen
from tui.screens.prompt import PromptScreen


async def test_demo_scale_key_is_refused_without_an_audit_log(tmp_path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state directory should be")
    fleet = SimFleet("steady", replicas=2, speed=10.0, seed=1)
    fleet.start()
    try:
        cluster = SimCluster(fleet, audit=AuditLog(blocker / "kvwatch" / "demo-audit.jsonl"))
        app = KvwatchApp(Monitor(DemoSource(cluster)), 0.25)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: len(app.monitor.state.replicas) == 2, timeout=30)
            await pilot.press("s")
            prompt = await until(pilot, lambda: isinstance(app.screen, PromptScreen) and app.screen)
            prompt.query_one(Input).value = "3"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("enter")  # the dialog focuses its body: enter confirms
            await until(pilot, lambda: any("audit log" in n for n in notes(app)), timeout=15,
                        what=lambda: notes(app))
            said = " ".join(notes(app))
            assert "refused" in said and "nothing was sent" in said and "--allow-unaudited" in said, said
            assert len(fleet.replica_names()) == 2
    finally:
        fleet.stop()

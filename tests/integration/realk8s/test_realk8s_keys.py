"""The dashboard's drain key against the real control plane: the fleet watches the real pods,
reads each engine's page directly, and ctrl+d drains one the way the CLI does, with the live
load from the dashboard's own scrapes."""

from __future__ import annotations

from tests.ui.kube_app import select, start, until
from tui.app import KvwatchApp
from tui.core.monitor import Monitor
from tui.core.sources.kube import ClusterSource
from tui.screens.confirm import ConfirmScreen
from tui.screens.drain import DrainScreen

from .common import Cluster, connect, wait_for


async def test_drain_key_drains_a_pod_on_the_real_control_plane(cluster: Cluster, monkeypatch) -> None:
    monkeypatch.setattr(DrainScreen, "POLL_S", 0.5)
    cluster.apply_example("gemma-serving-label")
    cluster.rollout_wait("deployment/gemma")
    pods = wait_for("2 gemma pods", lambda: (p := cluster.live_pods("app=gemma")) and len(p) == 2 and p)
    target = pods[0]
    kc = connect(cluster, watch_timeout_s=5)
    src = ClusterSource(kc, timeout=2.0)
    app = KvwatchApp(Monitor(src), 1.0, autostart=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await start(pilot, src)
        await until(pilot, lambda: pilot.app.screen.query_one("FleetTable").row_count >= 2, refresh=True, timeout=30)
        select(pilot, target)
        await pilot.press("ctrl+d")
        dialog = await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen) and pilot.app.screen, timeout=30)
        assert dialog.plan.action == "drain" and dialog.plan.target.name == target
        assert "mechanism: scale-down" in dialog.plan.diff, dialog.plan.diff
        await pilot.press("enter")  # the dialog focuses its body: enter confirms
        screen = await until(pilot, lambda: isinstance(pilot.app.screen, DrainScreen) and pilot.app.screen, timeout=30)
        await until(pilot, lambda: screen.finished, refresh=True, timeout=120,
                    what=lambda: str([(st.step, st.status, st.message) for _, st in screen.rows][-3:]))
        steps = [(st.step, st.status) for _, st in screen.rows if st.status in ("ok", "failed")]
        assert steps[-1] == ("done", "ok") and ("wait-idle", "ok") in steps, steps
        await src.close()
    wait_for(f"{target} gone", lambda: target not in cluster.live_pods("app=gemma"))
    assert len(wait_for("2 gemma pods", lambda: (p := cluster.live_pods("app=gemma")) and len(p) == 2 and p)) == 2

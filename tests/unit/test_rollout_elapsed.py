"""Right after a scale, the rollout is not "STUCK progress deadline exceeded ... elapsed 24m02s"
(issue 11 item 5): a scale restarts the progress clock, as the Deployment controller does, and
the rollout view counts its elapsed time from the rollout's own start."""

from __future__ import annotations

from pathlib import Path

from tui.core.cluster.audit import AuditLog
from tui.core.cluster.base import EditArgsRequest
from tui.core.cluster.sim import SimCluster
from tui.core.sim.fleet import SimFleet
from tui.screens.rollout import rollout_text

T0 = 1.75e9


async def test_a_scale_long_after_the_last_revision_is_progressing_with_its_own_elapsed(tmp_path: Path) -> None:
    f = SimFleet("long-prompts", replicas=2, seed=3, start_time=T0)
    c = SimCluster(f, audit=AuditLog(tmp_path / "audit.jsonl"), load_delay_s=30)
    ns = f.namespace
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(ns, "llama-8b", {"max-num-seqs": 32})))).ok
    for _ in range(144):  # 24 min on the cut revision (the controllers reconcile every 10 s)
        await c.sleep(10)
    assert (await c.rollout_status(ns, "llama-8b")).state == "done"
    started = c.now()
    assert (await c.apply(await c.plan_scale(ns, "llama-8b", 4))).ok
    await c.sleep(10)
    st = await c.rollout_status(ns, "llama-8b")
    assert st.state == "progressing" and "deadline" not in st.reason
    text = rollout_text(st, "rollout deployment/llama-8b", started_at=started).plain
    assert "elapsed 10s" in text and "24m" not in text
    for _ in range(8):
        await c.sleep(10)
    assert (await c.rollout_status(ns, "llama-8b")).state == "done"

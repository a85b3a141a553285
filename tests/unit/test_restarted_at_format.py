"""`rollout restart` writes kubectl.kubernetes.io/restartedAt as RFC 3339, as kubectl does, in
the simulated cluster (demo) too, not as epoch seconds."""

from __future__ import annotations

import asyncio
import datetime as dt

from tui.core.cluster.audit import AuditLog
from tui.core.cluster.sim import SimCluster
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9


def test_sim_restart_writes_rfc3339(tmp_path):
    fleet = SimFleet("steady", replicas=2, seed=3, start_time=T0)
    cluster = SimCluster(fleet, audit=AuditLog(tmp_path / "audit.jsonl"))
    plan = asyncio.run(cluster.plan_restart(fleet.namespace, "llama-8b"))
    stamp = plan.patch["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
    parsed = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, UTC, like kubectl
    assert abs(parsed.replace(tzinfo=dt.timezone.utc).timestamp() - cluster.now()) < 2

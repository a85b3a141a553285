"""An audit log that cannot be written stops the change (fail closed): `kvwatch scale --yes`
against the emulator and the demo's scale key refuse, say why and send nothing, unless the user
explicitly accepts running unaudited (--allow-unaudited), and then the result says so."""

from __future__ import annotations

from pathlib import Path

from tests.integration.kube_env import Env, env  # noqa: F401,F811 - fixture
from tests.integration.test_kube_action_cli import cli
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.sim import SimCluster
from tui.core.sim.fleet import SimFleet


def _block_state(tmp: Path) -> None:
    # the state directory cannot be created: a plain file stands where it should be (works as root too)
    (tmp / "state").write_text("not a directory")


async def test_scale_refuses_when_the_audit_log_cannot_be_written(env: Env, tmp_path: Path) -> None:
    _block_state(tmp_path)
    rc, doc, err = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--yes")
    assert rc == 1, (doc, err)
    assert doc["refused"] and "audit log" in doc["refused"] and "--allow-unaudited" in doc["refused"], doc
    assert env.emu.mutating_calls() == [] and env.deployment()["spec"]["replicas"] == 2
    # explicitly accepted: the change goes through, and the result says it is unaudited
    rc, doc, err = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--yes", "--allow-unaudited")
    assert rc == 0 and doc["result"]["ok"], (doc, err)
    assert "not recorded in the audit log" in doc["result"]["message"]
    assert env.deployment()["spec"]["replicas"] == 3


async def test_demo_scale_refuses_without_an_audit_log(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    fleet = SimFleet(scenario="steady", replicas=2, speed=1.0, seed=0)
    cluster = SimCluster(fleet, audit=AuditLog(blocker / "audit.jsonl"), load_delay_s=1)
    dep = fleet.namespace
    names = [d for d in cluster._deps] or []
    plan = await cluster.plan_scale(dep, (await cluster.list_pods(dep))[0].owner_name, 3)
    before = plan.data.get("from")
    res = await cluster.apply(plan)
    assert not res.ok and "audit log" in res.message and "nothing was sent" in res.message, res
    assert plan.data.get("from") == before and names == [d for d in cluster._deps]
    ok = SimCluster(fleet, audit=AuditLog(blocker / "audit.jsonl", unaudited_ok=True), load_delay_s=1)
    res = await ok.apply(plan)
    assert res.ok and "not recorded in the audit log" in res.message, res

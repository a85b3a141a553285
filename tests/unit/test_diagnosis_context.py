"""What triage and the runbook fetch from the cluster: logs, events, rollouts, args, mitigations.

Against the demo's simulated cluster (the real `Cluster` implementation the demo runs, stepped):
its edits create real revisions, its pods write vLLM-style logs, its reconcile loop emits events.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tui.core.cluster.audit import AuditLog
from tui.core.cluster.base import EditArgsRequest, EventInfo, ReplicaSetInfo
from tui.core.cluster.facts import (
    applied_from_audit,
    applied_from_rollouts,
    fetch_facts,
    relevant_events,
    rollouts_from_replicasets,
)
from tui.core.cluster.sim import SimCluster
from tui.core.diagnosis.runbook import Rollout, arg_changes
from tui.core.model import PodInfo
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9
DEP = "llama-8b"


def make(tmp_path: Path, scenario: str = "long-prompts") -> tuple[SimFleet, SimCluster]:
    f = SimFleet(scenario, replicas=2, seed=3, start_time=T0)
    return f, SimCluster(f, audit=AuditLog(tmp_path / "audit.jsonl"), load_delay_s=30)


async def edit_and_wait(c: SimCluster, ns: str, changes: dict) -> float:
    plan = await c.plan_edit_args(EditArgsRequest(ns, DEP, changes))
    assert plan.ok, plan.errors
    at = c.now()
    assert (await c.apply(plan)).ok
    for _ in range(60):
        if (await c.rollout_status(ns, DEP)).finished:
            return at
        await c.sleep(5)
    raise AssertionError("rollout did not finish")


async def test_a_rollout_that_raised_max_num_seqs_is_read_with_its_diff(tmp_path: Path) -> None:
    f, c = make(tmp_path)
    await c.sleep(30)
    at = await edit_and_wait(c, f.namespace, {"max-num-seqs": 128})
    await c.sleep(120)  # long prompts arrive: preemptions in the logs
    pod = (await c.list_pods())[0]
    facts = await fetch_facts(c, pod, now=c.now())
    assert facts.problems == ()
    assert facts.args["max-num-seqs"] == 128 and facts.args["max-model-len"] == 8192
    (r,) = facts.rollouts
    assert r.ts == at and r.revision == "2" and r.workload == f"deployment/{DEP}"
    changes = {ch.flag: ch for ch in arg_changes(r.before, r.after)}
    assert set(changes) == {"max-num-seqs"}  # nothing but the edited flag differs
    assert changes["max-num-seqs"].risky and changes["max-num-seqs"].line.startswith("--max-num-seqs: 64 -> 128")
    # V1 logs preemptions only in its periodic INFO stats line, which is no trouble line (the
    # preemption counter is the evidence): the fetched, filtered logs leave it out
    assert facts.logs is not None and not any("Avg prompt throughput" in line for line in facts.logs)
    assert facts.events and all(e.object.split("/", 1)[1].startswith(DEP) for e in facts.events)
    # raising the cap is no mitigation
    assert "edit:max_num_seqs" not in facts.applied


async def test_lowering_the_cap_counts_as_the_runbook_cap_step_from_the_session_start(tmp_path: Path) -> None:
    f, c = make(tmp_path)
    await c.sleep(30)
    at = await edit_and_wait(c, f.namespace, {"max-num-seqs": 32})
    pod = (await c.list_pods())[0]
    wall = 1_000_000.0
    facts = await fetch_facts(c, pod, now=c.now(), wall_now=wall, since_wall=wall - (c.now() - T0))
    assert facts.applied == {"edit:max_num_seqs": at}
    # a session that started after the edit does not count it as this incident's mitigation
    later = await fetch_facts(c, pod, now=c.now(), wall_now=wall, since_wall=wall - 1)
    assert later.applied == {}


def test_applied_from_rollouts_defaults_count_for_absent_flags() -> None:
    cap = Rollout(10.0, "2", {}, {"max-num-seqs": 128})  # absent = the engine default, 256
    head = Rollout(20.0, "3", {"gpu-memory-utilization": 0.85}, {"gpu-memory-utilization": 0.9})
    prefix = Rollout(30.0, "4", {"enable-prefix-caching": False}, {"enable-prefix-caching": True})
    raised = Rollout(40.0, "5", {"max-num-seqs": 64}, {"max-num-seqs": 128})
    assert applied_from_rollouts([cap]) == {"edit:max_num_seqs": 10.0}
    assert applied_from_rollouts([cap, head, prefix, raised]) == {"edit:max_num_seqs": 10.0,
                                                                  "edit:gpu_memory_utilization": 30.0}


def _entry(wall: float, action: str, target: str, ok: bool, message: str, diff: str = "",
           context: str = "demo") -> dict:
    when = dt.datetime.fromtimestamp(wall, dt.timezone.utc).isoformat(timespec="milliseconds")
    return {"time": when, "context": context, "action": action, "target": target, "diff": diff,
            "result": {"ok": ok, "message": message}}


def test_audit_drains_and_scale_outs_on_the_history_clock() -> None:
    pod = PodInfo("inference", "llama-8b-r2-1", owner_kind="Deployment", owner_name=DEP)
    w = 1_000_000.0
    entries = [
        _entry(w + 5, "scale", f"deployment/{DEP} -n inference", True, "scaled to 6", "-replicas: 4\n+replicas: 6"),
        _entry(w + 10, "drain", "pod/llama-8b-0 -n inference", True, "drain started"),
        _entry(w + 11, "scale", f"deployment/{DEP} -n inference", True, "scaled to 7", "-replicas: 6\n+replicas: 7"),
        _entry(w + 40, "drain", "pod/llama-8b-0 -n inference", True, "drain done ok: drained llama-8b-0"),
        _entry(w + 50, "drain", "pod/llama-8b-1 -n inference", True, "drain started"),
        _entry(w + 52, "scale", f"deployment/{DEP} -n inference", True, "scaled to 8", "-replicas: 7\n+replicas: 8"),
        _entry(w + 55, "drain", "pod/llama-8b-1 -n inference", False, "drain cancel cancelled: cancelled"),
        _entry(w + 60, "scale", f"deployment/{DEP} -n inference", True, "scaled to 7", "-replicas: 8\n+replicas: 7"),
        _entry(w + 70, "scale", f"deployment/{DEP} -n inference", False, "forbidden", "-replicas: 7\n+replicas: 9"),
        _entry(w + 90, "scale", "deployment/other -n inference", True, "scaled", "-replicas: 1\n+replicas: 2"),
        _entry(w + 95, "drain", "pod/llama-8b-1 -n inference", True, "drain done ok: x", context="prod"),
    ]
    # the history clock is 500 s ahead of the wall and runs 20x: wall w+100 is history 5000
    got = applied_from_audit(entries, pod, now=5000.0, wall_now=w + 100, speed=20.0, context="demo")
    assert got == {"drain": 5000.0 - 60 * 20, "scale": 5000.0 - 95 * 20}
    assert applied_from_audit(entries, pod, now=5000.0, wall_now=w + 100, speed=20.0, context="demo",
                              not_before=3500.0) == {"drain": 3800.0}


def test_events_about_the_pod_its_workload_and_its_node_only() -> None:
    pod = PodInfo("inference", "llama-8b-0", node="gpu-node-0", owner_kind="Deployment", owner_name=DEP)
    evs = [EventInfo(1.0, "Warning", "BackOff", "Pod/llama-8b-0", "x"),
           EventInfo(2.0, "Normal", "ScalingReplicaSet", f"Deployment/{DEP}", "x"),
           EventInfo(3.0, "Warning", "NodeHasInsufficientMemory", "Node/gpu-node-0", "x"),
           EventInfo(4.0, "Warning", "NodeHasInsufficientMemory", "Node/gpu-node-9", "x"),
           EventInfo(5.0, "Warning", "BackOff", "Pod/llama-70b-0", "x")]
    assert [e.ts for e in relevant_events(evs, pod)] == [1.0, 2.0, 3.0]


def test_replicasets_are_diffed_in_revision_order() -> None:
    def rs(rev: int, line: str, created: float | None = 100.0) -> ReplicaSetInfo:
        return ReplicaSetInfo(f"d-{rev}", rev, 1, 1, 1, (), line, created)

    out = rollouts_from_replicasets([rs(3, "vllm serve m --max-num-seqs 256 --kv-cache-dtype fp8", 300.0),
                                     rs(1, "vllm serve m --max-num-seqs 128", 100.0),
                                     rs(2, "vllm serve m --max-num-seqs 256", 200.0)])
    assert [(r.revision, r.ts) for r in out] == [("2", 200.0), ("3", 300.0)]
    assert out[1].after["kv-cache-dtype"] == "fp8" and "kv-cache-dtype" not in out[1].before
    # one revision, and kvwatch's record of the args before its last edit
    prev = {"name": "vllm", "command": ["vllm", "serve", "m"], "args": ["--max-model-len", "8192"]}
    (r,) = rollouts_from_replicasets([rs(2, "--max-model-len 32768", 50.0)], previous=prev)
    assert (r.before, r.after) == ({"max-model-len": 8192}, {"max-model-len": 32768})
    assert rollouts_from_replicasets([rs(1, "vllm serve m")]) == []
    assert rollouts_from_replicasets([rs(2, "vllm serve m", None)]) == []  # no creation time: not placed


async def test_unreadable_pieces_are_listed_and_the_rest_still_comes(tmp_path: Path) -> None:
    f, c = make(tmp_path, "steady")
    ghost = PodInfo(f.namespace, "llama-8b-ghost", restarts=2)  # no such pod, no owner
    facts = await fetch_facts(c, ghost, now=c.now())
    assert facts.logs is None and facts.rollouts is None and facts.args is None
    assert facts.events == ()  # the namespace's events were read; none are about this pod
    assert any(p.startswith("logs: ") and "not found" in p for p in facts.problems)
    assert any("no Deployment / StatefulSet owner" in p for p in facts.problems)
    # a workload that does not exist: its reads fail on their own
    orphan = PodInfo(f.namespace, "llama-8b-0", owner_kind="Deployment", owner_name="nope")
    facts = await fetch_facts(c, orphan, now=c.now())
    assert facts.logs is not None
    assert any(p.startswith("deployment/nope") for p in facts.problems)
    assert any(p.startswith("rollout history") for p in facts.problems)

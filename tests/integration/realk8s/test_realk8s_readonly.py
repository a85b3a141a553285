"""`--readonly` and a read-only identity against the real API server: its audit log must show
no request but reads from kvwatch (every mitigation command tried, plans and refusals included)."""

from __future__ import annotations

from .common import Cluster, from_kvwatch, wait_for, writes

ACTIONS = (
    ("scale", "deployment/llama", "--replicas", "3", "--yes"),
    ("edit-args", "deployment/llama", "--set", "max-num-seqs=32", "--yes"),
    ("rollout", "restart", "deployment/llama", "--yes"),
    ("rollout", "undo", "deployment/llama", "--yes"),
)


def _ready_llama(c: Cluster) -> str:
    c.apply_example("llama")
    c.rollout_wait("deployment/llama")
    return wait_for("a llama pod", lambda: c.live_pods("app=llama"))[0]


def test_readonly_sends_nothing_but_reads(cluster: Cluster) -> None:
    pod = _ready_llama(cluster)
    mark = cluster.audit_mark()
    for argv in (*ACTIONS, ("drain", pod, "--yes", "--via", "direct")):
        rc, doc, _, err = cluster.kvwatch("--readonly", *argv)
        assert rc == 1 and "read-only" in (doc["refused"] or ""), (argv, doc, err)
        assert doc["requests"] == [], argv
    evs = from_kvwatch(cluster.audit_after(mark))
    assert evs, "the audit log shows kvwatch's reads"  # the plans read the Deployment
    assert writes(evs) == []
    assert cluster.get("deployment", "llama")["spec"]["replicas"] == 2

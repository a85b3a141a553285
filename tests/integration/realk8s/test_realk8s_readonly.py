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


def _not_reviews(w: list[tuple]) -> list[tuple]:
    """Access reviews and SelfSubjectReviews are `create`s that persist nothing."""
    return [x for x in w if not x[1].endswith(("accessreviews", "selfsubjectreviews"))]


def test_viewer_context_is_refused_by_rbac_before_any_write(cluster: Cluster) -> None:
    """The viewer identity (ClusterRole view): kvwatch asks RBAC first and sends no write, not
    even a server-side dry run; with --readonly it sends no review either."""
    pod = _ready_llama(cluster)
    mark = cluster.audit_mark()
    for argv in (*ACTIONS, ("drain", pod, "--yes", "--via", "direct")):
        rc, doc, _, err = cluster.kvwatch("--context", "viewer", *argv)
        why = "has no revision before" if argv[:2] == ("rollout", "undo") else "RBAC does not allow"  # a new Deployment
        assert rc == 1 and why in (doc["refused"] or ""), (argv, doc, err)
        assert doc["requests"] == []
    evs = from_kvwatch(cluster.audit_after(mark))
    assert {e["user"]["username"] for e in evs} == {"viewer"}
    assert _not_reviews(writes(evs)) == [], writes(evs)
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("--context", "viewer", "--readonly", *ACTIONS[0])
    assert rc == 1 and "read-only" in doc["refused"], (doc, err)
    assert writes(from_kvwatch(cluster.audit_after(mark))) == []

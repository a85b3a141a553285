"""`--dry-run --json` lists the exact mutating requests a real run then sends, byte for byte
(method, path with its query, body), against the real API server."""

from __future__ import annotations

import json

from .common import Cluster, from_kvwatch, wait_for, writes


def _same(dry: dict, real: dict) -> None:
    assert dry["requests"], dry
    assert json.dumps(dry["requests"], sort_keys=True) == json.dumps(real["requests"], sort_keys=True), \
        (dry["requests"], real["requests"])


def test_scale_and_edit_args_dry_run_lists_the_requests_sent(cluster: Cluster) -> None:
    cluster.apply_example("llama")
    cluster.rollout_wait("deployment/llama")
    for argv in (("scale", "deployment/llama", "--replicas", "3"),
                 ("edit-args", "deployment/llama", "--set", "max-num-seqs=32")):
        rc, dry, _, err = cluster.kvwatch(*argv, "--dry-run")
        assert rc == 0, err
        mark = cluster.audit_mark()
        rc, real, _, err = cluster.kvwatch(*argv, "--yes")
        assert rc == 0, (real, err)
        _same(dry, real)
        sent = [e["requestURI"] for e in from_kvwatch(cluster.audit_after(mark)) if e["verb"] == "patch" and "dryRun" not in e["requestURI"]]
        assert sent == [r["path"] for r in real["requests"]]  # the recorded paths are the API server's


def test_drain_by_scale_down_dry_run_lists_the_requests_sent(cluster: Cluster) -> None:
    """gemma's Service selects serving=true beside the Deployment's app=gemma: the pod leaves
    rotation by relabelling and is removed by pod-deletion-cost + scale-down."""
    cluster.apply_example("gemma-serving-label")
    cluster.rollout_wait("deployment/gemma")
    target = wait_for("2 gemma pods", lambda: (p := cluster.live_pods("app=gemma")) and len(p) == 2 and p)[0]
    rc, dry, _, err = cluster.kvwatch("drain", target, "--dry-run", "--via", "direct")
    assert rc == 0, err
    assert dry["plan"]["data"]["mechanism"] == "scale-down", dry["plan"]
    cost = [r for r in dry["requests"] if "pod-deletion-cost" in json.dumps(r["body"])]
    assert cost and {"op": "add", "path": "/metadata/annotations/controller.kubernetes.io~1pod-deletion-cost",
                     "value": "-2147483648"} in cost[0]["body"], cost
    mark = cluster.audit_mark()
    rc, real, _, err = cluster.kvwatch("drain", target, "--yes", "--via", "direct", "--poll", "0.5", "--idle-timeout", "60", timeout=180)
    assert rc == 0, (real, err)
    _same(dry, real)
    assert [w for w in writes(from_kvwatch(cluster.audit_after(mark))) if not w[4] and w[0] != "create"] == [
        ("patch", "deployments/scale", "gemma", 200, False),  # the spare first
        ("patch", "pods", target, 200, False),  # out of rotation
        ("patch", "pods", target, 200, False),  # pod-deletion-cost
        ("patch", "deployments/scale", "gemma", 200, False),  # back to 2: the ReplicaSet removes the target
    ]
    wait_for(f"{target} gone", lambda: target not in cluster.live_pods("app=gemma"))

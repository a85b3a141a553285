"""`kvwatch drain` against the real control plane: the real ReplicaSet, EndpointSlice and
disruption controllers decide what happens, and the simulated node's engines serve traffic only
while an EndpointSlice lists them."""

from __future__ import annotations

from .common import Cluster, from_kvwatch, wait_for, writes


def _llama(c: Cluster) -> list[str]:
    c.apply_example("llama")
    c.rollout_wait("deployment/llama")
    return wait_for("2 llama pods", lambda: (p := c.live_pods("app=llama")) and len(p) == 2 and p)


def test_drain_that_cannot_read_the_load_stops_and_keeps_the_pod(cluster: Cluster) -> None:
    """Through the pod proxy (which this API server refuses for loopback pods) every load read
    fails: the drain must not remove the pod as if it were idle."""
    pods = _llama(cluster)
    target = pods[0]
    rc, doc, _, err = cluster.kvwatch("drain", target, "--yes", "--via", "proxy", "--idle-timeout", "6", "--poll", "0.5", timeout=180)
    assert rc == 1, (doc, err)
    steps = [(s["step"], s["status"]) for s in doc["result"]["steps"]]
    assert ("wait-idle", "failed") in steps, steps
    assert "cannot read" in doc["result"]["message"] and "not removed" in doc["result"]["message"], doc["result"]
    pod = cluster.get("pod", target)
    assert not pod["metadata"].get("deletionTimestamp") and pod["metadata"]["labels"].get("app") == "llama"
    wait_for("llama back at 2 replicas", lambda: cluster.get("deployment", "llama")["spec"]["replicas"] == 2)
    assert target in cluster.live_pods("app=llama")


def test_drain_via_direct_before_the_subcommand_is_honoured(cluster: Cluster) -> None:
    pods = _llama(cluster)
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("--via", "direct", "drain", pods[0], "--yes", "--idle-timeout", "60", "--poll", "0.5", timeout=180)
    assert rc == 0, (doc, err)
    evs = from_kvwatch(cluster.audit_after(mark))
    assert not [e for e in evs if "/proxy" in e["requestURI"]], "no pod-proxy request with --via direct"
    assert ("create", "pods/eviction", pods[0], 201, False) in writes(evs) or ("patch", "deployments/scale", "llama", 200, False) in writes(evs)
    wait_for(f"{pods[0]} gone", lambda: pods[0] not in cluster.live_pods("app=llama"))

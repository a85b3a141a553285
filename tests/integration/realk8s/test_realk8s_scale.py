"""`kvwatch scale` on the real controllers: to 0 and back (the ReplicaSet removes and recreates
the pods), and a Deployment an HPA scales is refused before any write."""

from __future__ import annotations

from .common import Cluster, from_kvwatch, wait_for, writes


def test_scale_to_zero_and_back(cluster: Cluster) -> None:
    cluster.apply_example("llama")
    cluster.rollout_wait("deployment/llama")
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("scale", "deployment/llama", "--replicas", "0", "--yes")
    assert rc == 0 and doc["result"]["ok"], (doc, err)
    assert [w for w in writes(from_kvwatch(cluster.audit_after(mark))) if w[0] == "patch"] == [
        ("patch", "deployments/scale", "llama", 200, True), ("patch", "deployments/scale", "llama", 200, False)]
    wait_for("no llama pods", lambda: cluster.live_pods("app=llama") == [] or None)
    rc, doc, _, err = cluster.kvwatch("scale", "deployment/llama", "--replicas", "2", "--yes")
    assert rc == 0 and doc["result"]["ok"], (doc, err)
    cluster.rollout_wait("deployment/llama")
    assert len(cluster.live_pods("app=llama")) == 2


def test_scale_of_an_hpa_managed_deployment_is_refused(cluster: Cluster) -> None:
    cluster.apply_example("qwen-hpa")
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("scale", "deployment/qwen", "--replicas", "3", "--yes")
    assert rc == 1 and "HorizontalPodAutoscaler/qwen" in (doc["refused"] or ""), (doc, err)
    assert writes(from_kvwatch(cluster.audit_after(mark))) == []
    assert cluster.get("deployment", "qwen")["spec"]["replicas"] == 2

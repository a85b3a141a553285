"""Owner awareness against real custom objects: the LeaderWorkerSet, KServe InferenceService and
InferencePool CRDs (tests/integration/realk8s/crds, cut down from the published ones) installed on
the real API server, objects created through them, and kvwatch's plans read the owner chain and
the pools through the API server's custom-resource handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .common import Cluster, from_kvwatch, wait_for, writes

CRDS = Path(__file__).with_name("crds")
ENGINE = {"name": "vllm", "image": "vllm/vllm-openai:v0.10.0", "command": ["vllm", "serve", "m", "--max-num-seqs", "64"],
          "ports": [{"name": "http", "containerPort": 8000}], "resources": {"limits": {"nvidia.com/gpu": "1"}}}


@pytest.fixture(scope="session")
def crds(realk8s: dict[str, str]) -> None:
    import os
    import subprocess

    env = {**os.environ, "KUBECONFIG": realk8s["KUBECONFIG"]}
    kubectl = realk8s["REALK8S_KUBECTL"]
    r = subprocess.run([kubectl, "apply", "-f", str(CRDS)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    subprocess.run([kubectl, "wait", "--for=condition=Established", "--timeout=60s", "crd/leaderworkersets.leaderworkerset.x-k8s.io",
                    "crd/inferenceservices.serving.kserve.io", "crd/inferencepools.inference.networking.k8s.io"],
                   env=env, check=True, capture_output=True, timeout=90)


def _owned(c: Cluster, owner: dict, kind: str, name: str, labels: dict, replicas: int = 1) -> None:
    """A workload whose controller is `owner` (as the operator would have created it)."""
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    spec = {"replicas": replicas, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [ENGINE]}}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    c.apply(json.dumps({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": c.ns, "ownerReferences": [ref]},
                        "spec": spec}))


def _create(c: Cluster, obj: dict) -> dict:
    obj["metadata"]["namespace"] = c.ns
    c.apply(json.dumps(obj))
    return c.get(obj["kind"].lower(), obj["metadata"]["name"])


def test_workloads_owned_by_an_inferenceservice_or_a_leaderworkerset_are_refused(cluster: Cluster, crds: None) -> None:
    isvc = _create(cluster, {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "chat"},
                             "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://m"}}}})
    _owned(cluster, isvc, "Deployment", "chat-predictor", {"app": "chat-predictor"})
    lws = _create(cluster, {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "big"},
                            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [ENGINE]}}}}})
    _owned(cluster, lws, "StatefulSet", "big", {"leaderworkerset.sigs.k8s.io/name": "big"})
    mark = cluster.audit_mark()
    for argv, owner in ((("scale", "deployment/chat-predictor", "--replicas", "2"), "InferenceService/chat"),
                        (("edit-args", "deployment/chat-predictor", "--set", "max-num-seqs=32"), "InferenceService/chat"),
                        (("edit-args", "statefulset/big", "--set", "max-num-seqs=32"), "LeaderWorkerSet/big"),
                        (("scale", "statefulset/big", "--replicas", "2"), "LeaderWorkerSet/big")):
        rc, doc, _, err = cluster.kvwatch(*argv, "--yes")
        assert rc == 1 and f"managed by {owner}" in (doc["refused"] or ""), (argv, doc, err)
    assert writes(from_kvwatch(cluster.audit_after(mark))) == []
    # the drain of an InferenceService's pod starts no spare (the operator would undo it)
    pod = wait_for("the predictor pod", lambda: cluster.live_pods("app=chat-predictor"))[0]
    rc, doc, _, err = cluster.kvwatch("drain", pod, "--dry-run", "--via", "direct")
    assert rc == 0 and not doc["plan"]["data"].get("spare"), (doc, err)
    assert any("managed by InferenceService/chat" in w for w in doc["warnings"]), doc["warnings"]


def test_a_pod_behind_an_inferencepool_leaves_it_by_relabelling(cluster: Cluster, crds: None) -> None:
    """The pool selects pool=chat beside the Deployment's app=pooled: kvwatch finds the pool
    through the API server, takes the pod out of it by that label, and it is not replaced."""
    labels = {"app": "pooled"}
    cluster.apply(json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pooled", "namespace": cluster.ns},
                              "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                                       "template": {"metadata": {"labels": {**labels, "pool": "chat"}}, "spec": {"containers": [ENGINE]}}}}))
    _create(cluster, {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool", "metadata": {"name": "chat"},
                      "spec": {"selector": {"matchLabels": {"pool": "chat"}}, "targetPorts": [{"number": 8000}],
                               "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}}}})
    cluster.rollout_wait("deployment/pooled")
    pod = wait_for("2 pooled pods", lambda: (p := cluster.live_pods("app=pooled")) and len(p) == 2 and p)[0]
    rc, doc, _, err = cluster.kvwatch("drain", pod, "--dry-run", "--via", "direct")
    assert rc == 0, (doc, err)
    assert doc["plan"]["data"]["label"] == "pool" and "InferencePool chat" in doc["plan"]["diff"], doc["plan"]
    assert doc["plan"]["data"]["mechanism"] == "scale-down", doc["plan"]

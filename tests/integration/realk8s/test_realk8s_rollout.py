"""`kvwatch rollout status | restart | undo` beside the bundled kubectl on the same real
Deployment: the same verdict and exit code, plus kvwatch's hint of what kubectl does not say
(a surge pod Pending on Insufficient nvidia.com/gpu)."""

from __future__ import annotations

import json

from .common import Cluster, wait_for

BIG = """apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: llm}
spec:
  replicas: 2
  progressDeadlineSeconds: 600
  selector: {matchLabels: {app: big}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: big}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.0
        command: ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "7"]
        ports: [{name: http, containerPort: 8000}]
        resources: {limits: {nvidia.com/gpu: "7"}}
"""


def _pending_on_gpus(c: Cluster) -> bool:
    for p in c.pods("app=big"):
        for cond in p.get("status", {}).get("conditions") or []:
            if cond.get("reason") == "Unschedulable" and "nvidia.com/gpu" in (cond.get("message") or ""):
                return True
    return False


def test_rollout_status_waiting_for_gpus_exits_as_kubectl_does(cluster: Cluster) -> None:
    """2 x 7 GPUs on a 16-GPU node: the surge pod of a restart cannot be scheduled. The
    Deployment is still Progressing: kubectl --watch=false says "waiting" and exits 0, with
    --timeout it exits 1 when the time is up; kvwatch does the same and names the GPUs."""
    cluster.apply(BIG)
    cluster.rollout_wait("deployment/big")
    rc, doc, _, err = cluster.kvwatch("rollout", "restart", "deployment/big", "--yes")
    assert rc == 0, (doc, err)
    wait_for("the surge pod Pending on GPUs", lambda: _pending_on_gpus(cluster))
    k = cluster.kubectl("rollout", "status", "deployment/big", "-n", cluster.ns, "--watch=false", check=False)
    assert k.returncode == 0 and "1 out of 2 new replicas have been updated" in k.stdout, (k.stdout, k.stderr)
    rc, doc, _, err = cluster.kvwatch("rollout", "status", "deployment/big")
    assert rc == k.returncode, (doc, err)
    assert doc["result"]["state"] == "progressing" and "Insufficient nvidia.com/gpu" in doc["result"]["reason"], doc["result"]
    k = cluster.kubectl("rollout", "status", "deployment/big", "-n", cluster.ns, "--timeout=2s", check=False)
    rc, doc, _, err = cluster.kvwatch("rollout", "status", "deployment/big", "--timeout", "2")
    assert k.returncode == 1 and rc == 1, (k.stderr, doc, err)
    assert "timed out" in doc["result"]["reason"] and "Insufficient nvidia.com/gpu" in doc["result"]["reason"], doc["result"]
    # the progress deadline passes: both call it an error at once
    cluster.kubectl("patch", "deployment/big", "-n", cluster.ns, "-p", json.dumps({"spec": {"progressDeadlineSeconds": 1}}))
    wait_for("ProgressDeadlineExceeded", lambda: any(
        c.get("reason") == "ProgressDeadlineExceeded" for c in cluster.get("deployment", "big").get("status", {}).get("conditions", [])))
    k = cluster.kubectl("rollout", "status", "deployment/big", "-n", cluster.ns, "--watch=false", check=False)
    rc, doc, _, err = cluster.kvwatch("rollout", "status", "deployment/big")
    assert k.returncode == 1 and "exceeded its progress deadline" in k.stderr, k.stderr
    assert rc == 1 and "progress deadline exceeded" in doc["result"]["reason"], doc["result"]


def _status_both(c: Cluster, target: str) -> tuple[tuple[int, str], tuple[int, dict]]:
    k = c.kubectl("rollout", "status", target, "-n", c.ns, "--timeout=90s", check=False, timeout=150)
    rc, doc, _, err = c.kvwatch("rollout", "status", target, "--timeout", "90", timeout=150)
    assert doc is not None, err
    return (k.returncode, k.stdout), (rc, doc["result"])


def test_restart_and_undo_agree_with_kubectl(cluster: Cluster) -> None:
    cluster.apply_example("llama")
    cluster.rollout_wait("deployment/llama")
    rev1 = cluster.get("deployment", "llama")["spec"]["template"]
    # edit-args: a new revision with the new value, kvwatch's annotations on it
    rc, doc, _, err = cluster.kvwatch("edit-args", "deployment/llama", "--set", "max-num-seqs=32", "--yes")
    assert rc == 0, (doc, err)
    assert "-" in doc["plan"]["diff"] and "32" in doc["plan"]["diff"]
    (krc, kout), (rc, res) = _status_both(cluster, "deployment/llama")
    assert krc == rc == 0 and "successfully rolled out" in kout and res["state"] == "done", (kout, res)
    cmd = cluster.get("deployment", "llama")["spec"]["template"]["spec"]["containers"][0]["command"]
    assert cmd[cmd.index("--max-num-seqs") + 1] == "32"
    # rollout restart: kubectl's own restartedAt annotation, a new ReplicaSet
    rc, doc, _, err = cluster.kvwatch("rollout", "restart", "deployment/llama", "--yes")
    assert rc == 0, (doc, err)
    ann = cluster.get("deployment", "llama")["spec"]["template"]["metadata"].get("annotations") or {}
    assert "kubectl.kubernetes.io/restartedAt" in ann, ann
    (krc, kout), (rc, res) = _status_both(cluster, "deployment/llama")
    assert krc == rc == 0 and res["state"] == "done" and res["updated"] == res["desired"] == 2
    # rollout undo: back to the revision before the restart (kubectl's meaning of undo)
    hist = cluster.kubectl("rollout", "history", "deployment/llama", "-n", cluster.ns).stdout
    rc, doc, _, err = cluster.kvwatch("rollout", "undo", "deployment/llama", "--yes")
    assert rc == 0, (doc, err, hist)
    now = cluster.get("deployment", "llama")["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" not in ((now["metadata"].get("annotations")) or {}), now
    assert now["spec"]["containers"][0]["command"] == cmd  # the edit is kept, the restart undone
    (krc, kout), (rc, res) = _status_both(cluster, "deployment/llama")
    assert krc == rc == 0 and res["state"] == "done"
    assert rev1["spec"]["containers"][0]["command"] != cmd

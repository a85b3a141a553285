"""StatefulSet and DaemonSet rollout status as `kubectl rollout status` computes it
(kubectl/pkg/polymorphichelpers/rollout_status.go), from literal API objects."""

from __future__ import annotations

from typing import Any

from tui.core.cluster.rollout import daemonset_rollout, statefulset_rollout


def sts(replicas: int = 3, *, strategy: dict | None = None, policy: str | None = None, gen: int = 2, observed: int = 2, **status: Any) -> dict:
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": "q"}}, "template": {"spec": {"containers": []}},
                            "updateStrategy": strategy or {"type": "RollingUpdate"}}
    if policy:
        spec["podManagementPolicy"] = policy
    st = {"observedGeneration": observed, "replicas": replicas, "readyReplicas": replicas, "currentRevision": "q-1", "updateRevision": "q-2",
          "updatedReplicas": 0, "currentReplicas": replicas, **status}
    return {"metadata": {"name": "q", "namespace": "s", "generation": gen}, "spec": spec, "status": st}


def pod(i: int, rev: str, ready: bool = True) -> dict:
    return {"metadata": {"name": f"q-{i}", "labels": {"controller-revision-hash": rev}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_statefulset_spec_not_observed_and_pods_not_ready() -> None:
    assert statefulset_rollout(sts(gen=3, observed=2), []).state == "progressing"
    st = statefulset_rollout(sts(readyReplicas=2, updateRevision="q-1"), [pod(0, "q-1"), pod(1, "q-1"), pod(2, "q-1")])
    assert st.state == "progressing" and st.reason == "waiting for 1 pods to be ready"


def test_statefulset_partition_counts_only_the_pods_above_it() -> None:
    part = {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
    pods = [pod(0, "q-1"), pod(1, "q-2"), pod(2, "q-2")]
    assert statefulset_rollout(sts(strategy=part, updatedReplicas=1), pods).state == "progressing"
    done = statefulset_rollout(sts(strategy=part, updatedReplicas=2), pods)
    assert done.state == "done" and done.reason == "partitioned roll out complete: 2 new pods have been updated"


def test_statefulset_rolling_update_without_partition_waits_for_the_revisions_to_meet() -> None:
    pods = [pod(0, "q-2"), pod(1, "q-2"), pod(2, "q-2")]
    assert statefulset_rollout(sts(updatedReplicas=2), pods).state == "progressing"
    done = statefulset_rollout(sts(updatedReplicas=3, currentRevision="q-2", currentReplicas=3), pods)
    assert done.state == "done" and "complete 3 pods at revision q-2" in done.reason


def test_statefulset_on_delete_names_the_pods_to_delete() -> None:
    ondelete = {"type": "OnDelete"}
    st = statefulset_rollout(sts(strategy=ondelete), [pod(0, "q-2"), pod(1, "q-1"), pod(2, "q-1")])
    assert st.state == "stuck" and "q-1, q-2 keep the old revision until deleted" in st.reason
    assert statefulset_rollout(sts(strategy=ondelete), [pod(i, "q-2") for i in range(3)]).state == "done"


def test_ordered_ready_stuck_pod_is_named_but_parallel_is_not() -> None:
    pods = [pod(0, "q-1"), pod(1, "q-1", ready=False), pod(2, "q-2")]
    st = statefulset_rollout(sts(readyReplicas=2), pods)
    assert st.state == "stuck" and "kubectl delete pod q-1" in st.reason
    par = statefulset_rollout(sts(readyReplicas=2, policy="Parallel"), pods)
    assert par.state == "progressing"


def ds(desired: int = 3, updated: int = 3, available: int = 3, *, strategy: str = "RollingUpdate", gen: int = 1, observed: int = 1) -> dict:
    return {"metadata": {"name": "d", "namespace": "s", "generation": gen}, "spec": {"updateStrategy": {"type": strategy}, "template": {"spec": {}}},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired, "updatedNumberScheduled": updated, "numberAvailable": available}}


def test_daemonset_rollout_like_kubectl() -> None:
    assert daemonset_rollout(ds(gen=2)).state == "progressing"
    assert daemonset_rollout(ds(updated=1)).reason == "1 out of 3 new pods have been updated"
    assert daemonset_rollout(ds(available=2)).reason == "2 of 3 updated pods are available"
    assert daemonset_rollout(ds()).state == "done"
    assert daemonset_rollout(ds(strategy="OnDelete")).state == "unknown"


def test_kubectl_verdict_waits_on_a_gpu_hint_and_errors_past_the_deadline() -> None:
    from tui.core.cluster.rollout import kubectl_verdict
    from tui.core.cluster.values import RolloutStatus

    class Cond:
        def __init__(self, type: str, reason: str) -> None:
            self.type, self.reason = type, reason

    def st(state: str, reason: str = "", conds: tuple = ()) -> RolloutStatus:
        return RolloutStatus(state, reason, 2, 1, 2, 2, 2, 2, 2, None, (), None, conds)

    assert kubectl_verdict(st("stuck", "1/2 updated; waiting for GPUs: Insufficient nvidia.com/gpu",
                              (Cond("Progressing", "ReplicaSetUpdated"),))) == "waiting"
    assert kubectl_verdict(st("stuck", "progress deadline exceeded", (Cond("Progressing", "ProgressDeadlineExceeded"),))) == "error"
    assert kubectl_verdict(st("done")) == "done"
    assert kubectl_verdict(st("unknown", "only RollingUpdate")) == "error"

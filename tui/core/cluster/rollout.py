"""Rollout status of StatefulSets and DaemonSets as `kubectl rollout status` computes it (pure),
plus what kubectl does not say: which pod an OrderedReady StatefulSet is stuck on.

kubectl/pkg/polymorphichelpers/rollout_status.go (StatefulSetStatusViewer, DaemonSetStatusViewer)
is followed step by step; Deployments are in `plans.compute_rollout`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .convert import deployment_info, pending_reason, pod_ref
from .values import ReplicaSetInfo, RolloutStatus

STS_REVISION_LABEL = "controller-revision-hash"


def _status(state: str, reason: str, info: Any, rs: ReplicaSetInfo | None = None) -> RolloutStatus:
    return RolloutStatus(state, reason, info.replicas, info.updated, info.ready, info.available, info.current,
                         info.generation, info.observed_generation, rs, (), None, info.conditions)


def _ready(p: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (p.get("status") or {}).get("conditions") or [])


def statefulset_rollout(sts: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> RolloutStatus:
    info = deployment_info(sts, "StatefulSet")
    spec, st = sts.get("spec") or {}, sts.get("status") or {}
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("updateStrategy") or {}
    update_rev = str(st.get("updateRevision") or "")
    refs = tuple(pod_ref(p) for p in pods)
    rs = ReplicaSetInfo(update_rev, 0, info.replicas, info.ready, info.available, refs)
    def out(state: str, reason: str) -> RolloutStatus:
        return _status(state, reason, info, rs)
    old = sorted((p for p in pods if (p.get("metadata", {}).get("labels") or {}).get(STS_REVISION_LABEL) != update_rev
                  and not (p.get("metadata") or {}).get("deletionTimestamp")), key=lambda p: str(p["metadata"]["name"]))
    # rollout_status.go: "rollout status is only available for RollingUpdate strategy type"
    if strategy.get("type") == "OnDelete":
        if old and update_rev:
            names = ", ".join(p["metadata"]["name"] for p in old)
            return out("stuck", f"updateStrategy OnDelete: {names} keep the old revision until deleted (kubectl delete pod {old[0]['metadata']['name']})")
        return out("done", f"updateStrategy OnDelete: all {replicas} pods at revision {update_rev}")
    # rollout_status.go: ObservedGeneration == 0 || Generation > ObservedGeneration
    if not st.get("observedGeneration") or info.generation > info.observed_generation:
        return out("progressing", "waiting for the StatefulSet spec update to be observed")
    pending = [r for r in (pending_reason(p) for p in pods) if r]
    # what kubectl cannot say: under OrderedReady the controller waits for a broken pod at an old
    # revision to become Ready before replacing it, which it never will (docs: "Forced rollback")
    if spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady":
        stuck = [p for p in old if not _ready(p)]
        if stuck and update_rev:
            n = stuck[0]["metadata"]["name"]
            return out("stuck", f"{n} is not ready at an old revision; under OrderedReady the StatefulSet will not replace it: "
                                f"delete it by hand (kubectl delete pod {n}) so it is recreated at {update_rev}")
    if st.get("readyReplicas", 0) < replicas:
        if pending:
            return out("stuck", f"pods cannot be scheduled: {pending[0]}")
        return out("progressing", f"waiting for {replicas - int(st.get('readyReplicas') or 0)} pods to be ready")
    ru = strategy.get("rollingUpdate")
    if ru is not None:
        if ru.get("partition") is not None:
            want = replicas - int(ru["partition"])
            if int(st.get("updatedReplicas") or 0) < want:
                return out("progressing", f"waiting for partitioned roll out to finish: {st.get('updatedReplicas') or 0} out of {want} new pods have been updated")
        return out("done", f"partitioned roll out complete: {st.get('updatedReplicas') or 0} new pods have been updated")
    if st.get("updateRevision") != st.get("currentRevision"):
        return out("progressing", f"waiting for statefulset rolling update to complete {st.get('updatedReplicas') or 0} pods at revision {update_rev}")
    return out("done", f"statefulset rolling update complete {st.get('currentReplicas') or info.ready} pods at revision {st.get('currentRevision')}")


def daemonset_rollout(ds: Mapping[str, Any]) -> RolloutStatus:
    info = deployment_info(ds, "DaemonSet")
    spec, st = ds.get("spec") or {}, ds.get("status") or {}
    def out(state: str, reason: str) -> RolloutStatus:
        return _status(state, reason, info)
    if (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") != "RollingUpdate":
        return out("unknown", "rollout status is only available for the RollingUpdate strategy type (kubectl)")
    if info.generation > int(st.get("observedGeneration") or 0):
        return out("progressing", "waiting for the DaemonSet spec update to be observed")
    desired = int(st.get("desiredNumberScheduled") or 0)
    updated = int(st.get("updatedNumberScheduled") or 0)
    available = int(st.get("numberAvailable") or 0)
    if updated < desired:
        return out("progressing", f"{updated} out of {desired} new pods have been updated")
    if available < desired:
        return out("progressing", f"{available} of {desired} updated pods are available")
    return out("done", f"daemon set successfully rolled out ({desired} pods)")


def kubectl_verdict(st: RolloutStatus) -> str:
    """What `kubectl rollout status` makes of this state: "done" (exit 0), "error" (it exits 1 at
    once: the progress deadline passed, or no rollout status for this strategy) or "waiting" (it
    keeps waiting; with --watch=false it exits 0). kvwatch's own "stuck" (Pending pods waiting
    for GPUs while the Deployment is still Progressing) is a hint, not an end: kubectl waits."""
    if st.state == "done":
        return "done"
    if any(c.type == "Progressing" and c.reason == "ProgressDeadlineExceeded" for c in st.conditions or ()):
        return "error"
    if st.state == "unknown" or st.reason.startswith("updateStrategy OnDelete"):
        return "error"
    return "waiting"

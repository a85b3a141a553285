"""The StatefulSet controller and the claim (release/adopt) rule every pod controller follows."""

from __future__ import annotations

import copy
import hashlib
import json

from .common import controller_of, is_active, is_ready, owner_ref, selector_match

REVISION_LABEL = "controller-revision-hash"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


class StatefulSetMixin:
    def _claim_pods(self, owner: dict) -> list[dict]:
        """The owner's active pods after releasing those its selector no longer matches and adopting orphans it does."""
        # k8s.io/kubernetes pkg/controller/controller_ref_manager.go ClaimPods: release on selector mismatch, adopt matching orphans
        meta, sel = owner["metadata"], owner["spec"]["selector"]
        ns, uid = meta["namespace"], meta["uid"]
        out = []
        for pod in self.items("pods", ns):
            ref, labels = controller_of(pod), pod["metadata"].get("labels") or {}
            if ref and ref.get("uid") == uid:
                if not selector_match(sel, labels):
                    pod["metadata"]["ownerReferences"] = [r for r in pod["metadata"]["ownerReferences"] if r.get("uid") != uid]
                    self._write("pods", pod, "MODIFIED")
                    continue
            elif ref is None and is_active(pod) and selector_match(sel, labels) and not meta.get("deletionTimestamp"):
                pod["metadata"].setdefault("ownerReferences", []).append(owner_ref(owner))
                pod = self._write("pods", pod, "MODIFIED")
            else:
                continue
            if is_active(pod):
                out.append(pod)
        return out

    def _sts_revision(self, sts: dict) -> str:
        h = hashlib.sha256(json.dumps(sts["spec"]["template"], sort_keys=True).encode()).hexdigest()[:10]
        return f"{sts['metadata']['name']}-{h}"

    def _sts_pod(self, sts: dict, ordinal: int, revision: str) -> dict:
        meta = sts["metadata"]
        t = copy.deepcopy(self._sts_templates[(meta["namespace"], meta["name"], revision)])
        name = f"{meta['name']}-{ordinal}"  # pkg/controller/statefulset/stateful_set_utils.go getPodName: "<set>-<ordinal>"
        labels = dict((t.get("metadata") or {}).get("labels") or {})
        labels.update({REVISION_LABEL: revision, POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels, "annotations": dict((t.get("metadata") or {}).get("annotations") or {}), "ownerReferences": [owner_ref(sts)]},
            "spec": copy.deepcopy(t.get("spec") or {}),
        }
        if self.pod_start != "unschedulable":
            pod["spec"]["nodeName"] = "gpu-node-1"
        pod["status"] = self._pod_status(pod, self.pod_start)
        return pod

    def _reconcile_sts(self, sts: dict) -> bool:
        # pkg/controller/statefulset/stateful_set_control.go updateStatefulSet (one step per pass, like one sync)
        meta, spec = sts["metadata"], sts["spec"]
        ns = meta["namespace"]
        update_rev = self._sts_revision(sts)
        self._sts_templates[(ns, meta["name"], update_rev)] = copy.deepcopy(spec["template"])
        status = dict(sts.get("status") or {})
        current_rev = status.get("currentRevision") or update_rev
        replicas = spec.get("replicas", 1)
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        strategy = spec.get("updateStrategy") or {}
        if not strategy.get("type"):
            # k8s.io/kubernetes pkg/apis/apps/v1/defaults.go SetDefaults_StatefulSet: no type -> RollingUpdate, partition 0
            strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, **(strategy.get("rollingUpdate") or {})}}
        partition = ((strategy.get("rollingUpdate") or {}).get("partition")) or 0
        pods = {int(p["metadata"]["name"].rsplit("-", 1)[1]): p for p in self._claim_pods(sts) if p["metadata"]["name"].rsplit("-", 1)[-1].isdigit()}
        terminating = [p for p in self.items("pods", ns) if p["metadata"]["name"].startswith(meta["name"] + "-") and p["metadata"].get("deletionTimestamp")]
        changed = False
        healthy = all(is_ready(p) for p in pods.values()) and not terminating
        for i in range(replicas):
            if i in pods:
                continue
            if ordered and not healthy:  # OrderedReady: every lower ordinal Running and Ready first
                break
            if self.get("pods", ns, f"{meta['name']}-{i}") is not None:
                continue  # a terminating or released pod still holds the name: the create would be AlreadyExists
            # stateful_set_utils.go newVersionedStatefulSetPod: ordinals below the partition (or, without rollingUpdate,
            # below status.currentReplicas) keep the current revision
            ru = strategy.get("rollingUpdate")
            keep = (strategy["type"] == "RollingUpdate" and ru is None and i < status.get("currentReplicas", 0)) or (ru is not None and i < partition)
            rev = current_rev if keep else update_rev
            self._create("pods", ns, self._sts_pod(sts, i, rev), reconcile=False)
            changed = True
            if ordered:  # OrderedReady: one pod at a time, each Running and Ready before the next
                break
        if not changed:
            condemned = sorted((i for i in pods if i >= replicas), reverse=True)
            for i in condemned:
                if ordered and not healthy:
                    break
                self._delete("pods", pods.pop(i), None)
                changed = True
                if ordered:
                    break
        if not changed and strategy["type"] == "RollingUpdate" and healthy:
            # RollingUpdate: from the highest ordinal down to the partition, one pod at a time; OnDelete never deletes
            for i in sorted((i for i in pods if partition <= i < replicas), reverse=True):
                if pods[i]["metadata"]["labels"].get(REVISION_LABEL) != update_rev:
                    self._delete("pods", pods.pop(i), None)
                    changed = True
                    break
        active = [p for p in self._claim_pods(sts)]
        ready = sum(1 for p in active if is_ready(p))
        updated = sum(1 for p in active if p["metadata"]["labels"].get(REVISION_LABEL) == update_rev)
        current = sum(1 for p in active if p["metadata"]["labels"].get(REVISION_LABEL) == current_rev)
        new_status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(active),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": current,
            "updatedReplicas": updated,
            "currentRevision": current_rev,
            "updateRevision": update_rev,
            "collisionCount": 0,
        }
        # stateful_set_control.go completeRollingUpdate: RollingUpdate with every replica updated and ready
        if strategy["type"] == "RollingUpdate" and updated == len(active) == replicas and ready == replicas:
            new_status["currentRevision"], new_status["currentReplicas"] = update_rev, updated
        cur = self.get("statefulsets", ns, meta["name"])
        if cur is not None and cur.get("status") != new_status:
            cur["status"] = new_status
            self._write("statefulsets", cur, "MODIFIED")
        return changed

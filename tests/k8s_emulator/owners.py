"""Controllers above the workloads: the HPA, a LeaderWorkerSet and a KServe InferenceService.
Each re-applies what it owns, so a direct change to the owned object is undone on its next sync."""

from __future__ import annotations

import copy

from .common import PLURAL, controller_of, owner_ref

HPA_SYNC_S = 15.0  # kube-controller-manager --horizontal-pod-autoscaler-sync-period default 15s
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
ISVC_LABEL = "serving.kserve.io/inferenceservice"


class OwnersMixin:
    def _reconcile_hpas(self) -> None:
        for hpa in self.items("horizontalpodautoscalers"):
            # a new HPA syncs at once (its informer enqueues it), then every sync period
            uid = hpa["metadata"]["uid"]
            if self.now - self._hpa_synced.get(uid, float("-inf")) < HPA_SYNC_S:
                continue
            self._hpa_synced[uid] = self.now
            ns, spec = hpa["metadata"]["namespace"], hpa["spec"]
            ref = spec["scaleTargetRef"]
            target = self.get(PLURAL.get(ref["kind"], ""), ns, ref["name"]) if ref["kind"] in PLURAL else None
            if target is None:
                continue
            current = target["spec"].get("replicas", 1)
            lo, hi = spec.get("minReplicas", 1), spec["maxReplicas"]
            st = dict(hpa.get("status") or {})
            # k8s.io/kubernetes pkg/controller/podautoscaler/horizontal.go reconcileAutoscaler: replicas 0 with minReplicas != 0 disables scaling
            if current == 0 and lo != 0:
                continue
            # the metrics recommendation is modelled as the HPA's last desired count, clamped to [min, max]
            desired = max(lo, min(hi, st.get("desiredReplicas", current)))
            if desired != current:
                target["spec"]["replicas"] = desired
                target["metadata"]["generation"] = target["metadata"].get("generation", 1) + 1
                self._write(PLURAL[ref["kind"]], target, "MODIFIED")
                st["lastScaleTime"] = self._stamp()
            st.update({"currentReplicas": current, "desiredReplicas": desired})
            if hpa.get("status") != st:
                hpa["status"] = st
                self._write("horizontalpodautoscalers", hpa, "MODIFIED")

    def recommend(self, ns: str, hpa: str, replicas: int) -> None:
        """What the HPA's metrics would ask for; applied on its next sync."""
        obj = self.get("horizontalpodautoscalers", ns, hpa)
        assert obj is not None, hpa
        obj.setdefault("status", {})["desiredReplicas"] = replicas
        self._write("horizontalpodautoscalers", obj, "MODIFIED")

    def _apply_owned(self, owner: dict, plural: str, name: str, spec: dict, labels: dict) -> bool:
        """Create or re-apply an owned object's spec (template, replicas) as the owner's controller does."""
        ns = owner["metadata"]["namespace"]
        cur = self.get(plural, ns, name)
        if cur is None:
            obj = {"metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner_ref(owner)]}, "spec": copy.deepcopy(spec)}
            self._create(plural, ns, obj, reconcile=False)
            return True
        ref = controller_of(cur)
        if not ref or ref.get("uid") != owner["metadata"]["uid"]:
            return False
        drift = {k: v for k, v in spec.items() if cur["spec"].get(k) != v}
        if not drift:
            return False
        cur["spec"].update(copy.deepcopy(drift))
        cur["metadata"]["generation"] = cur["metadata"].get("generation", 1) + 1
        self._write(plural, cur, "MODIFIED")
        return True

    def _reconcile_lws(self, lws: dict) -> bool:
        # LeaderWorkerSet (kubernetes-sigs/lws): a leader StatefulSet named after the LWS, replicas = spec.replicas;
        # worker StatefulSets "<lws>-<i>" (owned by each leader pod) are not modelled
        meta, spec = lws["metadata"], lws["spec"]
        tpl = spec["leaderWorkerTemplate"]
        template = copy.deepcopy(tpl.get("leaderTemplate") or tpl["workerTemplate"])
        template.setdefault("metadata", {}).setdefault("labels", {})[LWS_NAME] = meta["name"]
        want = {"replicas": spec.get("replicas", 1), "selector": {"matchLabels": {LWS_NAME: meta["name"]}}, "template": template}
        return self._apply_owned(lws, "statefulsets", meta["name"], want, {LWS_NAME: meta["name"]})

    def _reconcile_isvc(self, isvc: dict) -> bool:
        # KServe RawDeployment mode: the predictor runs as Deployment "<isvc>-predictor" owned by the InferenceService
        meta, pred = isvc["metadata"], isvc["spec"]["predictor"]
        name = f"{meta['name']}-predictor"
        labels = {ISVC_LABEL: meta["name"], "app": f"isvc.{name}"}
        template = {"metadata": {"labels": labels}, "spec": {"containers": copy.deepcopy(pred.get("containers") or [])}}
        want = {"replicas": pred.get("minReplicas", 1), "selector": {"matchLabels": {"app": f"isvc.{name}"}}, "template": template}
        return self._apply_owned(isvc, "deployments", name, want, labels)

    def _reconcile_owners(self) -> bool:
        changed = False
        for lws in self.items("leaderworkersets"):
            changed |= self._reconcile_lws(lws)
        for isvc in self.items("inferenceservices"):
            changed |= self._reconcile_isvc(isvc)
        return changed

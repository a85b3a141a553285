"""PodDisruptionBudgets (the disruption controller's status) and the Eviction subresource."""

from __future__ import annotations

from typing import Any

from kmock._internal import rendering

from .common import _resolve_int_or_percent, controller_of, err, is_ready, selector_match

EVICTION_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."


class PolicyMixin:
    """Mixed into KubeEmulator; uses its store (items/get/_write) and graceful `_delete`."""

    def _pdb_pods(self, pdb: dict) -> list[dict]:
        sel = (pdb.get("spec") or {}).get("selector")
        # k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go getPodDisruptionBudgets: a nil or empty selector matches nothing
        if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
            return []
        return [p for p in self.items("pods", pdb["metadata"]["namespace"]) if selector_match(sel, p["metadata"].get("labels") or {})]

    def _controller_scale(self, ns: str, ref: dict) -> int | None:
        # pkg/controller/disruption/disruption.go getExpectedScale/finders: a Deployment's ReplicaSet counts as the Deployment
        plural = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets", "Deployment": "deployments"}.get(ref["kind"])
        obj = self.get(plural, ns, ref["name"]) if plural else None
        if obj is None:
            return None
        up = controller_of(obj)
        if plural == "replicasets" and up and up["kind"] == "Deployment":
            return self._controller_scale(ns, up)
        return (obj.get("spec") or {}).get("replicas", 1)

    def _pdb_status(self, pdb: dict) -> dict:
        # pkg/controller/disruption/disruption.go getExpectedPodCount, countHealthyPods, updatePdbStatus
        ns, spec = pdb["metadata"]["namespace"], pdb.get("spec") or {}
        pods = self._pdb_pods(pdb)
        old = pdb.get("status") or {}
        disrupted = {n: t for n, t in (old.get("disruptedPods") or {}).items() if any(p["metadata"]["name"] == n and not p["metadata"].get("deletionTimestamp") for p in pods)}

        def expected_scale() -> int:
            scales: dict[str, int] = {}
            for p in pods:
                ref = controller_of(p)
                if ref:
                    key = self._top_uid(ns, ref)
                    scales[key] = self._controller_scale(ns, ref) or 0
            return sum(scales.values())

        if spec.get("maxUnavailable") is not None:
            expected = expected_scale()
            desired = max(0, expected - _resolve_int_or_percent(spec["maxUnavailable"], expected, True))
        elif isinstance(spec.get("minAvailable"), str):
            expected = expected_scale()
            desired = _resolve_int_or_percent(spec["minAvailable"], expected, True)
        else:
            expected, desired = len(pods), int(spec.get("minAvailable") or 0)
        healthy = sum(1 for p in pods if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in disrupted and is_ready(p))
        allowed = healthy - desired if expected > 0 and healthy - desired > 0 else 0
        cond = {
            "type": "DisruptionAllowed",
            "status": str(allowed > 0),
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
            "message": "",
            "observedGeneration": pdb["metadata"].get("generation", 1),
        }
        status: dict[str, Any] = {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "conditions": [cond],
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        return status

    def _top_uid(self, ns: str, ref: dict) -> str:
        if ref["kind"] == "ReplicaSet":
            rs = self.get("replicasets", ns, ref["name"])
            up = controller_of(rs) if rs else None
            if up and up["kind"] == "Deployment":
                return up["uid"]
        return ref["uid"]

    def _reconcile_pdbs(self) -> None:
        for pdb in self.items("poddisruptionbudgets"):
            status = self._pdb_status(pdb)
            if pdb.get("status") != status:
                pdb["status"] = status
                self._write("poddisruptionbudgets", pdb, "MODIFIED")

    def _evict(self, ns: str, name: str, body: Any, dry: bool) -> rendering.Response:
        """POST pods/NAME/eviction, as pkg/registry/core/pod/storage/eviction.go Create does it."""
        body = body if isinstance(body, dict) else {}
        if (body.get("metadata") or {}).get("name") != name:
            raise err(400, "BadRequest", "name in URL does not match name in Eviction object")
        pod = self.get("pods", ns, name)
        if pod is None:
            raise err(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
        opts = body.get("deleteOptions") or {}
        dry = dry or opts.get("dryRun") == ["All"]
        grace = opts.get("gracePeriodSeconds")
        ok = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}
        # eviction.go canIgnorePDB: Succeeded/Failed/Pending pods and terminating pods are deleted without a PDB check
        if pod["status"].get("phase") in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            self._delete("pods", pod, grace, dry)
            return rendering.Response(status=201, payload=ok)
        self._reconcile_pdbs()
        pdbs = [p for p in self.items("poddisruptionbudgets", ns) if any(x["metadata"]["name"] == name for x in self._pdb_pods(p))]
        if len(pdbs) > 1:
            # eviction.go: a Status with Code 500, not an error
            msg = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            return rendering.Response(status=500, payload={"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": msg, "code": 500})
        if pdbs:
            pdb = pdbs[0]
            st = pdb["status"]
            # eviction.go: an unready pod is evicted without spending the budget while the PDB is healthy
            if not (not is_ready(pod) and st["currentHealthy"] >= st["desiredHealthy"] and st["desiredHealthy"] > 0):
                if st["disruptionsAllowed"] == 0:
                    # eviction.go checkAndDecrement: 429 TooManyRequests with a DisruptionBudget cause
                    cause = f"The disruption budget {pdb['metadata']['name']} needs {st['desiredHealthy']} healthy pods and has {st['currentHealthy']} currently"
                    raise err(429, "TooManyRequests", EVICTION_BLOCKED, causes=[{"reason": "DisruptionBudget", "message": cause}])
                if not dry:
                    st["disruptionsAllowed"] -= 1
                    st.setdefault("disruptedPods", {})[name] = self._stamp()
                    self._write("poddisruptionbudgets", pdb, "MODIFIED")
        self._delete("pods", pod, grace, dry)
        return rendering.Response(status=201, payload=ok)

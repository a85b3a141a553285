"""The EndpointSlice controller: one slice per Service with a selector, following pod readiness."""

from __future__ import annotations

import hashlib

from .common import is_ready, owner_ref

SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


def _target_port(port: dict, pod: dict) -> int | None:
    target = port.get("targetPort", port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    for c in pod["spec"].get("containers") or []:  # a named targetPort resolves per pod
        for p in c.get("ports") or []:
            if p.get("name") == target:
                return p["containerPort"]
    return None


class EndpointSliceMixin:
    def _slice_for(self, svc: dict) -> dict:
        meta, spec = svc["metadata"], svc.get("spec") or {}
        ns, selector = meta["namespace"], spec["selector"]
        endpoints, ports = [], None
        for pod in sorted(self.items("pods", ns), key=lambda p: p["metadata"]["name"]):
            labels = pod["metadata"].get("labels") or {}
            # k8s.io/endpointslice utils.go ShouldPodBeInEndpoints: no IP or a finished phase -> left out; terminating pods stay
            if any(labels.get(k) != v for k, v in selector.items()) or not (pod.get("status") or {}).get("podIP"):
                continue
            if pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            terminating = bool(pod["metadata"].get("deletionTimestamp"))
            serving = is_ready(pod)
            # k8s.io/endpointslice utils.go podToEndpoint: serving = pod Ready, ready = serving && !terminating (unless publishNotReadyAddresses)
            ready = bool(spec.get("publishNotReadyAddresses")) or (serving and not terminating)
            endpoints.append(
                {
                    "addresses": [pod["status"]["podIP"]],
                    "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
                    "nodeName": pod["spec"].get("nodeName"),
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
                }
            )
            if ports is None:
                ports = [{"name": p.get("name", ""), "port": _target_port(p, pod), "protocol": p.get("protocol", "TCP")} for p in spec.get("ports") or []]
        digest = hashlib.sha256(meta["uid"].encode()).hexdigest()[:5]
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            # discovery.k8s.io/v1 EndpointSlice: the controller names slices generateName "<service>-"
            "metadata": {
                "name": f"{meta['name']}-{digest}",
                "namespace": ns,
                "labels": {SERVICE_NAME: meta["name"], MANAGED_BY: "endpointslice-controller.k8s.io"},
                "ownerReferences": [owner_ref(svc)],
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports or [],
        }

    def _reconcile_endpointslices(self) -> None:
        wanted = {}
        for svc in self.items("services"):
            if (svc.get("spec") or {}).get("selector"):  # services without a selector get no managed slices
                s = self._slice_for(svc)
                wanted[(s["metadata"]["namespace"], s["metadata"]["name"])] = s
        for cur in self.items("endpointslices"):
            key = (cur["metadata"]["namespace"], cur["metadata"]["name"])
            if (cur["metadata"].get("labels") or {}).get(MANAGED_BY) != "endpointslice-controller.k8s.io":
                continue
            want = wanted.pop(key, None)
            if want is None:
                self._write("endpointslices", cur, "DELETED")
            elif (cur.get("endpoints"), cur.get("ports")) != (want["endpoints"], want["ports"]):
                cur["endpoints"], cur["ports"] = want["endpoints"], want["ports"]
                self._write("endpointslices", cur, "MODIFIED")
        for (ns, _), s in wanted.items():
            self._create("endpointslices", ns, s, reconcile=False)

    def endpoint_ips(self, ns: str, service: str) -> list[str]:
        """Every address any slice of the Service lists (ready or not)."""
        return [
            a
            for s in self.items("endpointslices", ns)
            if (s["metadata"].get("labels") or {}).get(SERVICE_NAME) == service
            for e in s.get("endpoints") or []
            for a in e["addresses"]
        ]

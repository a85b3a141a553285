"""Are kvwatch's alerting rules installed in the cluster? (`kvwatch audit`'s prevention finding)

Looks for a Prometheus Operator PrometheusRule that carries the kv-pressure alert `kvwatch rules`
writes. What cannot be seen is said so, never reported as missing: without the Operator's API
the rules may live in a plain Prometheus' rule_files, and a denied listing proves nothing.
"""

from __future__ import annotations

from typing import Any

from ..audit import INFO, PASS, SKIP, WARN, Check
from ..textsafe import clean
from .generate import ALERTS, P

GROUP, VERSION, PLURAL = "monitoring.coreos.com", "v1", "prometheusrules"
KV_ALERT = next(a for a, v, _, _ in ALERTS if v == "kv-pressure")
CHECK_ID = "alert-rules"
TITLE = "KV-pressure alerting rules"
HOW = "install them: kvwatch rules --format prometheusrule -n NS --labels release=... | kubectl apply -f -"

def rules_installed(items: list[dict[str, Any]]) -> list[str]:
    """namespace/name of each PrometheusRule that alerts on kvwatch's kv-pressure verdict."""
    out = []
    for item in items:
        groups = ((item.get("spec") or {}).get("groups")) or []
        for g in groups if isinstance(groups, list) else []:
            rules = (g or {}).get("rules") if isinstance(g, dict) else None
            if any(isinstance(r, dict) and (r.get("alert") == KV_ALERT or f"{P}verdict_kv_pressure" in
                                            str(r.get("expr", "")) and "alert" in r) for r in rules or []):
                meta = item.get("metadata") or {}
                out.append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
                break
    return out


def rules_check(api_client: Any) -> Check:
    """The finding for the cluster behind `api_client` (every namespace: rules live beside Prometheus)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.CustomObjectsApi(api_client)
    try:
        resp = api.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    except ApiException as e:
        if e.status == 404:
            return Check(CHECK_ID, TITLE, INFO, "no PrometheusRule API (Prometheus Operator) in this cluster: "
                         "cannot see a plain Prometheus' rule_files; install `kvwatch rules` there")
        reason = clean(str(e.reason or e.status))
        return Check(CHECK_ID, TITLE, SKIP, f"cannot list PrometheusRules ({e.status} {reason}): unknown")
    found = rules_installed(resp.get("items") or [] if isinstance(resp, dict) else [])
    if found:
        return Check(CHECK_ID, TITLE, PASS, "installed: " + ", ".join(clean(f) for f in found[:5]))
    return Check(CHECK_ID, TITLE, WARN, f"no PrometheusRule alerts on the kv-pressure signature ({KV_ALERT}); {HOW}")

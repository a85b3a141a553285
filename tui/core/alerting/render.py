"""The rule groups as YAML: a plain `rule_files` file, or a Prometheus Operator PrometheusRule."""

from __future__ import annotations

from typing import Any

import re

import yaml

FORMATS = ("rules", "prometheusrule")
# Kubernetes names: a DNS-1123 subdomain; label keys: an optional DNS prefix and a name
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]  # PyYAML ships no types here
    """Block style; long PromQL stays on one line (no folding inside an expression)."""


def _str(dumper: yaml.SafeDumper, s: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


_Dumper.add_representer(str, _str)


def parse_labels(items: list[str]) -> dict[str, str]:
    """`k=v` pairs for the PrometheusRule's metadata (what the Operator's ruleSelector matches)."""
    out = {}
    for item in items:
        for part in (p for p in item.split(",") if p.strip()):
            k, sep, v = part.strip().partition("=")
            if not sep or not _LABEL_KEY.match(k) or not _LABEL_VALUE.match(v):
                raise ValueError(f"--labels {part.strip()!r}: expected key=value with a Kubernetes label key "
                                 "and value")
            out[k] = v
    return out


def render(groups: list[dict[str, Any]], fmt: str = "rules", name: str = "kvwatch", namespace: str | None = None,
           labels: dict[str, str] | None = None, header: str = "") -> str:
    if fmt == "rules":
        doc: dict[str, Any] = {"groups": groups}
    elif fmt == "prometheusrule":
        if not _DNS.match(name) or len(name) > 253:
            raise ValueError(f"--name {name!r}: not a Kubernetes object name")
        if namespace is not None and (not _DNS.match(namespace) or "." in namespace or len(namespace) > 63):
            raise ValueError(f"--namespace {namespace!r}: not a Kubernetes namespace name")
        meta: dict[str, Any] = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        meta["labels"] = {"app.kubernetes.io/name": "kvwatch", **(labels or {})}
        doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": meta,
               "spec": {"groups": groups}}
    else:
        raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    body: str = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1 << 16, allow_unicode=False)
    return header + body

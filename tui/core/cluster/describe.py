"""The read-only describe view's data: a pod's and its owner's manifests as YAML, as the API
server returns them (`kubectl get -o yaml`), without managedFields (k9s hides them too: field
ownership bookkeeping, long and of no use for triage). Nothing here changes the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import yaml


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object's YAML, or why it could not be read."""

    kind: str
    name: str
    text: str = ""
    error: str | None = None


def manifest_yaml(obj: Mapping[str, Any]) -> str:
    """The object as YAML in the API server's key order, managedFields left out."""
    out = dict(obj)
    meta = out.get("metadata")
    if isinstance(meta, Mapping):
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return str(yaml.safe_dump(out, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1 << 16))

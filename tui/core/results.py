"""The cluster's error and action result, below every layer that needs them.

They live here, not in `cluster.base` (which re-exports both), so the metrics Sources that read
through a cluster (`sources.kube`) can catch and raise the cluster's one error type without
importing the cluster package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


class ClusterError(Exception):
    """The one exception cluster reads raise. `kind` is one of: forbidden, not-found, conflict,
    test-failed (a JSON Patch `test` precondition failed: changed since read), invalid, server, timeout,
    unreachable, unauthorized, readonly, bad-input, error."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status

    def result(self, prefix: str = "") -> "ActionResult":
        return ActionResult(False, f"{prefix}{self.message}", self.status, {"kind": self.kind})


@dataclass(frozen=True, slots=True)
class ActionResult:
    ok: bool
    message: str
    status_code: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

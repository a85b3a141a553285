"""The cluster facts triage and the guided runbook read, as plain data.

Gathered by `cluster.facts.fetch_facts` (the cluster I/O lives there) and passed in, so the
diagnosis never reads the cluster itself. Each piece may be missing on its own (RBAC, timeout,
a StatefulSet has no ReplicaSets): it stays None with the reason in `problems`, which triage
and the runbook report as missing evidence, never as "nothing found".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from .runbook import Rollout

if TYPE_CHECKING:  # the cluster's event record; diagnosis never imports the cluster at run time
    from ..cluster.base import EventInfo


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """None = not fetched (or the read failed: see `problems`)."""

    logs: tuple[str, ...] | None = None
    events: tuple[EventInfo, ...] | None = None
    rollouts: tuple[Rollout, ...] | None = None
    args: Mapping[str, Any] | None = None  # canonical flag -> value the engine runs with now
    applied: Mapping[str, float] = field(default_factory=dict)  # runbook action id -> when
    problems: tuple[str, ...] = ()  # what could not be read, and why
    fetched_at: float | None = None  # history clock

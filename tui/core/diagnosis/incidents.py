"""Per workload, the incident the runbook verifies recovery from: when it began and the latency
its replicas had before it (p95 TTFT / TPOT over their calm time), taken from the replica it
began on.

A rollout's or a scale-out's new pods are born into the incident: their first minutes are no
"before the incident", so their recovery is compared with this baseline instead of their own.
An incident is replaced only by a new one that begins after the last was confirmed recovered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from .. import verdicts as V

if TYPE_CHECKING:  # (the runbook module loads when a runbook is first drawn, not at start)
    from .runbook import Runbook

_TROUBLE = frozenset({V.KV_PRESSURE, V.OVERLOADED})


@dataclass(slots=True)
class Incident:
    start: float
    baselines: Mapping[str, float | None] = field(default_factory=dict)
    recovered_at: float | None = None


class IncidentMemory:
    def __init__(self) -> None:
        self._by: dict[str, Incident] = {}

    def get(self, workload: str, now: float) -> Incident | None:
        """The workload's incident as of `now` (None before it began: a replay moved back)."""
        inc = self._by.get(workload)
        return inc if inc is not None and inc.start <= now else None

    def note(self, workload: str, book: Runbook) -> None:
        """Remember the incident `book` (a replica of `workload`) shows, or its recovery."""
        inc = self._by.get(workload)
        if inc is not None and inc.start > book.ts:
            del self._by[workload]  # from a later time than this one (replay moved back): forget it
            inc = None
        if book.finding.verdict in _TROUBLE and book.incident_start is not None:
            if inc is None or (inc.recovered_at is not None and book.incident_start > inc.recovered_at):
                self._by[workload] = Incident(book.incident_start, dict(book.verification.baselines))
                return
            if not any(v is not None for v in inc.baselines.values()):
                # none of its own yet (this replica: a calm stretch before it): take it
                found = {k: v for k, v in book.verification.baselines.items() if v is not None}
                if found and book.incident_start <= inc.start:
                    inc.baselines = found
        if inc is not None and book.verification.confirmed and inc.recovered_at is None:
            inc.recovered_at = book.verification.confirmed_at

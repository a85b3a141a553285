"""Offline diagnosis: replay a scrape log through the live pipeline and keep each verdict timeline.

Scrapes go through `Monitor.ingest` in time order, one poll at a time, so the verdict at time t
is computed from the scrapes up to t only, by the same code as the live view. A poll is
rebuilt from the log as a run of consecutive scrapes (in time order) with distinct replicas:
the recorder writes one poll's scrapes together, and a replica seen again starts the next poll.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .diagnosis import Thresholds
from .history import Windows
from .model import Evidence, FleetState, Scrape
from .monitor import Monitor
from .record.reader import LogProblem, read_log
from .sources.replay import in_time_order, polls


@dataclass
class ReplicaTimeline:
    name: str
    verdict: str = "unknown"
    since: float | None = None
    evidence: tuple[Evidence, ...] = ()
    missing: tuple[str, ...] = ()
    summary: str = ""
    state: str = ""
    timeline: list[tuple[float, str]] = field(default_factory=list)  # (ts, verdict) at each change
    points: list[tuple[float, str]] = field(default_factory=list)  # every scrape, when asked for
    first_ts: float | None = None
    last_ts: float | None = None
    scrapes: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "since": self.since,
            "state": self.state,
            "summary": self.summary,
            "evidence": [e.as_dict() for e in self.evidence],
            "missing": list(self.missing),
            "timeline": [{"ts": ts, "verdict": v} for ts, v in self.timeline],
            "scrapes": self.scrapes,
            "failed_scrapes": self.failed,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
        }


@dataclass
class OfflineResult:
    replicas: dict[str, ReplicaTimeline]
    problems: list[LogProblem] = field(default_factory=list)
    scrapes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "replicas": {n: r.as_dict() for n, r in sorted(self.replicas.items())},
            "problems": [str(p) for p in self.problems],
            "scrapes": self.scrapes,
        }


def replay(scrapes: Iterable[Scrape], thresholds: Thresholds | None = None, windows: Windows | None = None,
           keep_points: bool = False, history_len: int = 600,
           observe: Callable[[Monitor, FleetState, list[Scrape]], None] | None = None) -> OfflineResult:
    """Verdict timelines of every replica in `scrapes`, taken in time order (stable) through a
    bounded reorder buffer: `scrapes` may be a stream as long as the file, memory stays bounded
    by the history window. `observe(monitor, state, poll)` sees each poll's state as it is
    judged (the postmortem report reads its metrics from there, beside these timelines)."""
    # a list is already in memory: sort it whole (any order); a stream goes through the buffer
    ordered = sorted(scrapes, key=lambda s: s.ts) if isinstance(scrapes, (list, tuple)) else in_time_order(scrapes)
    mon = Monitor(thresholds=thresholds, windows=windows, history_len=history_len)
    out: dict[str, ReplicaTimeline] = {}
    n = 0
    for batch in polls(ordered):
        state = mon.ingest(batch)
        n += len(batch)
        polled = {s.replica: s for s in batch}
        for view in state.replicas:
            if view.name not in polled:
                continue
            r = out.get(view.name)
            if r is None:
                r = out[view.name] = ReplicaTimeline(view.name, first_ts=polled[view.name].ts)
            s = polled[view.name]
            r.scrapes += 1
            r.failed += 0 if s.ok else 1
            r.last_ts = s.ts
            f = view.finding
            if not r.timeline or r.timeline[-1][1] != f.verdict:
                r.timeline.append((s.ts, f.verdict))
            if keep_points:
                r.points.append((s.ts, f.verdict))
            r.verdict, r.since, r.evidence = f.verdict, f.since, f.evidence
            r.missing, r.summary, r.state = f.missing, f.summary, view.state
        if observe is not None:
            observe(mon, state, batch)
    return OfflineResult(out, scrapes=n)


def diagnose_file(path: str, thresholds: Thresholds | None = None, windows: Windows | None = None,
                  keep_points: bool = False) -> OfflineResult:
    """Read a scrape log (plain or gzip) and replay it. OSError when the file cannot be opened."""
    problems: list[LogProblem] = []
    result = replay(read_log(path, problems.append), thresholds, windows, keep_points)
    result.problems = problems
    return result

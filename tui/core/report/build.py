"""The postmortem's facts, gathered in one streamed pass over a recording.

The recording is replayed through the live pipeline exactly as `kvwatch diagnose` does
(`offline.replay`: same reader, same reorder buffer, same Monitor), so every verdict and time
here is the one diagnose prints. Beside the timelines, each poll's fleet figures (KV usage,
queue, preemptions/s, TTFT p95) are kept in a series that halves its resolution when it grows
past `MAX_POINTS`, so memory stays bounded however long the file is.

Definitions (said in the report too):
- an incident verdict is one of INCIDENT (a fault the runbooks act on);
- the signature's onset on a replica is the first scrape of the unbroken run of breaching
  scrapes (KV usage >= kv_high, a preemption, or waiting >= waiting_min) that ends in its first
  incident verdict; the fleet's onset is the earliest of them;
- the fleet alarm is what turns the dashboard's red banner on: a replica in kv-pressure, or a
  queue / latency alarm;
- recovery is the runbook's verification (diagnosis.runbook.verify: preemptions ~0, KV below
  kv_high and the queue drained, held for the recovery window, latency back, no new restart)
  confirmed on every replica still serving that had an incident verdict, with no incident
  verdict and no alarm left in the fleet.
"""

from __future__ import annotations

from typing import Any, Iterator

import datetime as dt
import math
from dataclasses import dataclass, field

from .. import verdicts as V
from ..diagnosis import Thresholds
from ..diagnosis.runbook import Verification, pre_incident, verify
from ..history import Windows
from ..model import FleetState, Scrape
from ..monitor import Monitor
from ..offline import OfflineResult, ReplicaTimeline, replay
from ..record.reader import LogProblem, read_log
from ..textsafe import clean
from .audit_join import BEFORE_S, WINDOWS, AuditRead, Mitigation, read_audit

INCIDENT = (V.NODE_FAULT, V.KV_PRESSURE, V.STALLED, V.OVERLOADED, V.CONCURRENCY_CAPPED, V.HOST_BOUND)
METRICS = ("kv", "queue", "preempt", "ttft")  # fleet figures per poll, see _fleet_point
METRIC_LABEL = {"kv": "KV usage (max)", "queue": "queue (waiting, sum)", "preempt": "preemptions/s (sum)",
                "ttft": "TTFT p95 (max, s)"}
MAX_POINTS = 2000  # per series: past this the series keeps every other point (the worse of each pair)
_EVIDENCE_REPLICAS = 6  # replicas quoted at a key moment


@dataclass
class Point:
    ts: float
    values: dict[str, float | None]
    worst: str  # the most severe verdict in the fleet at this poll
    alarm: bool


@dataclass
class Moment:
    ts: float
    title: str
    lines: list[str]


@dataclass
class Report:
    recording: str
    audit: str | None
    start: float  # the report's window
    end: float
    scrapes: int
    replicas: dict[str, ReplicaTimeline]
    groups: dict[str, str]  # replica -> model group
    problems: list[str]
    points: list[Point]
    mitigations: list[Mitigation]
    first_verdict: dict[str, tuple[float, str]]  # replica -> its first incident verdict
    onset: dict[str, float]  # replica -> its signature's onset
    alarm_start: float | None
    recovered_at: float | None
    recovery_text: list[str]
    unrecovered: list[str]  # when not recovered: what the last check found
    relapse_at: float | None
    moments: list[Moment]
    audit_outside: int = 0
    thresholds: Thresholds = field(default_factory=Thresholds)

    # -- the summary's figures ------------------------------------------------------------------
    @property
    def affected(self) -> list[str]:
        return sorted(self.first_verdict, key=lambda n: (self.first_verdict[n][0], n))

    @property
    def affected_groups(self) -> list[str]:
        return sorted({self.groups[n] for n in self.first_verdict if n in self.groups})

    @property
    def fleet_onset(self) -> float | None:
        return min(self.onset.values()) if self.onset else None

    @property
    def first_detected(self) -> float | None:
        return min(ts for ts, _ in self.first_verdict.values()) if self.first_verdict else None

    @property
    def first_mitigation(self) -> Mitigation | None:
        return next((m for m in self.mitigations if m.ok), None)

    @property
    def incident_window(self) -> tuple[float, float | None] | None:
        """(start, end): from the onset to the confirmed recovery; end None while not recovered."""
        start = self.fleet_onset
        return None if start is None else (start, self.recovered_at)

    @property
    def time_to_detect(self) -> float | None:
        a, b = self.fleet_onset, self.first_detected
        return None if a is None or b is None else b - a

    @property
    def time_to_mitigate(self) -> float | None:
        m, a = self.first_mitigation, self.fleet_onset
        return None if m is None or a is None else m.ts - a

    @property
    def time_to_recover(self) -> float | None:
        a, b = self.fleet_onset, self.recovered_at
        return None if a is None or b is None else b - a

    def verdict_seconds(self, name: str) -> dict[str, float]:
        """Seconds replica `name` spent in each verdict inside the report's window."""
        r = self.replicas[name]
        out: dict[str, float] = {}
        tl = r.timeline
        for i, (ts, v) in enumerate(tl):
            end = tl[i + 1][0] if i + 1 < len(tl) else (r.last_ts if r.last_ts is not None else ts)
            a, b = max(ts, self.start), min(end, self.end)
            if b > a:
                out[v] = out.get(v, 0.0) + (b - a)
        return out

    def as_dict(self) -> dict[str, Any]:
        fm = self.first_mitigation
        return {
            "recording": self.recording, "audit": self.audit, "start": self.start, "end": self.end,
            "scrapes": self.scrapes, "problems": self.problems,
            "affected": self.affected, "affected_groups": self.affected_groups,
            "first_verdict": {n: {"ts": ts, "verdict": v} for n, (ts, v) in sorted(self.first_verdict.items())},
            "onset": self.fleet_onset, "alarm_start": self.alarm_start, "first_detected": self.first_detected,
            "first_mitigation": fm.ts if fm else None, "recovered_at": self.recovered_at,
            "relapse_at": self.relapse_at,
            "time_to_detect_s": self.time_to_detect, "time_to_mitigate_s": self.time_to_mitigate,
            "time_to_recover_s": self.time_to_recover,
            "verdict_seconds": {n: self.verdict_seconds(n) for n in sorted(self.replicas)},
            "mitigations": [m.as_dict() for m in self.mitigations],
        }


def _fleet_point(state: FleetState, polled: set[str]) -> dict[str, float | None]:
    kv: list[float] = []
    queue: list[float] = []
    pre: list[float] = []
    ttft: list[float] = []
    for v in state.replicas:
        if v.name not in polled:
            continue
        m = v.metrics
        for out, x in ((kv, m.kv_usage), (queue, m.waiting), (pre, m.preemptions_per_s), (ttft, m.ttft_p95_s)):
            if isinstance(x, (int, float)) and math.isfinite(x):
                out.append(float(x))
    return {"kv": max(kv) if kv else None, "queue": sum(queue) if queue else None,
            "preempt": sum(pre) if pre else None, "ttft": max(ttft) if ttft else None}


def _worse(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _halve(points: list[Point]) -> list[Point]:
    """Every other point, each the worse of its pair: peaks and bad verdicts survive."""
    out = []
    for i in range(0, len(points) - 1, 2):
        a, b = points[i], points[i + 1]
        worst = a.worst if V.SEVERITY.get(a.worst, 99) <= V.SEVERITY.get(b.worst, 99) else b.worst
        out.append(Point(a.ts, {k: _worse(a.values[k], b.values[k]) for k in METRICS}, worst, a.alarm or b.alarm))
    if len(points) % 2:
        out.append(points[-1])
    return out


def _breach(s: Scrape, prev_pre: float | None, t: Thresholds) -> tuple[str, float | None]:
    """What of the signature scrape `s` shows ("" = none), and its preemption counter (for the
    next call)."""
    if not s.ok or s.sample is None:
        return "", prev_pre
    kv, waiting, pre = s.sample.value("kv_usage"), s.sample.value("waiting"), s.sample.value("preemptions")
    hits = []
    if kv is not None and kv >= t.kv_high:
        hits.append(f"KV usage {kv:.2f} >= {t.kv_high:.2f}")
    if pre is not None and prev_pre is not None and pre > prev_pre:
        hits.append(f"{pre - prev_pre:g} preemption(s) since the last scrape")
    if waiting is not None and waiting >= t.waiting_min:
        hits.append(f"{waiting:g} waiting")
    return "; ".join(hits), pre if pre is not None else prev_pre


def _clock(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%H:%M:%S") if ts > 1e9 else f"t={ts:.0f}s"


def _evidence_lines(state: FleetState, polled: set[str], alarms: list[Any]) -> list[str]:
    views = sorted((v for v in state.replicas if v.name in polled), key=lambda v: (V.SEVERITY.get(v.verdict, 99), v.name))
    lines = []
    for v in views[:_EVIDENCE_REPLICAS]:
        crossed = [e.text for e in v.finding.evidence if e.crossed][:2]
        lines.append(f"{clean(v.name)}: {v.verdict}" + (f" ({'; '.join(clean(c) for c in crossed)})" if crossed else ""))
    if len(views) > _EVIDENCE_REPLICAS:
        lines.append(f"... and {len(views) - _EVIDENCE_REPLICAS} more replica(s)")
    for a in alarms[:3]:
        lines.append(f"alarm: {clean(getattr(a, 'text', str(a)))}")
    return lines


class _Collector:
    """`offline.replay`'s observer: what the report needs beyond the verdict timelines."""

    def __init__(self, t: Thresholds, start: float, mitigations: list[Mitigation]) -> None:
        self.t = t
        self.start = start
        self.points: list[Point] = []
        self.groups: dict[str, str] = {}
        self.first_verdict: dict[str, tuple[float, str]] = {}
        self.onset: dict[str, float] = {}
        self._run: dict[str, float | None] = {}  # replica -> start of its current breaching run
        self._run_what: dict[str, str] = {}  # ... and what its first scrape showed
        self._pre: dict[str, float | None] = {}
        self.alarm_start: float | None = None
        self.recovered_at: float | None = None
        self.recovery_text: list[str] = []
        self.relapse_at: float | None = None
        self.unrecovered: list[str] = []  # at the last check: the replicas not yet confirmed, and why
        self.moments: list[Moment] = []
        self.mitigations = mitigations
        self._pending = list(mitigations)  # actions whose "first poll after" is still to come
        self._sums = [{k: [[0.0, 0] for _ in WINDOWS] for k in METRICS} for _ in mitigations]  # sum, n per window
        self._confirmed: dict[str, Verification] = {}  # replica -> its confirmed Verification (not asked again)
        # per model group: the pre-incident latency p95s of the first of its replicas that had
        # calm time before its verdict; pods born into the incident are verified against them (as
        # the live runbook does through its IncidentMemory)
        self._baselines: dict[str, dict[str, float | None]] = {}

    def __call__(self, mon: Monitor, state: FleetState, batch: list[Scrape]) -> None:
        ts = max(s.ts for s in batch)
        at = {s.replica: s.ts for s in batch}
        polled = set(at)
        for s in batch:
            if s.group:
                self.groups.setdefault(s.replica, s.group)
            if s.replica not in self.first_verdict:
                hit, self._pre[s.replica] = _breach(s, self._pre.get(s.replica), self.t)
                if hit:
                    if self._run.get(s.replica) is None:
                        self._run[s.replica] = s.ts
                        self._run_what[s.replica] = hit
                else:
                    self._run[s.replica] = None
        values = _fleet_point(state, polled)
        worst = min((v.verdict for v in state.replicas if v.name in polled), key=lambda x: V.SEVERITY.get(x, 99),
                    default=V.UNKNOWN)
        hot = any(v.verdict == V.KV_PRESSURE for v in state.replicas if v.name in polled)
        # a replica gone from the recording (replaced, scaled in) keeps its history in the replay:
        # only the alarms of the replicas in this poll count, as live (the monitor forgets the gone)
        alarms = [a for a in state.alarms if getattr(a, "replica", None) in polled]
        alarm = bool(hot or alarms)
        self._windows(ts, values)
        if ts < self.start:
            return  # warm-up before the report's window: judged, not reported
        self.points.append(Point(ts, values, worst, alarm))
        if len(self.points) > MAX_POINTS:
            self.points = _halve(self.points)
        if alarm and self.alarm_start is None:
            self.alarm_start = ts
            self.moments.append(Moment(ts, "fleet alarm (the red banner)", _evidence_lines(state, polled, alarms)))
        new = []
        for v in state.replicas:
            if v.name in polled and v.verdict in INCIDENT and v.name not in self.first_verdict:
                since = at[v.name]  # the scrape that gave it: diagnose's timeline entry
                self.first_verdict[v.name] = (since, v.verdict)
                h = mon.histories.get(v.name)
                group = self.groups.get(v.name) or v.group or ""
                if h is not None and group not in self._baselines:
                    base = {k: pre_incident(h, k, since, self.t) for k in ("ttft", "itl")}
                    if any(b is not None for b in base.values()):
                        self._baselines[group] = base
                run = self._run.get(v.name)
                self.onset[v.name] = min(run, since) if run is not None else since
                new.append(v)
        if new and len(self.first_verdict) == len(new):  # the first replica(s) to get one
            onset = min(self.onset[v.name] for v in new)
            self.moments.append(Moment(onset, "signature onset", [
                f"{clean(v.name)} at {_clock(self.onset[v.name])}: {self._run_what.get(v.name) or 'the verdict itself'}"
                for v in new[:_EVIDENCE_REPLICAS]]))
            lines = []
            for v in new[:_EVIDENCE_REPLICAS]:
                lines.append(f"{clean(v.name)}: {v.verdict}")
                lines += [f"  {clean(e.text)}" for e in v.finding.evidence if e.crossed][:4]
            self.moments.append(Moment(ts, "first verdict", lines))
        while self._pending and self._pending[0].ts <= ts:
            m = self._pending.pop(0)
            m.evidence = _evidence_lines(state, polled, alarms)
        self._recovery(mon, state, polled, ts, alarms)

    def _windows(self, ts: float, values: dict[str, float | None]) -> None:
        for m, sums in zip(self.mitigations, self._sums, strict=True):
            d = ts - m.ts
            for i, (_label, a, b) in enumerate(WINDOWS):
                if a <= d < b:
                    for k in METRICS:
                        x = values[k]
                        if x is not None:
                            sums[k][i][0] += x
                            sums[k][i][1] += 1

    def _recovery(self, mon: Monitor, state: FleetState, polled: set[str], ts: float, alarms: list[Any]) -> None:
        if not self.first_verdict:
            return
        present = [v for v in state.replicas if v.name in polled]
        incident_now = any(v.verdict in INCIDENT for v in present) or bool(alarms)
        if self.recovered_at is not None:
            if incident_now and self.relapse_at is None:
                self.relapse_at = ts
            return
        if incident_now:
            self._confirmed.clear()  # a breach again: every replica proves itself anew
            worst = sorted((v for v in present if v.verdict in INCIDENT), key=lambda v: v.name)
            self.unrecovered = [f"{clean(v.name)}: {v.verdict}" for v in worst[:_EVIDENCE_REPLICAS]]
            if alarms:
                self.unrecovered.append(f"{len(alarms)} queue / latency alarm(s) up")
            return
        names = [v.name for v in present if v.name in self.first_verdict] or [v.name for v in present]
        results: list[tuple[str, Verification]] = []
        for n in names:  # verify reads the replica's whole history: each is asked until it confirms
            res = self._confirmed.get(n)
            if res is None:
                h = mon.histories.get(n)
                if h is None:
                    return
                base = self._baselines.get(self.groups.get(n) or "")
                res = verify(h, ts, self.t, self.first_verdict.get(n, (None,))[0], base)
                if not res.confirmed:
                    self.unrecovered = [f"{clean(n)}: {clean(res.text)}"]
                    return
                self._confirmed[n] = res
            results.append((n, res))
        self.unrecovered = []
        self.recovered_at = max((r.confirmed_at or ts) for _, r in results) if results else ts
        for n, r in results[:_EVIDENCE_REPLICAS]:
            self.recovery_text.append(f"{clean(n)}: {clean(r.text)}")
            self.recovery_text += [f"  {'ok' if c.met else 'no' if c.met is False else '??'}  {clean(c.text)}"
                                   for c in r.criteria]
        self.moments.append(Moment(self.recovered_at, "recovery confirmed (the runbook's criteria)",
                                   list(self.recovery_text)))

    def finish(self) -> None:
        for m, sums in zip(self.mitigations, self._sums, strict=True):
            for k in METRICS:
                m.before_after[k] = tuple(total / n if n else None for total, n in sums[k])
            self.moments.append(Moment(m.ts, f"action: {m.what}", [f"by {m.user}: {m.message}"] + m.evidence))
        order = ("signature onset", "first verdict", "fleet alarm", "action", "recovery")  # at one time
        self.moments.sort(key=lambda x: (x.ts, next((i for i, o in enumerate(order) if x.title.startswith(o)), 9)))


def build_report(recording: str, audit: str | None = None, start: float | None = None, end: float | None = None,
                 thresholds: Thresholds | None = None, windows: Windows | None = None) -> Report:
    """The report of `recording` (plain or gzip) between `start` and `end` (None: all of it),
    with the mitigations of the `audit` log. OSError when the recording cannot be opened (the
    audit log: said in the report's problems, the rest is still reported)."""
    t = thresholds or Thresholds()
    lo = -math.inf if start is None else start
    hi = math.inf if end is None else end
    problems: list[LogProblem] = []
    read = AuditRead([])
    audit_problems: list[str] = []
    if audit is not None:
        try:
            read = read_audit(audit, lo - BEFORE_S if start is not None else -math.inf, hi)
        except OSError as e:
            audit_problems.append(f"{audit}: cannot read the audit log: {e.strerror or e}")
        audit_problems += read.problems
    col = _Collector(t, lo, read.mitigations)

    def scrapes() -> Iterator[Scrape]:
        for s in read_log(recording, problems.append):
            if s.ts > hi:
                continue  # past the window: not judged (a later scrape can still be earlier, kept)
            yield s

    result: OfflineResult = replay(scrapes(), t, windows, observe=col)
    col.finish()
    reps = result.replicas
    first = min((r.first_ts for r in reps.values() if r.first_ts is not None), default=None)
    last = max((r.last_ts for r in reps.values() if r.last_ts is not None), default=None)
    w0 = max(lo, first) if first is not None else (start or 0.0)
    w1 = min(hi, last) if last is not None else w0
    # actions logged outside what was recorded are not part of this story (said, not shown)
    inside = [m for m in read.mitigations if w0 - BEFORE_S <= m.ts <= w1]
    outside = read.outside + len(read.mitigations) - len(inside)
    shown = {n: r for n, r in reps.items() if r.last_ts is not None and r.last_ts >= w0}
    return Report(
        recording=recording, audit=audit, start=w0, end=w1, scrapes=result.scrapes, replicas=shown,
        groups=col.groups, problems=[str(p) for p in problems] + audit_problems, points=col.points,
        mitigations=inside, first_verdict=col.first_verdict, onset=col.onset, alarm_start=col.alarm_start,
        recovered_at=col.recovered_at, recovery_text=col.recovery_text,
        unrecovered=col.unrecovered, relapse_at=col.relapse_at,
        moments=[m for m in col.moments if not m.title.startswith("action:") or any(x.ts == m.ts for x in inside)],
        audit_outside=outside, thresholds=t)

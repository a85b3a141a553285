"""The audit log's entries as mitigations on the recording's timeline.

An entry is placed by `data_ts` when it has one (the demo's simulated clock, the one its
recording is stamped with), else by its wall-clock `time`. The log is small (one line per
action), so it is read whole; an unreadable line is counted and skipped, never guessed at.
"""

from __future__ import annotations

from typing import Any

import datetime as dt
import json
import math
from dataclasses import dataclass, field

from ..textsafe import clean

# windows (seconds from the action) over which the fleet's figures are compared: a rollout or new
# pods need minutes to take effect, so "after" is looked at twice
WINDOWS = (("30 s before", -30.0, 0.0), ("1-4 min after", 60.0, 240.0), ("5-10 min after", 300.0, 600.0))
BEFORE_S = -WINDOWS[0][1]


@dataclass
class Mitigation:
    ts: float
    user: str
    user_source: str
    context: str
    action: str
    target: str
    diff: str
    ok: bool | None
    message: str
    # metric -> the mean in each of WINDOWS, None where no value was recorded in that window
    before_after: dict[str, tuple[float | None, ...]] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)  # what the fleet showed at the first poll after

    @property
    def what(self) -> str:
        return f"{self.action} {self.target}"

    def as_dict(self) -> dict[str, Any]:
        return {"ts": self.ts, "user": self.user, "user_source": self.user_source, "context": self.context,
                "action": self.action, "target": self.target, "diff": self.diff, "ok": self.ok,
                "message": self.message,
                "before_after": {k: dict(zip((w[0] for w in WINDOWS), v, strict=True))
                                 for k, v in self.before_after.items()},
                "evidence": self.evidence}


@dataclass
class AuditRead:
    mitigations: list[Mitigation]
    skipped_lines: int = 0  # not JSON, or no usable time
    outside: int = 0  # entries outside the recording's window
    problems: list[str] = field(default_factory=list)


def _ts(entry: dict[str, Any]) -> float | None:
    v = entry.get("data_ts")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    t = entry.get("time")
    if not isinstance(t, str):
        return None
    try:
        when = dt.datetime.fromisoformat(t)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def _s(v: Any, limit: int = 4000) -> str:
    text = v if isinstance(v, str) else "" if v is None else str(v)
    return "\n".join(clean(line) for line in text[:limit].splitlines())  # a diff keeps its lines


def read_audit(path: str, start: float, end: float) -> AuditRead:
    """Mitigations logged in [start, end] (the recording's window), in time order. OSError
    propagates (the caller says it could not read the log)."""
    out = AuditRead([])
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                out.skipped_lines += 1
                continue
            ts = _ts(entry) if isinstance(entry, dict) else None
            if ts is None:
                out.skipped_lines += 1
                continue
            if not start <= ts <= end:
                out.outside += 1
                continue
            res = entry.get("result") if isinstance(entry.get("result"), dict) else {}
            ok = res.get("ok")
            out.mitigations.append(Mitigation(
                ts=ts, user=_s(entry.get("user"), 200) or "unknown", user_source=_s(entry.get("user_source"), 200),
                context=_s(entry.get("context"), 200), action=_s(entry.get("action"), 100) or "?",
                target=_s(entry.get("target"), 300), diff=_s(entry.get("diff")),
                ok=ok if isinstance(ok, bool) else None, message=_s(res.get("message"), 500)))
    if out.skipped_lines:
        out.problems.append(f"{path}: {out.skipped_lines} unreadable audit line(s) skipped")
    out.mitigations.sort(key=lambda m: m.ts)
    return out

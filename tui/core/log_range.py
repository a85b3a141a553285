"""The time range of the logs screen (`t` cycles it): all, the last 5 or 1 minutes, or since the
replica's incident began (offered only while the monitor judges it in one). Pure: the screen
asks for `since_seconds`; the cluster turns it into the API's sinceSeconds (or, simulated,
cuts its own log), so a huge log is never fetched whole to show its last minute.
"""

from __future__ import annotations

import time
from typing import Any

from .verdicts import COMPUTE_BOUND, SEVERITY

ALL, FIVE, ONE, INCIDENT = "all", "5m", "1m", "incident"
RANGES = (ALL, FIVE, ONE, INCIDENT)
LABELS = {ALL: "all time", FIVE: "last 5 min", ONE: "last 1 min", INCIDENT: "since the incident began"}
_SECONDS = {FIVE: 300.0, ONE: 60.0}


def incident(view: Any) -> tuple[str, float] | None:
    """(verdict, since) of a replica in trouble: a verdict more severe than compute-bound (a
    fault, pressure, a stall, a queue...) with the time it began; None otherwise."""
    if view is None:
        return None
    f = view.finding
    if f.since is None or SEVERITY.get(f.verdict, len(SEVERITY)) >= SEVERITY[COMPUTE_BOUND]:
        return None
    return f.verdict, f.since


def next_range(current: str, has_incident: bool) -> str:
    """The range after `current`; "since the incident" is skipped while there is none."""
    nxt = RANGES[(RANGES.index(current) + 1) % len(RANGES)]
    return ALL if nxt == INCIDENT and not has_incident else nxt


def since_seconds(rng: str, now: float, began: float | None, margin: float = 0.0) -> float | None:
    """Seconds of log to ask for (None: all). `now` and `began` share the monitor's clock;
    `margin` (a refresh interval) keeps the lines written just before the verdict was given."""
    if rng == INCIDENT:
        return max(1.0, now - began + margin) if began is not None else None
    return _SECONDS.get(rng)


def label(rng: str, inc: tuple[str, float] | None = None) -> str:
    if rng == INCIDENT and inc is not None:
        return f"{LABELS[INCIDENT]} ({inc[0]} since {time.strftime('%H:%M:%S', time.localtime(inc[1]))})"
    return LABELS[rng]

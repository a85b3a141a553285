"""The logs screen's time range, pure: the cycle, the seconds asked, and the simulated log's cut."""

from __future__ import annotations

import calendar

from tui.core import log_range as lr
from tui.core.cluster.sim.reads import lines_since


def test_the_cycle_skips_the_incident_when_there_is_none():
    seen, r = [], lr.ALL
    for _ in range(4):
        r = lr.next_range(r, has_incident=False)
        seen.append(r)
    assert seen == [lr.FIVE, lr.ONE, lr.ALL, lr.FIVE]
    assert lr.next_range(lr.ONE, has_incident=True) == lr.INCIDENT
    assert lr.next_range(lr.INCIDENT, has_incident=True) == lr.ALL


def test_seconds_asked():
    assert lr.since_seconds(lr.ALL, 1000.0, 900.0) is None
    assert lr.since_seconds(lr.FIVE, 1000.0, None) == 300.0
    assert lr.since_seconds(lr.INCIDENT, 1000.0, 900.0, margin=2.0) == 102.0
    assert lr.since_seconds(lr.INCIDENT, 1000.0, None) is None  # it ended: all


def _ts(y, mo, d, h, mi, s):
    return float(calendar.timegm((y, mo, d, h, mi, s)))


def test_sim_lines_since_keeps_continuations_and_crosses_the_new_year():
    lines = ["(APIServer pid=1) INFO 12-31 23:58:00 [a] old", "Traceback (most recent call last):",
             "(APIServer pid=1) ERROR 12-31 23:59:30 [b] recent", "  File \"x.py\", line 1",
             "(APIServer pid=1) INFO 01-01 00:00:10 [c] new year"]
    now = _ts(2026, 1, 1, 0, 0, 20)
    assert lines_since(lines, now - 60, now) == lines[2:]
    assert lines_since(lines, now - 5, now) == []
    assert lines_since(lines, now - 3600, now) == lines

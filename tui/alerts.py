"""Entries into kv-pressure and into the fleet's queue / latency alarm, noted once each (not on
every refresh, and not on a flip: a replica back within `REALERT_S` of source time after it left
is the same episode): the app rings the bell and flashes the names when the bell is on; the list
stays for the operator either way."""

from __future__ import annotations

from tui.core.model import FleetState

REALERT_S = 60.0  # out of kv-pressure (or the alarm) for less than this: the same episode


class _Entries:
    """Names entering a set, with the cool-down for ones that only stepped out briefly."""

    def __init__(self) -> None:
        self.on: set[str] = set()
        self.left: dict[str, float] = {}  # name -> when it last left

    def update(self, now_on: set[str], ts: float) -> tuple[str, ...]:
        for name in self.on - now_on:
            self.left[name] = ts
        new = sorted(n for n in now_on - self.on if ts - self.left.get(n, float("-inf")) >= REALERT_S)
        self.on = set(now_on)
        return tuple(new)


class PressureAlerts:
    def __init__(self) -> None:
        self.alerts: list[tuple[float, tuple[str, ...]]] = []  # (ts, replicas entering kv-pressure)
        self.alarm_alerts: list[tuple[float, tuple[str, ...]]] = []  # (ts, replicas entering the alarm)
        self._kv = _Entries()
        self._alarm = _Entries()

    def update(self, state: FleetState) -> tuple[str, ...]:
        """The replicas that entered kv-pressure since the last state (sorted; often none)."""
        new = self._kv.update({r.name for r in state.replicas if r.verdict == "kv-pressure"}, state.ts)
        if new:
            self.alerts.append((state.ts, new))
        return new

    def update_alarms(self, state: FleetState) -> tuple[str, ...]:
        """The replicas that entered the queue / latency alarm since the last state."""
        new = self._alarm.update({a.replica for a in state.alarms}, state.ts)
        if new:
            self.alarm_alerts.append((state.ts, new))
        return new

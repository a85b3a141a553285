"""Entries into kv-pressure, noted once each (not on every refresh): the app rings the bell and
flashes the names when the bell is on; the list stays for the operator either way."""

from __future__ import annotations

from tui.core.model import FleetState


class PressureAlerts:
    def __init__(self) -> None:
        self.alerts: list[tuple[float, tuple[str, ...]]] = []  # (ts, replicas entering kv-pressure)
        self._hot: set[str] | None = None  # replicas in kv-pressure at the last refresh

    def update(self, state: FleetState) -> tuple[str, ...]:
        """The replicas that entered kv-pressure since the last state (sorted; often none)."""
        hot = {r.name for r in state.replicas if r.verdict == "kv-pressure"}
        new = tuple(sorted(hot - (self._hot or set())))
        self._hot = hot
        if new:
            self.alerts.append((state.ts, new))
        return new

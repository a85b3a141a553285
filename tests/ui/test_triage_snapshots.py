"""Snapshots of the triage, runbook and capacity views (pytest-textual-snapshot), deterministic:
scripted metrics on a fixed clock, no cluster (the fetch line says so instead of a wall time)."""

from __future__ import annotations

from tests.ui.conftest import make_app, prime
from tests.ui.triage_helpers import TriageSource, app_for, open_on


def _on(name: str, key: str, polls: int = 4):
    async def run(pilot):
        await prime(pilot, polls)
        await open_on(pilot, name, key)
        pilot.app.clear_notifications()  # the kv-pressure toast would cover the view
        await pilot.pause()

    return run


def test_triage_view_120x36(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=_on("llama-8b-7d9f-abcde", "t"))


def test_runbook_node_fault_120x36(snap_compare):
    assert snap_compare(make_app(), terminal_size=(120, 36), run_before=_on("node-sick", "g"))


def test_runbook_kv_pressure_80x24(snap_compare):
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=_on("llama-8b-7d9f-abcde", "g"))


def test_capacity_view_120x36(snap_compare):
    app = app_for(TriageSource({"r0": "sized", "r1": "healthy"}))
    assert snap_compare(app, terminal_size=(120, 36), run_before=_on("r0", "c", polls=6))

"""A replica that goes away (a rollout deleted its pod) never leaves a screen silently showing
something else: the detail screen says "gone since HH:MM:SS" and freezes its plots' time axis
there; triage says whom it follows instead, for as long as it does."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

from tests.ui.conftest import make_app, prime
from tui.screens.detail import DetailScreen
from tui.screens.triage import TriageScreen

NAME = "llama-70b-0"


@asynccontextmanager
async def _deleted_under(screen):
    """`screen` open on NAME, then NAME removed from the fleet as a rollout does: yields (app,
    pilot, the clock text of the refresh that lost it)."""
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        await app.push_screen(screen)
        await pilot.pause()
        app.monitor.source.profiles.pop(NAME)
        app.monitor.forget({NAME})
        await prime(pilot, 1)
        yield app, pilot, time.strftime("%H:%M:%S", time.localtime(app.monitor.state.ts))


def _screen_text(app) -> str:
    return app.export_screenshot().replace("&#160;", " ")


async def test_detail_of_a_deleted_replica_says_gone_since_and_freezes():
    async with _deleted_under(DetailScreen(NAME)) as (app, pilot, gone):
        evidence = str(app.screen.query_one("#evidence").render())
        assert f"gone since {gone}" in evidence, evidence
        assert f"gone {gone}" in _screen_text(app)  # the plots' time axis ends there
        await prime(pilot, 3)  # later refreshes change nothing
        assert f"gone since {gone}" in str(app.screen.query_one("#evidence").render())
        assert app.screen.frozen_at == app.screen.gone_since


async def test_triage_says_whom_it_follows_when_its_replica_is_gone():
    async with _deleted_under(TriageScreen(NAME)) as (app, pilot, gone):
        screen = app.screen
        assert screen.replica != NAME  # it follows another replica of the workload...
        head = screen.head_text
        assert f"{NAME} gone since {gone}" in head and f"following {screen.replica}" in head, head
        await prime(pilot, 3)  # ...and keeps saying so, not just in a passing message
        assert f"{NAME} gone since {gone}" in screen.head_text

import time

import pytest
from textual.widgets import Input

from tests.ui.scripted import ScriptedSource
from tui.app import KvwatchApp
from tui.core.monitor import Monitor

PROFILES = {
    "llama-8b-7d9f-abcde": "pressure",
    "llama-8b-7d9f-xyz12": "healthy",
    "llama-70b-0": "compute",
    "llama-8b-gone": "down",
    "node-sick": "fault",
}


@pytest.fixture(autouse=True)
def _steady_cursor(monkeypatch):
    """An input's cursor blinks on a 0.5 s timer, so a snapshot showed it or not depending on
    how busy the machine was: in tests it never blinks (shown while focused, as on a key)."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    # Clock text on screen must not depend on the machine's time zone (snapshots).
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    time.tzset()


def make_app(profiles=None, **kw) -> KvwatchApp:
    src = ScriptedSource(dict(profiles or PROFILES))
    return KvwatchApp(Monitor(src), 1.0, autostart=False, **kw)


async def prime(pilot, n: int = 4) -> None:
    """Run n refreshes through the real pipeline, then let the screen settle."""
    for _ in range(n):
        await pilot.app.refresh_once()
        await pilot.pause()
    await pilot.pause()

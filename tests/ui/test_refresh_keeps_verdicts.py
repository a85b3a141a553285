"""`ctrl+r` ("refresh now") and an irregular refresh cadence add scrapes: they never discard a
replica's history or its verdict (a refresh shortly after another used to look like an outage
to the next one, and every replica went back to "collecting")."""

from __future__ import annotations

from tests.ui.conftest import prime
from tests.ui.scripted import ScriptedSource
from tui.app import KvwatchApp
from tui.core.monitor import Monitor

PROFILES = {"vllm-0": "pressure", "vllm-1": "pressure", "vllm-2": "healthy"}


def _app(step: float) -> tuple[KvwatchApp, ScriptedSource]:
    # `kvwatch demo --speed 20` with a 2 s refresh: 40 simulated seconds between scrapes
    src = ScriptedSource(dict(PROFILES), step=step)
    return KvwatchApp(Monitor(src), 2.0, autostart=False), src


def _verdicts(app) -> dict[str, str]:
    return {v.name: v.verdict for v in app.monitor.state.replicas}


def _table(app) -> str:
    return app.export_screenshot().replace("&#160;", " ")


async def test_ctrl_r_keeps_every_verdict():
    app, src = _app(40.0)
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 5)
        judged = _verdicts(app)
        assert judged == {"vllm-0": "kv-pressure", "vllm-1": "kv-pressure", "vllm-2": "healthy"}, judged
        for _ in range(3):
            src.step = 4.0  # the key, a fifth of an interval after the last refresh
            await pilot.press("ctrl+r")
            await pilot.pause()
            assert _verdicts(app) == judged
            src.step = 36.0  # then the timed refresh, on its own schedule
            await prime(pilot, 1)
            assert _verdicts(app) == judged, [(v.name, v.finding.summary) for v in app.monitor.state.replicas]
            assert "collecting" not in _table(app)


async def test_an_irregular_refresh_cadence_keeps_every_verdict():
    # a loaded machine: a late refresh, then one soon after it (the loop sleeps what is left)
    app, src = _app(40.0)
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 5)
        judged = _verdicts(app)
        for step in (70.0, 10.0, 55.0, 5.0, 90.0, 40.0):
            src.step = step
            await prime(pilot, 1)
            assert _verdicts(app) == judged, (step, [(v.name, v.finding.summary) for v in app.monitor.state.replicas])

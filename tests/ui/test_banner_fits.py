"""The pressure banner with kv-pressure and queue/latency alarms together fits 160 columns:
the alarms are named by replica and kind, not cut mid-text ("(baseline…")."""

from __future__ import annotations

from types import SimpleNamespace

from tests.ui.conftest import make_app, prime
from tui.core.diagnosis.alarm import Alarm
from widgets.header import PressureBanner


async def test_banner_with_alarms_is_not_cut_at_160():
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 2)
        reps = [SimpleNamespace(name=f"llama-8b-7d9f-{i:05d}", verdict="kv-pressure" if i < 2 else "healthy")
                for i in range(6)]
        alarms = tuple(Alarm(f"llama-8b-7d9f-{i:05d}", ("queue", "latency"),
                             f"queue 42 = 8.4x its baseline 5.0; TTFT p95 3.2 s = 6.1x its baseline 0.52 s (baseline {i})",
                             0.0) for i in range(2, 5))
        banner = app.screen.query_one(PressureBanner)
        banner.show(SimpleNamespace(replicas=reps, alarms=alarms))
        await pilot.pause()
        text = str(banner.render())
        assert len(text) <= 160 - 2, text  # drawn whole (padding 1 each side), not ellipsised
        assert "llama-8b-7d9f-00002" in text and "enter: evidence" in text, text

"""The banner names a fleet imbalance (a hot replica beside idle ones of its model)."""

from __future__ import annotations

import os

from textual.app import App, ComposeResult

from tests.labelled import DATA
from tui.core.monitor import Monitor
from tui.core.record import read_log
from tui.core.sources.replay import polls
from widgets.header import PressureBanner


def _state(until: float, name: str):
    mon = Monitor()
    state = None
    for batch in polls(sorted(read_log(os.path.join(DATA, name + ".jsonl.gz")), key=lambda s: s.ts)):
        if batch[0].ts > until:
            break
        state = mon.ingest(batch)
    return state


class _BannerApp(App):
    def compose(self) -> ComposeResult:
        yield PressureBanner(lambda: {})


async def test_banner_shows_fleet_imbalance_and_stays_off_when_all_busy():
    app = _BannerApp()
    async with app.run_test(size=(200, 5)) as pilot:
        banner = app.query_one(PressureBanner)
        banner.show(_state(1764000030.0, "vllm-fleet-all-busy"))
        await pilot.pause()
        assert "IMBALANCE" not in str(banner.render())
        banner.show(_state(1764000200.0, "vllm-fleet-imbalance"))
        await pilot.pause()
        text = str(banner.render())
        assert banner.has_class("-on")
        assert "FLEET IMBALANCE" in text and "rebalance, not scale out" in text and "imb-0" in text

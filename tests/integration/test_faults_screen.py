"""Issue 10 on screen: a replica's hostile labels through the real direct source into the fleet and
detail screens at 80x24 (Textual pilot, endpoints from tests/faultserver.py)."""

from __future__ import annotations

import re


from tests.faultserver import FaultServer
from tests.ui.kube_app import until
from tui.app import KvwatchApp
from tui.core.monitor import Monitor
from tui.core.sources.direct import DirectSource, Target
from tui.screens.detail import DetailScreen
from widgets.fleet_table import FleetTable

ESC = re.compile(r"[\x1b\x07\x9b]")


async def detail_text(mode: str, *keys: str) -> str:
    """The detail screen's evidence text for one replica served in `mode`, after `keys`."""
    async with FaultServer(lifetime=30) as fs:
        url = await fs.add(mode)
        app = KvwatchApp(Monitor(DirectSource([Target("r0", url)], timeout=3.0)), 1.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.screen.query(FleetTable) and app.screen.query_one(FleetTable).row_count)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen) and evidence(app))
            for k in keys:
                before = evidence(app)
                await pilot.press(k)
                await until(pilot, lambda before=before: evidence(app) != before)  # the key's effect is drawn
            return evidence(app)


def evidence(app) -> str:
    return app.screen.query_one("#evidence").render().plain


async def test_a_huge_model_name_is_truncated_with_an_ellipsis() -> None:
    text = await detail_text("long_model")
    assert "mmmm" in text  # the model is shown
    longest = max(len(run) for run in re.findall(r"m{4,}", text))
    assert longest <= 80, f"model name shown at {longest} characters"
    assert "…" in text or "..." in text
    full = await detail_text("long_model", "m")  # the full value on demand
    assert max(len(run) for run in re.findall(r"m{4,}", full)) >= 4000


async def test_escape_sequences_and_markup_in_labels_stay_inert() -> None:
    text = await detail_text("escapes")
    assert "RED" in text and "[bold red]markup" in text  # shown as text, not styling
    assert not ESC.search(text)


async def test_prometheus_down_at_start_is_shown_and_retried_in_the_tui() -> None:
    """Issue 10 defect 5: the TUI shows the start error (not "waiting" forever) and recovers."""
    from tui.core.sources.prometheus import PrometheusSource
    from tui.screens.fleet import SelectedStrip

    async with FaultServer(lifetime=30) as fs:
        url = await fs.add("prometheus", fail="500", fails=2)
        app = KvwatchApp(Monitor(PrometheusSource(url, timeout=2.0)), 0.5)
        async with app.run_test(size=(100, 30)) as pilot:

            def said() -> str:
                strip = app.screen.query_one(SelectedStrip).render()
                return getattr(strip, "plain", str(strip))

            await until(pilot, lambda: "500" in said() and "retrying" in said(), what=said)
            await until(pilot, lambda: app.monitor.started and app.last_error is None, what=said)  # recovered by itself
            assert len(fs.requests(url)) >= 3  # it kept asking

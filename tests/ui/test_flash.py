"""Messages go to a one-line flash bar at the bottom (k9s), never a toast over the content: the
bar's row is its own, so no button or evidence is ever covered, at 160x45 or 80x24."""

from __future__ import annotations

from textual.widgets import Button

from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import until
from tui.core.cluster.base import ActionPlan, Target
from tui.screens.confirm import ConfirmScreen
from widgets.flash import FlashBar


def _plan() -> ActionPlan:
    return ActionPlan("scale", Target("Deployment", "inference", "llama-8b"), "scale deployment/llama-8b 4 -> 8",
                      diff="-replicas: 4\n+replicas: 8", patch=[{"op": "replace", "path": "/spec/replicas", "value": 8}],
                      patch_type="json")


def _toasts(app) -> list:
    return [t for t in app.screen.query("Toast") if t.display and t.region.area]


async def _flashed(pilot, message: str, timeout: float) -> FlashBar:
    await prime(pilot, 1)
    pilot.app.notify(message, timeout=timeout)
    await pilot.pause()
    bar = pilot.app.screen.query_one(FlashBar)
    assert message in str(bar.render())
    return bar


async def test_a_message_shows_in_the_flash_bar_not_a_toast():
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        bar = await _flashed(pilot, "saved /tmp/x.svg", 5)
        assert bar.region.y == 44 and bar.region.height == 1  # the bottom row
        assert _toasts(app) == []


async def test_the_flash_clears_after_its_timeout():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        bar = await _flashed(pilot, "theme kvwatch-light", 0.3)
        await until(pilot, lambda: str(bar.render()).strip() == "", what=lambda: repr(str(bar.render())))


async def test_flashes_over_a_dialog_at_80x24_cover_no_button():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 1)
        app.push_screen(ConfirmScreen(_plan()))
        await pilot.pause()
        for i in range(4):
            app.notify(f"message {i}: something happened", severity="warning", timeout=10)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        bar = screen.query_one(FlashBar)
        assert "message 3" in str(bar.render())  # the newest one
        for b in screen.query(Button):
            assert not b.region.overlaps(bar.region), (b.label, b.region, bar.region)
        assert _toasts(app) == []

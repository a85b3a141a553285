"""What a steady refresh of the fleet screen leaves alone: a line whose text did not change is
not updated (a Static's update asks the whole screen for a new layout, every second)."""

from __future__ import annotations

from tests.ui.conftest import make_app, prime
from tui.screens.fleet import ViewModes


async def test_an_unchanged_modes_line_is_not_updated_and_a_changed_one_is(monkeypatch):
    app = make_app()
    calls: list[str] = []
    update = ViewModes.update

    def counted(self, content="", **kw):
        calls.append(str(content))
        return update(self, content, **kw)

    monkeypatch.setattr(ViewModes, "update", counted)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 2)
        calls.clear()
        await prime(pilot, 3)
        assert calls == [], calls
        screen = app.screen
        screen.action_faults()
        await pilot.pause()
        line = screen.query_one(ViewModes)
        assert calls and "faults only" in calls[-1]
        assert "faults only" in str(line.render()) and line.has_class("-on")
        calls.clear()
        await prime(pilot, 2)
        assert calls == []
        screen.action_faults()
        await pilot.pause()
        assert calls == [""] and not line.has_class("-on")


async def test_a_steady_refresh_with_the_banner_on_does_not_lay_the_screen_out_again(monkeypatch):
    """The banner (a replica in kv-pressure) repainted with the same text every second asked for
    a new layout of the whole screen: every widget on it painted again, every refresh."""
    from textual.screen import Screen

    from widgets.header import PressureBanner

    app = make_app()
    layouts: list[int] = []
    banners: list[str] = []
    relayout = Screen._refresh_layout
    update = PressureBanner.update

    def counted_layout(self, *a, **kw):
        layouts.append(1)
        return relayout(self, *a, **kw)

    def counted_update(self, content="", **kw):
        banners.append(str(content))
        return update(self, content, **kw)

    monkeypatch.setattr(Screen, "_refresh_layout", counted_layout)
    monkeypatch.setattr(PressureBanner, "update", counted_update)
    async with app.run_test(size=(160, 40)) as pilot:
        await prime(pilot, 6)
        banner = app.screen.query_one(PressureBanner)
        assert banner.has_class("-on") and "KV-CACHE PRESSURE" in str(banner.render())
        shown = str(banner.render())
        layouts.clear()
        banners.clear()
        await prime(pilot, 4)
        assert str(banner.render()) == shown
        assert banners == [] and layouts == [], (len(banners), len(layouts))


async def test_a_message_on_the_flash_line_does_not_lay_the_screen_out_again(monkeypatch):
    """The flash line is one row high whatever it says: a message (an alarm's, every few
    seconds on a busy fleet) repaints that row, not the layout of the whole screen."""
    from textual.screen import Screen

    from widgets.flash import FlashBar

    app = make_app()
    layouts: list[int] = []
    relayout = Screen._refresh_layout

    def counted_layout(self, *a, **kw):
        layouts.append(1)
        return relayout(self, *a, **kw)

    monkeypatch.setattr(Screen, "_refresh_layout", counted_layout)
    async with app.run_test(size=(160, 40)) as pilot:
        await prime(pilot, 3)
        bar = app.screen.query_one(FlashBar)
        layouts.clear()
        app.notify("queue far above its baseline on replica-x", title="alarm", severity="warning", timeout=30)
        await pilot.pause()
        await pilot.pause()
        assert "replica-x" in str(bar.render()) and bar.has_class("-warning")
        assert layouts == [], len(layouts)

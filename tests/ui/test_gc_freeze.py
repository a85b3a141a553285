"""The TUI's collections scan what is new, not the whole heap: every GC_EVERY refreshes what
survives a collection is frozen (a collection of the whole heap held the event loop 0.1-0.5 s
inside a key press), and every FULL_EVERY refreshes everything is collected, so cyclic garbage
that was alive at a freeze (a screen closed since) is freed all the same."""

from __future__ import annotations

import gc
import weakref

import tui.app
from tests.ui.conftest import make_app, prime
from tui.screens.detail import DetailScreen


async def test_after_a_refresh_collection_the_kept_heap_is_out_of_later_collections():
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, tui.app.GC_EVERY + 1)
        scanned, frozen = len(gc.get_objects()), gc.get_freeze_count()
        assert frozen > 5 * scanned, (frozen, scanned)  # the next collection scans a fraction
    assert gc.get_freeze_count() == 0  # the app gives the process its collector back


async def test_a_screen_closed_after_a_freeze_is_freed_by_the_collection_of_everything(monkeypatch):
    monkeypatch.setattr(tui.app, "GC_EVERY", 3)
    monkeypatch.setattr(tui.app, "FULL_EVERY", 12)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 2)
        await pilot.press("enter")
        while not isinstance(app.screen, DetailScreen):
            await pilot.pause()
        detail = weakref.ref(app.screen)
        await prime(pilot, 3)  # a freeze with the detail screen open
        await pilot.press("escape")
        while isinstance(app.screen, DetailScreen):
            await pilot.pause()
        await prime(pilot, 1)
        gc.collect()
        assert detail() is not None  # frozen: the collections between do not free it
        await prime(pilot, 12)  # past FULL_EVERY
        assert detail() is None

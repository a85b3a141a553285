"""A screen opens without the garbage collector running inside the opening: from the key to the
first frame that shows the screen's content, collections are held (one at 64 replicas took up
to ~0.4 s, the p95 of bench/bench_screen_open.py), and the collector runs again right after,
whatever happens to the screen (it never stays off)."""

from __future__ import annotations

import gc
import tempfile
from functools import partial
from pathlib import Path

import pytest

from tests.ui.conftest import make_app, prime
from tests.ui.test_screen_open import _until as until_frames
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.sim import SimCluster
from tui.core.sim.fleet import SimFleet
from tui.screens.detail import DetailScreen
from tui.screens.edit_args import EditArgsScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen
from tui.screens.triage import TriageScreen


@pytest.fixture
def eager_collector():
    """Collections every 50 allocations: without the hold, every opening holds several."""
    saved = gc.get_threshold()
    gc.set_threshold(50, 5, 5)
    yield
    gc.set_threshold(*saved)
    gc.enable()


def _app_with_cluster(load_delay_s: float = 60):
    app = make_app()
    fleet = SimFleet("long-prompts", replicas=2, seed=3, start_time=1.75e9)
    app.cluster = SimCluster(fleet, audit=AuditLog(Path(tempfile.mkdtemp()) / "audit.jsonl"),
                             load_delay_s=load_delay_s)
    return fleet, app


class Openings:
    """Collections counted from `start()` to the first frame for which `ready(screen)` holds."""

    def __init__(self, app) -> None:
        self.collections = 0
        self.counting = False
        self.opened = False
        self.ready = lambda s: False
        display = app._display

        def recording(screen, renderable) -> None:
            display(screen, renderable)
            if renderable is not None and self.counting and self.ready(screen):
                self.counting, self.opened = False, True

        app._display = recording
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, _info: dict) -> None:
        if phase == "start" and self.counting:
            self.collections += 1

    def start(self, ready) -> None:
        self.collections, self.opened, self.ready, self.counting = 0, False, ready, True

    def close(self) -> None:
        gc.callbacks.remove(self._on_gc)


_until = partial(until_frames, limit=500)  # the eager collector makes every frame slow


async def test_no_collection_between_the_key_and_the_screens_first_frame(eager_collector):
    fleet, app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        openings = Openings(app)
        try:
            for key, ready in (("enter", lambda s: isinstance(s, DetailScreen)),
                               ("t", lambda s: isinstance(s, TriageScreen)),
                               ("g", lambda s: isinstance(s, TriageScreen) and s.mode == "runbook"),
                               ("question_mark", lambda s: isinstance(s, HelpScreen))):
                openings.start(ready)
                await pilot.press(key)
                await _until(pilot, lambda: openings.opened)
                assert openings.collections == 0, (key, openings.collections)
                await _until(pilot, gc.isenabled)  # and the collector runs again once it is drawn
                await pilot.press("escape")
                await _until(pilot, lambda: isinstance(app.screen, FleetScreen))
            form = EditArgsScreen(app.cluster, fleet.namespace, "llama-8b")
            openings.start(lambda s: s is form and s.cmd is not None)
            await app.push_screen(form)
            await _until(pilot, lambda: openings.opened)
            assert openings.collections == 0, ("edit form", openings.collections)
            await _until(pilot, gc.isenabled)
        finally:
            openings.close()
    assert gc.isenabled()


async def test_the_collector_runs_again_when_a_screen_never_shows_its_content(eager_collector):
    """The edit form's Deployment read never ends: the hold is capped in time."""
    import asyncio

    fleet, app = _app_with_cluster()

    async def never(*_a, **_kw):
        await asyncio.Event().wait()

    app.cluster.get_deployment = never
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 2)
        form = EditArgsScreen(app.cluster, fleet.namespace, "llama-8b")
        await app.push_screen(form)
        await _until(pilot, lambda: app.screen is form)
        await _until(pilot, gc.isenabled)
        assert form.cmd is None and form.load_error is None  # still reading: the cap released it
    assert gc.isenabled()


async def test_no_collection_between_ctrl_p_and_the_palettes_first_frame_with_its_commands(eager_collector):
    """Textual's command palette fills its list a few frames after its first (the commands are
    gathered in a worker): the hold lasts until the list shows (a collection there took up to
    150 ms beside two busy loops, bench/bench_screen_open.py)."""
    from textual.command import CommandPalette
    from textual.widgets import OptionList

    _fleet, app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        openings = Openings(app)
        try:
            def listed(s) -> bool:
                return isinstance(s, CommandPalette) and any(o.option_count for o in s.query(OptionList))

            for _ in range(3):
                openings.start(listed)
                await pilot.press("ctrl+p")
                await _until(pilot, lambda: openings.opened)
                assert openings.collections == 0, openings.collections
                await _until(pilot, gc.isenabled)
                await pilot.press("escape")
                await _until(pilot, lambda: isinstance(app.screen, FleetScreen))
        finally:
            openings.close()
    assert gc.isenabled()

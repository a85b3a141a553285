"""A screen uncovered by a pop shows the latest state in its very first frame.

A covered screen misses draws (tui/app.py `draw`); its widgets keep the lines they last painted.
Textual repaints the uncovered screen from those lines as soon as its own task runs after the
pop, so the state must be on it before then. The catch-up used to be queued behind whatever the
app had still to await, typically Textual's removal of the screen popped just before
(`_prune` queues that `AwaitRemove` with `call_next`). A trace of the 80x24 pty game day under
load caught it: the third escape's flush was [AwaitRemove(TriageScreen), _show_missed, do_pop],
and the fleet painted two frames between them, exactly as it was when it was covered (the clock
at 15:08:00, `llama-8b-3 ✓ healthy 97%`), while the flash line said a later event.

Every frame handed to the terminal goes through a VT emulator here (tests/ui/vtframes.py), as in
the pty game day.
"""

from __future__ import annotations

import asyncio
from typing import Callable

import pytest

from tests.ui.conftest import make_app, prime
from tests.ui.vtframes import Terminal
from tests.waits import eventually
from tui.screens.detail import DetailScreen
from tui.screens.fleet import FleetScreen
from tui.screens.triage import TriageScreen
from widgets.fleet_table import FleetTable

NAME = "llama-8b-turns"
OTHER = "llama-8b-steady"


def rows_of(lines: list[str], name: str) -> list[str]:
    return [ln for ln in lines if name in ln]


async def _covered_while_it_turns(pilot, covers: Callable[[], list]) -> None:
    """The fleet drawn with NAME healthy, covered by `covers`, then NAME pressured."""
    app = pilot.app
    await prime(pilot, 3)
    assert "healthy" in "".join(c.plain for c in app.screen.query_one(FleetTable).get_row(NAME))
    for screen in covers():
        await app.push_screen(screen)
        await pilot.pause()
    app.monitor.source.profiles[NAME] = "pressure"
    for _ in range(40):
        if next(v.verdict for v in app.monitor.state.replicas if v.name == NAME) == "kv-pressure":
            break
        await prime(pilot, 1)
    else:
        raise AssertionError(f"{NAME} never judged kv-pressure")


async def _pop_behind_a_pending_await(app, term: Terminal) -> None:
    """Pop the top screen while the app still has something to await first (as when Textual's
    removal of the screen popped before is pending), until the uncovered fleet painted a frame."""
    gate = asyncio.Event()

    async def removal_still_pending() -> None:
        await gate.wait()

    app.call_next(removal_still_pending)
    try:
        app.pop_screen()
        await eventually(lambda: term.of(FleetScreen), what="a frame of the uncovered fleet")
    finally:
        gate.set()


async def _assert_uncovered_fleet_current(size: tuple[int, int], covers: Callable[[], list]) -> None:
    app = make_app({NAME: "healthy", OTHER: "healthy"})
    async with app.run_test(size=size) as pilot:
        await _covered_while_it_turns(pilot, covers)
        while len(app.screen_stack) > 3:  # one screen left over the fleet
            await app.pop_screen()
            await pilot.pause()
        term = Terminal(app, *size)
        await _pop_behind_a_pending_await(app, term)
        await pilot.pause()
        frames = term.of(FleetScreen)
        for i, lines in enumerate(frames):  # from the very first frame after the pop
            stale = [ln for ln in rows_of(lines, NAME) if "healthy" in ln]
            assert not stale, "\n".join([f"frame {i + 1} of {len(frames)} of the uncovered fleet:", *lines])
        assert any("kv-pressure" in ln for ln in rows_of(frames[-1], NAME)), "\n".join(frames[-1])


@pytest.mark.parametrize("size,covers", [
    ((80, 24), lambda: [DetailScreen(NAME)]),
    ((120, 30), lambda: [DetailScreen(NAME), TriageScreen(NAME)]),  # the game day's way back
    ((160, 45), lambda: [DetailScreen(NAME), TriageScreen(NAME)]),
], ids=["80x24", "120x30", "160x45"])
async def test_the_fleet_uncovered_by_a_pop_is_current_from_its_first_frame(size, covers):
    await _assert_uncovered_fleet_current(size, covers)

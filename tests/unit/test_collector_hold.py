"""CollectorHold: held once, released once, and never turns on a collector someone else turned
off (bench_screen_open.py --no-gc, an embedding process)."""

from __future__ import annotations

import gc

from tui.core.perf import CollectorHold


def test_a_hold_disables_the_collector_until_released_once():
    hold = CollectorHold()
    assert gc.isenabled()
    try:
        assert hold.hold() and not gc.isenabled()
        assert not hold.hold()  # held already: one release ends it
        hold.release()
        assert gc.isenabled() and not hold.held
        hold.release()  # a second release (the timer after the frame) changes nothing
        assert gc.isenabled()
    finally:
        gc.enable()


def test_a_collector_turned_off_elsewhere_stays_off():
    hold = CollectorHold()
    gc.disable()
    try:
        assert not hold.hold()
        hold.release()
        assert not gc.isenabled()
    finally:
        gc.enable()

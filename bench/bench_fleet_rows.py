"""The fleet screen's own CPU per refresh at N replicas: building the rows (FleetScreen.show_state:
header, banner, sort, the table's rows on screen) and painting them (the compositor's update),
on the states kvwatch's own Monitor makes from N live real-size vLLM V1 pages.

    .venv/bin/python bench/bench_fleet_rows.py [--replicas 256] [--rounds 40] [--size 200x50]
                                               [--tree PATH ...] [--reps 2] [--check] [--profile N]

The pages are bench/realpage.py's, one step further at every refresh as bench/fleetserve.py's
`--live` pages are (8 seeds, endpoints spread over their steps), parsed and ingested in this
process (not timed); the screen is a headless KvwatchApp of the size given. Per refresh:
  show    FleetScreen.show_state (what the app does when a refresh arrives)
  paint   the screen's update as its timer runs it: layout if asked, the compositor's render of
          what changed (headless: the bytes are made, not written)
  settle  the rest until the app is idle: the messages show left queued (cursor, highlight)
CPU time (process_time), medians over the timed rounds of every run. `--tree PATH` (repeatable)
times other checkouts on the same states, each in its own app, alternating with this one
(`--reps` runs each), so that a change in the machine's load reaches every tree; `--check` then
also runs every tree once more, untimed, and says after how many refreshes its whole screen
(characters and styles) was the same as this tree's. `--profile N` cProfiles show + paint of
this tree (and what runs until idle) and prints the N costliest functions (`--sort`; the timings
are then inflated).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe, load_average  # noqa: E402
from bench.realpage import render_v1_page  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SEEDS = 8  # as bench/fleetserve.py's live pages


def make_states(n: int, rounds: int):
    """`rounds` FleetStates of n replicas, one live step apart (this tree's core makes them)."""
    from tui.core import engines
    from tui.core.model import Scrape
    from tui.core.monitor import Monitor

    pages: dict[tuple[int, int], object] = {}
    mon = Monitor(None)
    t0 = 1_700_000_000.0
    out = []
    for k in range(rounds):
        batch = []
        for i in range(n):
            key = (i % SEEDS, i // SEEDS + k)
            if key not in pages:
                pages[key] = engines.read_page(render_v1_page(model=MODEL, seed=key[0], step=key[1]))[0]
            batch.append(Scrape(ts=t0 + k, replica=f"127.0.0.1:{40000 + i}", sample=pages[key], latency_s=0.01))
        out.append(mon.ingest(batch, now=t0 + k))
        if len(pages) > 4 * SEEDS * (n // SEEDS + 2):
            pages = {key: p for key, p in pages.items() if key[1] > k}
    return out


_PAINT = [0.0]  # CPU of the screens' updates (Screen._on_timer_update) since last reset


def _count_paints() -> None:
    from textual.screen import Screen

    update = Screen._on_timer_update

    def timed(self) -> None:
        c = time.process_time()
        try:
            update(self)
        finally:
            _PAINT[0] += time.process_time() - c

    Screen._on_timer_update = timed  # type: ignore[method-assign]


def _screen_digest(screen) -> str:
    """The hash of every cell the screen shows now: its characters and their styles."""
    import hashlib

    update = screen._compositor.render_update(full=True)  # a LayoutUpdate: its lines' chops (Strips)
    cells = [[[(seg.text, str(seg.style)) for seg in chop] for chop in line] for line in update.strips]
    return hashlib.sha256(repr(cells).encode()).hexdigest()


def load_tree(tree: Path):
    """KvwatchApp, FleetScreen and Monitor of the checkout at `tree` (modules imported afresh)."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("tui", "widgets")]:
        del sys.modules[name]
    sys.path.insert(0, str(tree))
    try:
        app_mod = importlib.import_module("tui.app")
        fleet = importlib.import_module("tui.screens.fleet")
        monitor = importlib.import_module("tui.core.monitor")
    finally:
        sys.path.remove(str(tree))
    return app_mod.KvwatchApp, fleet.FleetScreen, monitor.Monitor


async def drive(kit, states, size, warmup: int, times: dict, prof=None, screens: list | None = None) -> None:
    """Show `states` one refresh at a time on a fresh app of a tree; record CPU per part, and
    with `screens` the screen's text and colours after each timed refresh (its hash)."""
    app_cls, screen_cls, monitor_cls = kit
    app = app_cls(monitor_cls(None), 1.0, autostart=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, screen_cls), type(screen)
        for k, state in enumerate(states):
            app.monitor.state = state
            if prof is not None and k >= warmup:
                prof.enable()
            c0 = time.process_time()
            app.drawn = state
            screen.show_state(state)
            c1 = time.process_time()
            _PAINT[0] = 0.0
            await pilot.pause()  # the screen's update timer paints; its CPU is counted apart
            c2 = time.process_time()
            if prof is not None:
                prof.disable()
            if k >= warmup:
                times["show"].append(c1 - c0)
                times["paint"].append(_PAINT[0])
                times["settle"].append(c2 - c1 - _PAINT[0])
                if screens is not None:
                    screens.append(_screen_digest(screen))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=40, help="timed refreshes (after --warmup)")
    ap.add_argument("--warmup", type=int, default=16, help="refreshes shown first, untimed (sparklines fill)")
    ap.add_argument("--size", default="200x50", help="COLSxROWS")
    ap.add_argument("--tree", type=Path, action="append", default=[], help="another checkout, timed alternately")
    ap.add_argument("--reps", type=int, default=2, help="runs per tree, alternating between trees")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"), help="--profile's order")
    ap.add_argument("--check", action="store_true",
                    help="also check that every tree's screen is the same after every timed refresh (not timed)")
    args = ap.parse_args()
    os.environ.setdefault("TZ", "UTC")
    size = tuple(int(x) for x in args.size.split("x"))
    print(describe() + "; " + load_average() + " at start")
    total = args.warmup + args.rounds
    trees = [ROOT, *[t.resolve() for t in args.tree]]
    kits = {}
    states = None
    for tree in trees:
        kits[tree] = load_tree(tree)
        if states is None:  # the states come from the first tree's core, shown by every tree
            t = time.perf_counter()
            states = make_states(args.replicas, total)
            print(f"{args.replicas} replicas, {total} live refreshes made in {time.perf_counter() - t:.0f} s; "
                  f"{args.size}, {args.warmup} untimed then {args.rounds} timed")
    # the collector as the command runs it (tui/cli.py: tune_gc; the app freezes what survives)
    from tui.core.perf import tune_gc

    gc.collect()
    tune_gc()
    orders = [tuple(v.name for v in s.replicas) for s in states]
    print(f"verdicts in the states: {sorted({v.verdict for s in states for v in s.replicas})}; "
          f"refreshes whose monitor order changed: {sum(a != b for a, b in zip(orders, orders[1:], strict=False))}")
    times = {tree: {"show": [], "paint": [], "settle": []} for tree in trees}
    prof = cProfile.Profile() if args.profile else None
    _count_paints()
    for rep in range(args.reps):  # this tree, the others, this tree again...: the load reaches all
        for tree in trees:
            kits[tree] = load_tree(tree)
            asyncio.run(drive(kits[tree], states, size, args.warmup, times[tree],
                              prof if (tree == ROOT and rep == 0) else None))
    if args.check:
        shown = {}
        for tree in trees:
            kits[tree] = load_tree(tree)
            shown[tree] = []
            asyncio.run(drive(kits[tree], states, size, args.warmup, {"show": [], "paint": [], "settle": []},
                              screens=shown[tree]))
        for tree in trees[1:]:
            same = sum(a == b for a, b in zip(shown[ROOT], shown[tree], strict=True))
            print(f"screens after each timed refresh, {tree} against {ROOT}: {same} of {len(shown[ROOT])} the same "
                  f"({len(set(shown[ROOT]))} different screens)")
    print(f"{'tree':<40} {'show ms':>8} {'paint ms':>9} {'settle ms':>10} {'sum ms':>8}")
    for tree in trees:
        med = {k: statistics.median(v) * 1e3 for k, v in times[tree].items()}
        print(f"{str(tree):<40} {med['show']:>8.2f} {med['paint']:>9.2f} {med['settle']:>10.2f} "
              f"{sum(med.values()):>8.2f}")
    if prof is not None:
        by = "own time" if args.sort == "tottime" else "time with their callees"
        print(f"\nshow + paint + settle of {ROOT} under cProfile, {args.profile} costliest functions by {by}:")
        pstats.Stats(prof, stream=sys.stdout).sort_stats(args.sort).print_stats(args.profile)
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

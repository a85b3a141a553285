"""How long each screen takes to open at 64 replicas: key press to the first frame that shows
the screen's content.

    .venv/bin/python bench/bench_screen_open.py [--replicas 64] [--reps 15] [--size 160x45]
        [--against OLD_TREE] [--rounds 3] [--only SCREEN [--profile FILE.pstats]]

Headless (Textual's test driver: every frame is composed and rendered as for a terminal, only
not written), the stepped simulated cluster behind the mitigation keys, a fleet primed with 31
refreshes (a session past its first half minute: the app's collections then scan only what
is new, tui/app.py refresh_once), the garbage collector tuned as the command tunes it. Each screen is opened `reps`
times from the fleet screen and closed again.

"Opened" is the first frame the app hands to the terminal (`App._display`) for that screen
at a moment when its content is set: the detail's evidence and its plots (or their numbers),
the diagnosis body of the view asked for, the help table, the edit form's fields read from the
Deployment (or the reason it cannot be), the logs, events, describe and rollout screens' bodies
read from the (simulated) cluster, the GPU panel's body, the scale prompt's field, the
command palette's list, and the footer's keys on every screen that has one.
A placeholder ("reading...", an empty footer) does not count. After each open, once it has
settled, the screen's text is checked for what the open was to show (the replica's name, the
footer's "Help"; on the edit form a value and a default read from the Deployment), so a
predicate that lied would stop the run. The time is wall-clock (what
the user waits) and the process's CPU time over the same span (what the open costs, less
dependent on what else the machine runs). "gc max (n)": the longest garbage collection inside
one open (from the key to that frame), and how many opens had one over 20 ms: the command
collects rarely (tui/core/perf.py) but then for up to ~0.4 s at 64 replicas, and the p95 of a
long run is where one lands (the app holds the collector during an opening: tui/app.py).
`--no-gc` turns the collector off (a diagnostic: the screens' own cost); `--profile` writes cProfile's figures for the opens of the screens `--only` names (one tree).

`--against OLD_TREE` runs the same measurement on another checkout (e.g. `git worktree add
/tmp/open-base main`) in alternating rounds, so both see the same load; it prints both and
their ratio. Target (issue 21): every screen within 150 ms at 64 replicas on a loaded 2-core
machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
KINDS = ("pressure", "healthy", "compute", "healthy", "fault", "healthy", "down", "healthy")


def _text(content) -> str:
    if type(content).__name__ == "Hanging":  # widgets/hanging.py: a Text drawn with hanging indents
        content = content.text
    return str(getattr(content, "plain", content) or "")


def _footer_ready(screen) -> bool:
    """Keys in the footer, where the screen has one (one widget drawing them all, or, in older
    trees, Textual's footer: a widget per key)."""
    from widgets.footer import KvFooter

    try:
        from widgets.footer import footer_keys
    except ImportError:
        from textual.widgets._footer import FooterKey

        return not screen.query(KvFooter) or bool(screen.query(FooterKey))
    return not screen.query(KvFooter) or bool(footer_keys(screen))


def _screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


PRIME = 31  # refreshes before the first opening

async def measure(replicas: int, reps: int, size: tuple[int, int],
                  only: str = "", profile: str = "", no_gc: bool = False) -> dict[str, list[tuple[float, float, float]]]:
    from textual.command import CommandPalette
    from textual.widgets import OptionList, Static

    from tests.ui.scripted import ScriptedSource
    from tui.app import KvwatchApp
    from tui.core.cluster.audit import AuditLog
    from tui.core.cluster.sim import SimCluster
    from tui.core.config import Config
    from tui.core.monitor import Monitor
    from tui.core.perf import tune_gc
    from tui.core.sim.fleet import SimFleet
    from tui.screens.detail import DetailScreen
    from widgets.fleet_table import FleetTable
    from tui.screens.describe import DescribeScreen
    from tui.screens.edit_args import EditArgsScreen
    from tui.screens.events import EventsScreen
    from tui.screens.gpu import GpuScreen
    from tui.screens.help import HelpScreen
    from tui.screens.logs import LogsScreen
    from tui.screens.prompt import PromptScreen, scale_prompt
    from tui.screens.rollout import RolloutScreen
    from tui.screens.triage import TriageScreen

    tune_gc()  # the collector as the command sets it (tui/cli.py): collections are rare there
    gc_s = [0.0]  # seconds spent collecting so far (a collection in an open is part of its time)
    gc_t0 = [0.0]

    def gc_timing(phase: str, _info: dict) -> None:
        if phase == "start":
            gc_t0[0] = time.perf_counter()
        else:
            gc_s[0] += time.perf_counter() - gc_t0[0]

    gc.callbacks.append(gc_timing)
    if no_gc:  # diagnostic: the screens' own cost, without the collector's pauses
        gc.disable()
    profiles = {f"llama-8b-7d9f-{i:05d}": KINDS[i % len(KINDS)] for i in range(replicas)}
    app = KvwatchApp(Monitor(ScriptedSource(profiles)), 1.0, autostart=False, config=Config(bell=False))
    fleet = SimFleet("long-prompts", replicas=2, seed=3, start_time=1.75e9)
    cluster = SimCluster(fleet, audit=AuditLog(Path(tempfile.mkdtemp()) / "audit.jsonl"), load_delay_s=60)
    app.cluster = cluster
    frames: list[tuple[float, float, object, bool, float]] = []  # (wall, cpu, screen, content set, gc s)
    ready_now = [lambda screen: False]
    display = app._display

    def recording_display(screen, renderable) -> None:
        display(screen, renderable)
        if renderable is not None:
            frames.append((time.perf_counter(), time.thread_time(), screen, ready_now[0](screen), gc_s[0]))

    app._display = recording_display  # every frame the terminal would get

    def static(screen, sel: str) -> str:
        found = screen.query(sel)
        return _text(found.first(Static).content) if found else ""

    def detail_ready(s) -> bool:
        if not isinstance(s, DetailScreen) or s.replica not in static(s, "#evidence"):
            return False
        plots = bool(getattr(s, "_pts", None)) and not s.has_class("-plots-pending")
        return plots and _footer_ready(s)

    def diag_ready(mode: str):
        return lambda s: (isinstance(s, TriageScreen) and s.mode == mode and bool(static(s, "#diag-body").strip())
                          and s.replica in static(s, "#diag-head") and _footer_ready(s))

    def palette_ready(s) -> bool:  # Textual fills its list from a worker, after its first frame
        return isinstance(s, CommandPalette) and any(o.option_count for o in s.query(OptionList))

    def help_ready(s) -> bool:
        return isinstance(s, HelpScreen) and bool(s.query("#help-table")) and \
            s.query_one("#help-table", Static).content is not None and bool(getattr(s, "rows", None))

    out: dict[str, list[tuple[float, float, float]]] = {}
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()

    async def timed(pilot, label: str, go, ready, expect: tuple[str, ...]) -> None:
        frames.clear()
        ready_now[0] = ready
        prof = profiler if profiler is not None and only and only in label else None
        if prof is not None:
            prof.enable()
        t0, c0, g0 = time.perf_counter(), time.thread_time(), gc_s[0]
        await go()
        end = t0 + 20.0
        while not any(f[3] for f in frames):
            if time.perf_counter() > end:
                raise TimeoutError(f"{label}: no frame with the content")
            await pilot.pause()
        if prof is not None:
            prof.disable()
        wall, cpu, screen, _, gc_at = next(f for f in frames if f[3])
        ready_now[0] = lambda s: False
        await pilot.pause()
        text = _screen_text(app)
        missing = [e for e in expect if e not in text]
        if missing:
            raise AssertionError(f"{label}: the frame said ready but the screen lacks {missing}:\n{text}")
        out.setdefault(label, []).append((wall - t0, cpu - c0, gc_at - g0))

    async with app.run_test(size=size) as pilot:
        for _ in range(PRIME):
            await app.refresh_once()
        await pilot.pause()
        fleet_screen = app.screen
        name = "llama-8b-7d9f-00000"  # in kv-pressure, with plots: selected, `enter` opens it
        table = fleet_screen.query_one(FleetTable)
        table.move_cursor(row=table._order.index(name), animate=False)
        await pilot.pause()
        back = (lambda s: s is fleet_screen)
        keyed = (("detail (enter)", "enter", detail_ready, (name, "Help")),
                 ("triage (t)", "t", diag_ready("triage"), (name, "Help")),
                 ("runbook (g)", "g", diag_ready("runbook"), (name, "Help")),
                 ("capacity (c)", "c", diag_ready("capacity"), (name, "Help")),
                 ("help (?)", "question_mark", help_ready, ("kvwatch keys",)),
                 ("palette (ctrl+p)", "ctrl+p", palette_ready, ("Search for commands",)))
        for label, key, ready, expect in keyed:
            for _ in range(reps if only in label else 0):
                await timed(pilot, label, lambda key=key: pilot.press(key), ready, expect)
                close = "back to fleet (esc)" if key == "enter" else "(close)"
                await timed(pilot, close, lambda: pilot.press("escape"), back, ("Help",))
        out.pop("(close)", None)

        def form_ready(s) -> bool:
            return isinstance(s, EditArgsScreen) and (s.cmd is not None or s.load_error is not None) \
                and _footer_ready(s)

        pod = (await cluster.list_pods(fleet.namespace))[0].name

        def body_ready(cls, sel: str):  # the body says more than "reading..."
            return lambda s: (isinstance(s, cls) and _footer_ready(s)
                              and bool(static(s, sel).strip()) and "reading..." not in static(s, sel))

        def events_ready(s) -> bool:  # the title says how many are shown once they are read
            return isinstance(s, EventsScreen) and _footer_ready(s) and " shown" in static(s, "#events-title")

        def prompt_ready(s) -> bool:
            return isinstance(s, PromptScreen) and bool(s.query("#prompt-input"))

        # screens pushed as their keys push them (tui/screens/mitigation.py): the edit form of the
        # simulated cluster's Deployment, the cluster's screens on one of its pods, the GPU panel
        # of the selected replica, the scale prompt as `s` builds it (pre-filled)
        ns = fleet.namespace
        pushed = (("edit form (e)", lambda: EditArgsScreen(cluster, ns, "llama-8b"), form_ready,
                   ("--max-num-seqs", "esc Cancel", "default 2048", "0.92")),
                  ("logs (l)", lambda: LogsScreen(cluster, ns, pod), body_ready(LogsScreen, "#logs-text"), (pod, "Help")),
                  ("events (v)", lambda: EventsScreen(cluster, ns), events_ready, ("Help",)),
                  ("describe (y)", lambda: DescribeScreen(cluster, ns, pod), body_ready(DescribeScreen, "#describe-text"),
                   ("kind: Pod", "Help")),
                  ("rollout (z)", lambda: RolloutScreen(cluster, ns, "llama-8b"), body_ready(RolloutScreen, "#rollout-text"),
                   ("llama-8b", "Help")),
                  ("gpu panel (u)", lambda: GpuScreen(name), body_ready(GpuScreen, "#gpu-text"), (name, "Help")),
                  ("scale prompt (s)", lambda: scale_prompt("deployment/llama-8b", 4, 6), prompt_ready,
                   ("kvwatch suggests 6", "replicas:")))
        for label, make, ready, expect in pushed:
            for _ in range(reps if only in label else 0):
                async def push(make=make) -> None:
                    await app.push_screen(make())
                await timed(pilot, label, push, ready, expect)
                app.pop_screen()
                while app.screen is not fleet_screen:
                    await pilot.pause()
                await pilot.pause()
    if profiler is not None:
        profiler.dump_stats(profile)
    return out


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def _run_tree(tree: Path, a) -> dict[str, list[list[float]]]:
    """One round of this measurement on `tree`'s code, in a process of its own."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(HERE), "--replicas", str(a.replicas), "--reps", str(a.reps), "--size", a.size,
           "--root", str(tree), "--json", "--only", a.only] + (["--no-gc"] if a.no_gc else [])
    res = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if res.returncode:
        raise SystemExit(f"{tree}: {res.stderr[-2000:]}")
    return json.loads(res.stdout)


def _row(xs: list[list[float]]) -> tuple[float, float, float, float, float, int]:
    """wall median, p95, CPU median, p95, the longest collection inside an open, and how many
    opens had one of over 20 ms (the collector runs rarely but long: it sets the p95 when one
    lands in an open)."""
    wall = [x[0] for x in xs]
    cpu = [x[1] for x in xs]
    gcs = [x[2] if len(x) > 2 else 0.0 for x in xs]
    return (1000 * statistics.median(wall), 1000 * p95(wall), 1000 * statistics.median(cpu), 1000 * p95(cpu),
            1000 * max(gcs), sum(1 for g in gcs if g > 0.02))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=64)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--size", default="160x45")
    ap.add_argument("--against", type=Path, help="another checkout, measured in alternating rounds")
    ap.add_argument("--rounds", type=int, default=3, help="with --against: rounds per tree")
    ap.add_argument("--only", default="", help="only the screens whose label contains this")
    ap.add_argument("--no-gc", action="store_true", help="diagnostic: the collector off (the screens' own cost)")
    ap.add_argument("--profile", default="", help="with --only: cProfile the opens into this pstats file")
    ap.add_argument("--root", type=Path, default=HERE.parents[1], help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    if a.profile:
        sys.path.insert(0, str(a.root))
        asyncio.run(measure(a.replicas, a.reps, (w, h), a.only, a.profile))
        return
    if a.json:
        sys.path.insert(0, str(a.root))
        import tui

        assert Path(tui.__file__).resolve().is_relative_to(a.root.resolve()), (tui.__file__, a.root)
        print(json.dumps(asyncio.run(measure(a.replicas, a.reps, (w, h), a.only, no_gc=a.no_gc))))
        return
    trees = {"this tree": HERE.parents[1]}
    if a.against:
        trees["against"] = a.against.resolve()
    res: dict[str, dict[str, list[list[float]]]] = {k: {} for k in trees}
    for i in range(a.rounds if a.against else 1):
        # each tree first in every other round: the load drifts within a round too
        for k, tree in (list(trees.items()) if i % 2 == 0 else list(trees.items())[::-1]):
            for label, xs in _run_tree(tree, a).items():
                res[k].setdefault(label, []).extend(xs)
    load = os.getloadavg()[0]
    n = len(next(iter(res["this tree"].values())))
    print(f"screen open, {a.replicas} replicas, {w}x{h}, {n} opens each, load {load:.1f} at the end (ms)"
          + (", the collector OFF (diagnostic)" if a.no_gc else ""))
    print(f"{'screen':<20} {'wall med':>8} {'p95':>6} {'cpu med':>8} {'p95':>6} {'gc max (n)':>11}" +
          (f" | {'against: wall med':>17} {'p95':>6} {'cpu med':>8} {'p95':>6} {'gc max (n)':>11}"
           f" | {'ratio wall/cpu med':>18}"
           if a.against else ""))
    for label, xs in res["this tree"].items():
        r = _row(xs)
        line = f"{label:<20} {r[0]:8.0f} {r[1]:6.0f} {r[2]:8.0f} {r[3]:6.0f} {r[4]:6.0f} ({r[5]:2d})"
        if a.against and label in res["against"]:
            o = _row(res["against"][label])
            line += (f" | {o[0]:17.0f} {o[1]:6.0f} {o[2]:8.0f} {o[3]:6.0f} {o[4]:6.0f} ({o[5]:2d})"
                     f" | {r[0] / o[0]:8.2f} / {r[2] / o[2]:.2f}")
        print(line)


if __name__ == "__main__":
    main()

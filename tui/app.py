"""The Textual application: polls the Monitor in a worker and hands FleetState to the screens.

Collection never stops (pause, modals, hidden screens only stop drawing), and one poll never
overlaps the next: the loop sleeps for what is left of the interval after each refresh.

The rest lives beside it, each behind one attribute or call: keys in tui/actions.py (registry)
and tui/palette.py, replay moves in `self.replay` (tui/replay_controls.py), the permission gate
in `self.mitigation_gate` (tui/gate.py), a context switch in `switch_cluster`, kv-pressure
entries in `self.pressure` (tui/alerts.py), theme choice in tui/theming.py.
"""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from textual import events, work
from textual.app import App
from textual.command import CommandPalette
from textual.notifications import SeverityLevel
from textual.message import Message
from textual.widgets import OptionList

from themes import DEFAULT_THEME, MONO_THEME, THEMES, VERDICT_DEFAULTS
from tui.core.config import Config
from tui.core.model import FleetState
from tui.core.monitor import Monitor
from tui.core.perf import CollectorHold, release_memory
from tui.core.diagnosis.incidents import IncidentMemory
from tui.core.refresh_rate import RefreshMeter
from tui.core.textsafe import redact

from .actions import APP, bindings
from .alerts import PressureAlerts
from .cli_conventions import default_screenshot_dir
from .bindings import checked_keymap
from .gate import Gate
from .keyhold import KeyHold, KeysReady
from widgets import style_memo
from widgets.flash import Flash, FlashBar
from .palette import KvwatchCommands
from .replay_controls import ReplayControls
from .terminal import StripColor, detect
from .theming import next_theme, theme_for

if TYPE_CHECKING:
    from textual.timer import Timer
    from tui.core.cluster.base import Cluster
    from tui.core.sources.kube import ClusterSource


class FleetUpdated(Message):
    def __init__(self, state: FleetState | None, error: str | None) -> None:
        super().__init__()
        self.state = state
        self.error = error


GC_EVERY = 30  # refreshes between collections of the garbage made since the last (refresh_once)
FULL_EVERY = 600  # refreshes between collections of everything, what was kept before included
HOLD_MAX_S = 1.0  # the longest the collector is held for a screen that opens (CollectorHold)


def _palette_listed(palette: CommandPalette) -> bool:
    """Textual's command palette gathers its commands in a worker: its list shows a few frames
    after its first."""
    return any(o.option_count for o in palette.query(OptionList))


class KvwatchApp(App):
    CSS_PATH = "kvwatch.tcss"
    CSS = """
    Toast { display: none; }  /* messages go to the flash line (widgets/flash.py), never over content */
    /* ASCII mode (TERM=linux consoles): no ellipsis glyph those fonts may lack */
    App.-ascii HeaderLine, App.-ascii PressureBanner, App.-ascii SelectedStrip { text-overflow: clip; }
    """
    TITLE = "kvwatch"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {KvwatchCommands}  # kvwatch's own actions (tui/palette.py)

    BINDINGS = bindings(APP)  # tui/actions.py: the app's keys, declared with every other

    def __init__(
        self,
        monitor: Monitor,
        interval: float = 1.0,
        *,
        readonly: bool = False,
        theme: str | None = None,
        ascii: bool = False,
        screenshot_dir: str | Path | None = None,
        on_shutdown: Callable[[], None] | None = None,
        autostart: bool = True,
        mode: str = "live",
        config: Config | None = None,
        context: str | None = None,
        no_color: bool | None = None,
        notices: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.monitor = monitor
        self.interval = interval
        self.mode = mode  # "live" or "replay"; mitigation keys check it (replay: read-only)
        # replay: the only way to the recording (tui/replay_controls.py)
        self._replay = ReplayControls(monitor) if mode == "replay" else None
        self.config = config or Config()
        self._cli_readonly = readonly or mode == "replay"
        self.readonly = self._cli_readonly
        self.production = False
        self.context: str | None = None
        self.ascii = ascii
        self.paused = False
        self.drawn: FleetState | None = None  # the state the screens in view show (draw)
        self._missed: weakref.WeakSet = weakref.WeakSet()  # covered screens that missed draws
        # a stated folder, never silently the working directory (tui/cli_conventions.py)
        self.screenshot_dir = Path(screenshot_dir).expanduser() if screenshot_dir else default_screenshot_dir()
        self._on_shutdown = on_shutdown
        self._autostart = autostart
        self._palette: dict[str, str] | None = None
        self._cli_theme = theme
        self._theme_name = theme or self.config.theme or DEFAULT_THEME
        self.last_error: str | None = None
        self.refreshes = 0
        self.rate = RefreshMeter(interval)  # the header says when the poll loop falls behind
        self.started_at = time.time()  # wall clock: mitigations in the audit log count from here (runbook)
        self.backfill_s: float | None = None  # sources with history (Prometheus) pre-draw this much
        self.bell_on = self.config.bell
        self.flash: Flash | None = None  # the latest message, on every screen's flash line
        self.pressure = PressureAlerts()  # entries into kv-pressure (tui/alerts.py)
        self.incidents = IncidentMemory()  # per workload: what the runbook verifies recovery from
        self.alerts = self.pressure.alerts  # (ts, replicas entering kv-pressure)
        self.notices = list(notices) + [str(p) for p in self.config.problems]
        # NO_COLOR / no colours: the monochrome theme, and no colour escape sequence at all.
        self.no_color_output = detect().no_color if no_color is None else no_color
        if self.no_color_output:
            self._filters = [f for f in self._filters if type(f).__name__ not in ("Monochrome", "NoColor")]
            self._filters.append(StripColor())
            self._theme_name = MONO_THEME
        self.cluster: Cluster | None = None  # set when the cluster is not the source's (tests, tools)
        self.mitigation_gate = Gate(self)  # which mitigation keys may be used now (tui/gate.py)
        # keys typed after `/`, `:` or `s` wait for the prompt (tui/keyhold.py)
        self.keyhold = KeyHold(self.set_timer, lambda n: self.notify(
            f"{n} key(s) typed for a prompt that did not open were dropped", severity="warning", timeout=4))
        self.collector_hold = CollectorHold()  # no collection inside a screen's opening
        self.style_memo = style_memo.install(self.stylesheet)  # each opening's widgets styled as before
        self._hold_timer: Timer | None = None
        # set while no screen is opening: a refresh starts only then (poll_loop)
        self._not_opening = asyncio.Event()
        self._not_opening.set()
        self.refresh_waiting = False  # the poll loop waits for an opening's first frame
        self.apply_context(context, startup=True)

    # -- theme ------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VERDICT_DEFAULTS)

    def palette(self) -> dict[str, str]:
        if self._palette is None:
            self._palette = dict(self.get_css_variables())
        return self._palette

    def watch_theme(self, _theme: str) -> None:
        self._palette = None

    # -- messages: the flash line (widgets/flash.py) ------------------------------------------
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every message kvwatch (or Textual) gives goes to the flash line on the bottom row;
        Textual still records it (its toasts are hidden)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
        flash = Flash.of(message, title, severity, self.NOTIFICATION_TIMEOUT if timeout is None else timeout,
                         markup)
        self.call_later(self._show_flash, flash)  # notify may come from a thread; widgets may not

    def _show_flash(self, flash: Flash) -> None:
        self.flash = flash
        if not self.screen_stack:
            return
        if not self.screen.query(FlashBar):  # screens that do not compose one get one now
            self.screen.mount(FlashBar())
        for screen in self.screen_stack:
            for bar in screen.query(FlashBar):
                bar.ascii = self.ascii
                bar.show(flash)

    # -- keys typed ahead of a prompt (tui/keyhold.py) -----------------------------------------
    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):  # it may open a screen: held until the next frame
            self._hold_collector()
        # new keys, and keys bubbling back up to have their binding run, alike
        if isinstance(event, (events.Key, events.Paste)) and self.keyhold.take(event):
            return
        await super().on_event(event)

    async def on_keys_ready(self, _msg: KeysReady) -> None:
        await self.keyhold.release(super().on_event)

    # -- a screen opens or closes: no garbage collection until its content is drawn -----------
    def push_screen(self, *args, **kwargs):
        self._hold_collector(opening=True)
        return super().push_screen(*args, **kwargs)

    def switch_screen(self, screen):
        self._hold_collector(opening=True)
        return super().switch_screen(screen)

    def pop_screen(self):
        self._hold_collector(opening=True)
        return super().pop_screen()

    def _hold_collector(self, opening: bool = False) -> None:
        """Until the new top screen's first frame with its content (`_display`), or HOLD_MAX_S;
        `opening`: a screen is being shown, and the next refresh waits as long (poll_loop)."""
        if opening:
            self._not_opening.clear()
        if self.collector_hold.hold():
            try:
                self._hold_timer = self.set_timer(HOLD_MAX_S, self._release_collector, name="collector-hold")
            except Exception:  # no timer to end it (no event loop yet): no hold
                self._release_collector()

    def _release_collector(self) -> None:
        self.collector_hold.release()
        self._not_opening.set()
        timer, self._hold_timer = self._hold_timer, None
        if timer is not None:
            timer.stop()

    def _display(self, screen, renderable) -> None:
        try:
            super()._display(screen, renderable)
        finally:
            if (self.collector_hold.held or not self._not_opening.is_set()) and renderable is not None \
                    and self.screen_stack \
                    and screen is self.screen_stack[-1]:
                shown = getattr(screen, "content_shown", None)  # a screen that fills itself later
                if shown is None and isinstance(screen, CommandPalette):
                    shown = partial(_palette_listed, screen)
                if shown is None or shown():
                    # at the loop's next turn: the collection due runs after this frame is out
                    asyncio.get_running_loop().call_soon(self._release_collector)

    # -- lifecycle --------------------------------------------------------------
    def on_mount(self) -> None:
        self.set_class(self.ascii, "-ascii")
        for t in THEMES.values():
            self.register_theme(t)
        if self._theme_name not in THEMES:
            why = f"unknown theme {self._theme_name!r} (known: {', '.join(THEMES)}); using {DEFAULT_THEME}"
            where = getattr(self, "_theme_key", ("theme",))
            self.notices.append(f"--theme: {why}" if self._cli_theme else str(self.config.problem(where, why)))
            self._theme_name = DEFAULT_THEME
        self.theme = self._theme_name
        # Only kvwatch's themes are offered (palette, ctrl+t, --theme, config): the screens read
        # `$verdict-*` colours and parse theme colours, which Textual's stock themes (e.g.
        # ansi-dark's `ansi_green`) do not provide in a form every widget can draw.
        for stock in [n for n in self.available_themes if n not in THEMES]:
            self.unregister_theme(stock)
        self._apply_keymap()
        # immediate: the uncovered screen must have the state before its own task repaints it
        # from the lines it painted when it was covered (call_next queued the catch-up behind
        # whatever the app had still to await, e.g. the removal of the screen popped before)
        self.screen_change_signal.subscribe(self, self._show_missed, immediate=True)
        from .screens.fleet import FleetScreen

        self.push_screen(FleetScreen())
        for note in self.notices:
            self.notify(note, title="config", severity="warning", timeout=12, markup=False)
        if self._autostart:
            if self.mode == "replay":
                self.replay_loop()
            else:
                self.poll_loop()

    def _apply_keymap(self) -> None:
        """User key remapping by binding id; an id no screen knows is reported, not fatal."""
        if not self.config.keys:
            return
        keys, problems = checked_keymap(self.config)
        self.notices.extend(str(p) for p in problems)
        self.set_keymap(keys)

    # -- the cluster and contexts (k9s skins: production looks different) ---------------------
    def current_cluster(self) -> Cluster | None:
        """The app's own cluster, else the one its metrics source watches; None for endpoints
        given directly, or a replay."""
        c = self.cluster if self.cluster is not None else getattr(self.monitor.source, "cluster", None)
        if c is None:
            return None
        from tui.core.cluster.base import Cluster  # not at import: `--url` has no cluster

        return c if isinstance(c, Cluster) else None

    async def switch_cluster(self, cluster: Cluster) -> ClusterSource:
        """Watch another context / namespace: a new source over `cluster` replaces the old one,
        whose rows are forgotten; the context's profile (theme, read-only) follows."""
        from tui.core.sources.kube import ClusterSource

        old = self.monitor.source
        src = ClusterSource(cluster, timeout=getattr(old, "timeout", 2.0), keep_raw=getattr(old, "keep_raw", True))
        await src.start()
        self.monitor.source = src
        stale = set(self.monitor.histories)
        self.monitor.forget(stale)
        # a poll of the old source still in flight may re-add its rows once: forget them again
        self.set_timer(self.interval + src.timeout + 0.5, lambda: self.monitor.forget(stale - set(src.pods)))
        try:
            if old is not None:
                await old.close()
        except Exception:  # noqa: BLE001 - the old watch is gone either way
            pass
        self.apply_context(cluster.context)
        return src

    def apply_context(self, context: str | None, startup: bool = False) -> None:
        """Switch to a kube context's profile from the config: theme, read-only, production."""
        self.context = context
        prof = self.config.profile_for(context)
        self.readonly = self._cli_readonly or bool(prof and prof.readonly)
        self.production = bool(prof and prof.production)
        if not self._cli_theme and not self.no_color_output:  # --theme and NO_COLOR win
            self._theme_name, self._theme_key = theme_for(self.config, context)
            if not startup and self._theme_name in self.available_themes and self._theme_name != self.theme:
                self.theme = self._theme_name
                self._redraw()
        if not startup:
            self.refresh_bindings()
            for screen in self.screen_stack:
                hook = getattr(screen, "on_flags_changed", None)
                if hook:
                    hook()

    def flags(self) -> list[str]:
        """Badges for the header."""
        out = []
        if self.production:
            out.append("PRODUCTION")
        if self.readonly and self.mode != "replay":
            out.append("READONLY: CONFIG BROKEN" if self.config.broken else "READONLY")
        return out

    def header_mode(self) -> tuple[str, str]:
        """(mode, status) for the header: live/paused, or replay with speed and position."""
        if self.mode != "replay":
            return ("paused" if self.paused else "live"), self.rate.status()
        return self.replay.status()

    async def on_unmount(self) -> None:
        self._release_collector()
        gc.unfreeze()  # what refresh_once froze is collectable again (an app inside a longer process: tests)
        src = self.monitor.source
        if src is not None:
            try:
                await src.close()
            except Exception:  # closing must never turn a clean exit into a traceback
                pass
        if self._on_shutdown is not None:
            self._on_shutdown()

    @work(exclusive=True, group="poll", exit_on_error=False)
    async def poll_loop(self) -> None:
        try:
            if self.backfill_s:
                self.notify(f"back-filling the last {self.backfill_s:.0f}s of history…", timeout=4)
            await self.monitor.start(self.backfill_s)
        except Exception as e:  # said now; each refresh below retries the start, with backoff
            self.post_message(FleetUpdated(None, redact(f"source failed to start: {e}")))
            await asyncio.sleep(self.interval)
        while True:
            t0 = time.monotonic()
            if not self._not_opening.is_set():
                # A screen is opening (from its key to its first frame with content, at most
                # HOLD_MAX_S): the refresh's work (scrape, parse, diagnosis, the new state drawn
                # on the screen being opened) would run inside it, every few openings
                self.refresh_waiting = True
                try:
                    await asyncio.wait_for(self._not_opening.wait(), HOLD_MAX_S)
                except asyncio.TimeoutError:
                    self._not_opening.set()  # a screen that never says its content is shown
                self.refresh_waiting = False
            await self.refresh_once()
            self.rate.tick()  # before the screens draw the state refresh_once posted
            await asyncio.sleep(max(0.05, self.interval - (time.monotonic() - t0)))

    async def refresh_once(self) -> None:
        # Frames leave reference cycles (Textual's strips and their caches, many of them old
        # enough to be in the oldest generation by the time they are dropped) that only a full
        # collection frees, and the command runs those rarely for CPU (core/perf.py): one every
        # GC_EVERY refreshes bounds that garbage to a few frames' worth; the allocator's free
        # pages go back to the system with it.
        if self.refreshes % GC_EVERY == 0:
            # What survives is frozen (gc.freeze: kept out of every later collection), so this
            # collection and the automatic ones between scan only what came after the last one:
            # a collection of the whole heap (history and screens) held the event loop 0.1-0.5 s,
            # inside whatever key the user had just pressed (bench/bench_screen_open.py's "gc
            # max"). Cycles that were alive at a freeze and dropped later (a screen closed) wait
            # for the collection of everything, every FULL_EVERY refreshes.
            if self.refreshes % FULL_EVERY == 0:
                gc.unfreeze()
            release_memory()
            gc.freeze()
        try:
            state, err = await self.monitor.refresh(), None
        except Exception as e:  # the whole source failed (e.g. Prometheus 401): say so, keep going
            state, err = None, redact(f"{type(e).__name__}: {e}")
        self.refreshes += 1
        self.post_message(FleetUpdated(state, err))

    def on_fleet_updated(self, msg: FleetUpdated) -> None:
        if not self.is_running:  # shutting down: the screens are being taken apart, nothing to show
            return
        self.last_error = msg.error
        if msg.error:
            self.notify(msg.error, severity="error", timeout=6, markup=False)
            for screen in self.screen_stack:  # no data at all yet: the error, not "waiting"
                hook = getattr(screen, "show_source_error", None)
                if hook is not None and msg.state is None:
                    hook(msg.error)
        if msg.state is not None and self.mode == "live":
            self._alert(msg.state)
            warned = msg.state.source_warnings
            if warned and warned != getattr(self, "_source_warned", ()):  # once per change, not per refresh
                self.notify("; ".join(warned), title="source", severity="warning", timeout=10, markup=False)
            self._source_warned = warned
        if self.paused or msg.state is None:
            return
        self.draw(msg.state)

    def _alert(self, state: FleetState) -> None:
        """Bell and notification once per entry into kv-pressure (not on every refresh)."""
        new = self.pressure.update(state)
        if new and self.bell_on:
            self.bell()
            self.notify(", ".join(new), title="entered kv-pressure", severity="warning", timeout=8,
                        markup=False)
        alarmed = self.pressure.update_alarms(state)
        if alarmed and self.bell_on:
            if not new:
                self.bell()
            texts = [a.text for a in state.alarms if a.replica in alarmed]
            self.notify("; ".join(texts), title="queue / latency alarm", severity="warning", timeout=8, markup=False)

    def draw(self, state: FleetState) -> None:
        """Show `state` on the screens in view: the top one and, through modals, those beneath
        down to the first full screen. A screen covered by another misses the draw and gets
        the state on screen when it is shown again (`_show_missed`)."""
        self.drawn = state
        view = self._in_view()
        self._missed.update(s for s in self.screen_stack if s not in view)
        for screen in view:
            self._show(screen, state)

    def _in_view(self) -> list:
        """The screens in view, top first: down to the first that is not a modal."""
        view = []
        for screen in reversed(self.screen_stack):
            view.append(screen)
            if not screen.is_modal:
                break
        return view

    def _show(self, screen, state: FleetState) -> None:
        if not screen.is_mounted:  # not composed yet: its on_mount draws the monitor's state
            return
        self._missed.discard(screen)
        show = getattr(screen, "show_state", None)
        if show is not None:
            show(state)

    def _show_missed(self, _screen=None) -> None:
        """A screen was popped or switched: those now in view that missed draws catch up, at
        once (inside pop_screen / switch_screen, before the screen can paint a frame)."""
        if self.drawn is None or not self._missed or not self.is_running:
            return
        try:
            for screen in self._in_view():
                if screen in self._missed and not screen._closing:
                    self._show(screen, self.drawn)
        except Exception as error:  # a signal callback's error would only be logged: fail loudly
            self._handle_exception(error)

    # -- actions ----------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        if self.mode == "replay":
            self._replay_toggle()
            return
        self.paused = not self.paused
        self.notify("paused: collection continues" if self.paused else "live", timeout=2)
        if not self.paused:
            self.draw(self.monitor.state)
        for screen in self.screen_stack:
            hook = getattr(screen, "on_pause_changed", None)
            if hook:
                hook(self.paused)

    async def action_refresh_now(self) -> None:
        await self.refresh_once()

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Textual's action, kept to its signature; the folder defaults to kvwatch's own."""
        try:
            self.screenshot_dir.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename=filename, path=path or str(self.screenshot_dir))
        except OSError as e:
            self.notify(f"screenshot failed: {e.strerror or e}", severity="error", timeout=6, markup=False)
            return
        self.notify(f"saved {saved}", timeout=4, markup=False)

    async def action_write_report(self) -> None:
        from .report_key import write_session_report

        await write_session_report(self)

    def action_cycle_theme(self) -> None:
        if self.no_color_output:
            self.notify("NO_COLOR is set (or the terminal has no colours): monochrome only", timeout=3)
            return
        nxt = next_theme(self.theme)
        self.theme = nxt
        self._redraw()
        self.notify(f"theme {nxt}", timeout=2, markup=False)

    def _redraw(self) -> None:
        """Repaint now with the state on screen (a theme change must not wait for a refresh)."""
        if self.monitor.state.replicas and not self.paused:
            self.draw(self.monitor.state)

    def action_toggle_bell(self) -> None:
        self.bell_on = not self.bell_on
        self.notify("bell on kv-pressure: " + ("on" if self.bell_on else "off"), timeout=2)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action.startswith("replay_") and self.mode != "replay":
            return False  # hidden outside replay
        if action == "refresh_now" and self.mode == "replay":
            return False  # the recording's clock drives a replay
        return True

    # -- replay: every move goes through self.replay, which may rebuild the Monitor ----------
    @property
    def replay(self) -> ReplayControls:
        """The replay's controls; only the replay mode's keys and loop reach for them."""
        if self._replay is None:
            raise RuntimeError("not replaying a recording")
        return self._replay

    @work(exclusive=True, group="poll", exit_on_error=False)
    async def replay_loop(self) -> None:
        """Feed due polls of the recording to the Monitor one at a time; draw after each batch."""
        while True:
            n = await self.replay.advance()
            if n:
                self.refreshes += n
                self.post_message(FleetUpdated(self.monitor.state, None))
            if self.replay.stop_at_end():
                self.notify("end of the recording", timeout=4)
                self._replay_drawn()
            await asyncio.sleep(0.1)

    def _replay_drawn(self) -> None:
        self.monitor = self.replay.monitor  # a move back rebuilt it
        self.draw(self.monitor.state)
        for screen in self.screen_stack:
            hook = getattr(screen, "on_pause_changed", None)
            if hook:
                hook(self.paused)

    def _replay_toggle(self) -> None:
        self.replay.toggle()
        self._replay_drawn()

    def replay_goto(self, k: int) -> None:
        """Show the recording after its first k polls (k >= 1), paused."""
        self.replay.goto(k)
        self._replay_drawn()

    def action_replay_step(self, delta: int) -> None:
        note = self.replay.step(delta)
        if note:
            self.notify(note, timeout=2)
        self._replay_drawn()

    def action_replay_next_change(self) -> None:
        changes = self.replay.next_change()
        if changes is None:
            self.notify("no verdict change after this point", timeout=3)
        else:
            when = time.strftime("%H:%M:%S", time.localtime(self.replay.position_ts))
            text = "; ".join(f"{n}: {a} -> {b}" for n, a, b in changes[:4])
            more = f" (+{len(changes) - 4})" if len(changes) > 4 else ""
            self.notify(f"{when} {text}{more}", title="verdict change", timeout=8, markup=False)
        self._replay_drawn()

    def action_replay_seek(self) -> None:
        from .screens.seek import SeekScreen

        def done(ts: float | None) -> None:
            if ts is not None:
                self.replay_goto(self.replay.index_at(ts))

        self.push_screen(SeekScreen(self.replay.source), done)

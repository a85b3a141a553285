"""The Textual application: polls the Monitor in a worker and hands FleetState to the screens.

Collection never stops (pause, modals, hidden screens only stop drawing), and one poll never
overlaps the next: the loop sleeps for what is left of the interval after each refresh.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.message import Message

from themes import DEFAULT_THEME, THEMES, VERDICT_DEFAULTS
from tui.core.model import FleetState
from tui.core.monitor import Monitor


class FleetUpdated(Message):
    def __init__(self, state: FleetState | None, error: str | None) -> None:
        super().__init__()
        self.state = state
        self.error = error


class KvwatchApp(App):
    CSS_PATH = "kvwatch.tcss"
    TITLE = "kvwatch"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("p", "toggle_pause", "Pause", id="pause"),
        Binding("ctrl+r", "refresh_now", "Refresh", show=False, id="refresh"),
        Binding("ctrl+s", "screenshot", "Screenshot", show=False, id="screenshot"),
    ]

    def __init__(
        self,
        monitor: Monitor,
        interval: float = 1.0,
        *,
        readonly: bool = False,
        theme: str | None = None,
        ascii: bool = False,
        screenshot_dir: str | Path = ".",
        on_shutdown: Callable[[], None] | None = None,
        autostart: bool = True,
    ) -> None:
        super().__init__()
        self.monitor = monitor
        self.interval = interval
        self.readonly = readonly
        self.ascii = ascii
        self.paused = False
        self.screenshot_dir = Path(screenshot_dir)
        self._on_shutdown = on_shutdown
        self._autostart = autostart
        self._palette: dict[str, str] | None = None
        self._theme_name = theme or DEFAULT_THEME
        self.last_error: str | None = None
        self.refreshes = 0

    # -- theme ------------------------------------------------------------------
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VERDICT_DEFAULTS)

    def palette(self) -> dict[str, str]:
        if self._palette is None:
            self._palette = dict(self.get_css_variables())
        return self._palette

    def watch_theme(self, _theme: str) -> None:
        self._palette = None

    # -- lifecycle --------------------------------------------------------------
    def on_mount(self) -> None:
        for t in THEMES.values():
            self.register_theme(t)
        self.theme = self._theme_name if self._theme_name in self.available_themes else DEFAULT_THEME
        from .screens.fleet import FleetScreen

        self.push_screen(FleetScreen())
        if self._autostart:
            self.poll_loop()

    async def on_unmount(self) -> None:
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
        src = self.monitor.source
        try:
            await src.start()
        except Exception as e:
            self.post_message(FleetUpdated(None, f"source failed to start: {e}"))
            return
        while True:
            t0 = time.monotonic()
            await self.refresh_once()
            await asyncio.sleep(max(0.05, self.interval - (time.monotonic() - t0)))

    async def refresh_once(self) -> None:
        try:
            state, err = await self.monitor.refresh(), None
        except Exception as e:  # the whole source failed (e.g. Prometheus 401): say so, keep going
            state, err = None, f"{type(e).__name__}: {e}"
        self.refreshes += 1
        self.post_message(FleetUpdated(state, err))

    def on_fleet_updated(self, msg: FleetUpdated) -> None:
        self.last_error = msg.error
        if msg.error:
            self.notify(msg.error, severity="error", timeout=6, markup=False)
        if self.paused or msg.state is None:
            return
        self.draw(msg.state)

    def draw(self, state: FleetState) -> None:
        for screen in self.screen_stack:
            show = getattr(screen, "show_state", None)
            if show is not None:
                show(state)

    # -- actions ----------------------------------------------------------------
    def action_toggle_pause(self) -> None:
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

    def action_screenshot(self) -> None:
        self.screenshot_dir.mkdir(parents=True, exist_ok=True)
        path = self.save_screenshot(path=str(self.screenshot_dir))
        self.notify(f"saved {path}", timeout=4, markup=False)

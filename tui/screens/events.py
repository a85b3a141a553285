"""Events of a namespace, newest first (diagnostics step 6), refreshed every few seconds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from tui.actions import bindings
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tui.core.cluster.base import Cluster, ClusterError, EventInfo
from tui.core.textsafe import clean
from widgets.footer import KvFooter
from widgets.format import ago

if TYPE_CHECKING:
    from tui.app import KvwatchApp


def event_clock(cluster: Cluster) -> Callable[[], float]:
    """What event times are measured against: the simulated clock in the demo, else wall time."""
    return cluster.now if getattr(cluster, "fleet", None) is not None else time.time


class EventsScreen(Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("events")
    DEFAULT_CSS = """
    EventsScreen #events-title { height: 1; padding: 0 1; background: $surface; text-style: bold; }
    EventsScreen DataTable { height: 1fr; }
    """

    def __init__(self, cluster: Cluster, namespace: str, *, interval: float = 5.0,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.namespace = namespace
        self.interval = interval
        self.clock = clock or event_clock(cluster)
        self.events: list[EventInfo] = []
        self.error: str | None = None
        self.warnings_only = False

    def compose(self) -> ComposeResult:
        yield Static("", id="events-title")
        table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=True, id="events-table")
        yield table
        yield KvFooter()

    # (key, title, width) wide; under 120 columns TYPE and # go (a warning's reason is yellow and
    # marked "!") and REASON / OBJECT narrow, so MESSAGE keeps room at 80 columns
    WIDE = (("age", "AGE", 8), ("type", "TYPE", 8), ("reason", "REASON", 22), ("object", "OBJECT", 34),
            ("count", "#", 4), ("message", "MESSAGE", None))
    NARROW = (("age", "AGE", 5), ("reason", "REASON", 14), ("object", "OBJECT", 18), ("message", "MESSAGE", None))

    def _columns(self) -> tuple[tuple[str, str, int | None], ...]:
        return self.WIDE if (self.size.width or self.app.size.width) >= 120 else self.NARROW

    def _add_columns(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)
        for key, title, width in self._columns():
            table.add_column(title, key=key, width=width)

    def on_resize(self) -> None:
        table = self.query_one(DataTable)
        if [str(k.value) for k in table.columns] != [c[0] for c in self._columns()]:
            self._add_columns()
            self._draw()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._add_columns()
        table.focus()
        self.action_reload()
        self.set_interval(self.interval, self.action_reload)

    def action_reload(self) -> None:
        self._load()

    def action_toggle_warnings(self) -> None:
        self.warnings_only = not self.warnings_only
        self._draw()

    @work(exclusive=True, group="events", exit_on_error=False)
    async def _load(self) -> None:
        try:
            self.events = await self.cluster.events(self.namespace)
            self.error = None
        except ClusterError as e:
            self.error = e.message
        except Exception as e:  # noqa: BLE001
            self.error = f"unexpected error: {type(e).__name__}: {e}"
        self._draw()

    def _draw(self) -> None:
        rows = [e for e in self.events if not self.warnings_only or e.type == "Warning"]
        title = Text(f"events -n {clean(self.namespace)}, newest first", style="bold")
        title.append(f"  ·  {len(rows)} shown" + ("  ·  warnings only" if self.warnings_only else ""))
        if self.error:
            title.append("  ·  " + clean(self.error), style="red")
        self.query_one("#events-title", Static).update(title)
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear()
        now = self.clock()
        keys = [str(k.value) for k in table.columns]
        for e in rows:
            warn = e.type == "Warning"
            cells = {
                "age": ago(now - e.ts) if e.ts is not None else "?",
                "type": Text(clean(e.type), style="bold yellow" if warn else ""),
                "reason": Text(("! " if warn and "type" not in keys else "") + clean(e.reason),
                               style="yellow" if warn else ""),
                "object": Text(clean(e.object)),
                "count": str(e.count),
                "message": Text(clean(e.message)),
            }
            table.add_row(*(cells[k] for k in keys))
        if rows:
            table.move_cursor(row=min(row, len(rows) - 1))

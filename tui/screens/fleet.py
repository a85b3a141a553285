"""The fleet screen: header, pressure banner, replica table, selected-replica strip, filter."""

from __future__ import annotations

from typing import TYPE_CHECKING

import re

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from tui.actions import bindings
from tui.core.model import SEVERITY, FleetState, ReplicaView
from tui.core.textsafe import clean
from tui.keyhold import PromptInput
from widgets.flash import FlashBar
from widgets.fleet_table import FleetTable
from widgets.footer import KvFooter
from widgets.format import asciify
from widgets.header import FleetHeader, PressureBanner
from widgets.verdict import colour_var, label

from .mitigation import MitigationMixin

if TYPE_CHECKING:
    from tui.app import KvwatchApp

SORTS = {
    "severity": lambda v: (SEVERITY.get(v.verdict, 99), -(v.metrics.kv_usage or 0.0), v.name),
    "kv": lambda v: (-(v.metrics.kv_usage or -1.0), v.name),
    "queue": lambda v: (-(v.metrics.waiting or -1.0), v.name),
    "name": lambda v: v.name,
    "group": lambda v: (v.group or "", SEVERITY.get(v.verdict, 99), v.name),  # by owner Deployment
}


def filter_error(pattern: str) -> str | None:
    """Why `pattern` is not a usable filter ("invalid regex: ..."), or None."""
    try:
        re.compile(pattern[1:] if pattern.startswith("!") else pattern)
    except re.error as e:
        return f"invalid regex: {e}"
    return None


def match_filter(v: ReplicaView, pattern: str) -> bool:
    """k9s-style filter: regex over name, verdict and group; a leading '!' inverts. A pattern
    that is not a regex filters nothing (the screen says why: `filter_error`)."""
    if not pattern or filter_error(pattern):
        return True
    invert = pattern.startswith("!")
    rx = re.compile(pattern[1:] if invert else pattern, re.IGNORECASE)
    hit = any(rx.search(s) for s in (v.name, v.verdict, v.group or ""))
    return hit != invert


class SelectedStrip(Static):
    """Two lines about the highlighted replica: verdict summary and its strongest evidence."""

    DEFAULT_CSS = """
    SelectedStrip { height: 2; padding: 0 1; background: $surface; text-wrap: nowrap; text-overflow: ellipsis; }
    """


class ViewModes(Static):
    """One line, shown only while the view is not the plain one: faults only, grouped by owner,
    a filter (or why it is not a regex). k9s shows these in the table's title."""

    DEFAULT_CSS = """
    ViewModes { height: 1; padding: 0 1; display: none; background: $boost; text-wrap: nowrap;
        text-overflow: ellipsis; }
    ViewModes.-on { display: block; }
    ViewModes.-error { color: $error; text-style: bold; }
    """


class FleetScreen(MitigationMixin, Screen):  # mitigation keys: tui/screens/mitigation.py
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("fleet")  # tui/actions.py: its own keys, mitigation, then t / g / c

    def __init__(self) -> None:
        super().__init__()
        self.filter = ""
        self.faults_only = False
        self.sort = "severity"
        self.reverse = False  # the same sort key pressed again reverses (k9s)
        self._placed: dict[str, tuple[str, int]] = {}  # name -> (verdict, row) as last drawn
        self._strip_text: Text | None = None
        self._modes_text: str | None = None  # the view-modes line as last shown
        self.state: FleetState | None = None

    def compose(self) -> ComposeResult:
        pal = self.app.palette
        yield FleetHeader(pal, id="header")
        yield PressureBanner(pal, id="banner")
        yield ViewModes(id="view-modes")
        table = FleetTable(pal, thresholds=self.app.monitor.thresholds, id="fleet")
        table.ascii = self.app.ascii
        yield table
        yield SelectedStrip("waiting for the first refresh...", id="strip")
        yield PromptInput(placeholder="filter: regex over name/verdict/group, ! inverts, esc clears", id="filter")
        yield KvFooter()
        yield FlashBar()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        header = self.query_one(FleetHeader)
        header.ascii = self.query_one(PressureBanner).ascii = self.app.ascii
        header.flags = self.app.flags()
        header.sim_speed = getattr(self.app.monitor.source, "sim_speed", None)
        header.mode, header.status = self.app.header_mode()
        if self.app.monitor.state.replicas:
            self.show_state(self.app.monitor.state)

    # -- drawing ----------------------------------------------------------------
    def visible_rows(self, state: FleetState) -> list[ReplicaView]:
        rows = [v for v in state.replicas if match_filter(v, self.filter)]
        if self.faults_only:
            rows = [v for v in rows if v.verdict not in ("healthy", "unknown")]
        if self.sort != "severity":
            return sorted(rows, key=SORTS[self.sort], reverse=self.reverse)
        # Sticky within a verdict: rows move only when their verdict changes, not every time two
        # KV values swap. A jumping table is hard to read, and a reorder repaints every row
        # (bytes on a slow SSH link); a row entering a verdict joins the end of its group.
        prev = self._placed
        key = lambda v: (SEVERITY.get(v.verdict, 99), *(  # noqa: E731
            (0, prev[v.name][1], 0.0, "") if prev.get(v.name, (None,))[0] == v.verdict
            else (1, 0, -(v.metrics.kv_usage or 0.0), v.name)))
        rows = sorted(rows, key=key)
        self._placed = {v.name: (v.verdict, i) for i, v in enumerate(rows)}
        return rows[::-1] if self.reverse else rows

    def show_state(self, state: FleetState) -> None:
        self.state = state
        header = self.query_one(FleetHeader)
        header.mode, header.status = self.app.header_mode()
        header.show(state)
        self.query_one(PressureBanner).show(state)
        table = self.query_one(FleetTable)
        table.now, table.sort_by = state.ts, (self.sort, self.reverse)
        table.show(self.visible_rows(state))
        self._update_modes()
        self._update_strip()

    def show_source_error(self, error: str) -> None:
        """The source failed (at start, or a whole poll): say why where the rows would be."""
        if self.state is None or not self.state.replicas:
            self.query_one(SelectedStrip).update(Text(clean(error, 300) + "  (retrying)", style="bold"))

    def _update_modes(self) -> None:
        error = filter_error(self.filter) if self.filter else None
        modes = [error] if error else []
        if self.faults_only:
            modes.append("faults only (ctrl+z)")
        if self.sort == "group":
            modes.append("grouped by owner (G)")
        if self.filter and not error:
            modes.append(f"filter /{self.filter}/ (esc clears)")
        line = self.query_one(ViewModes)
        line.set_class(bool(modes), "-on")
        line.set_class(bool(error), "-error")
        self.query_one("#filter", Input).set_class(bool(error), "-invalid")
        text = "  ·  ".join(modes)
        if text != self._modes_text:  # a Static's update re-lays the whole screen out: not every second
            self._modes_text = text
            line.update(Text(text), layout=False)  # one line; shown or hidden by its class

    def on_pause_changed(self, paused: bool) -> None:
        header = self.query_one(FleetHeader)
        header.mode, header.status = self.app.header_mode()
        if self.state is not None:
            header.show(self.state)

    def on_flags_changed(self) -> None:
        """The kube context changed: READONLY / PRODUCTION badges follow the config profile."""
        self.query_one(FleetHeader).flags = self.app.flags()
        self.on_pause_changed(self.app.paused)

    def _update_strip(self) -> None:
        table = self.query_one(FleetTable)
        name = table.selected_name()
        v = table.views.get(name) if name else None
        strip = self.query_one(SelectedStrip)
        if v is None:
            self._strip_text = None
            strip.update("no replica matches" if self.state and self.state.replicas else "waiting for the first refresh...")
            return
        pal = self.app.palette()
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(label(v.verdict, ascii=self.app.ascii), style=f"bold {pal.get(colour_var(v.verdict), '')}")
        t.append(" ")
        t.append(clean(v.name), style="bold")
        if v.error:
            t.append(f"  {v.state}: ")
            t.append(clean(v.error))
        elif v.finding.summary and v.finding.summary != v.verdict:
            t.append("  " + v.finding.summary)
        t.append("\n")
        crossed = [clean(e.text) for e in v.finding.evidence if e.crossed]
        t.append(" · ".join(crossed) if crossed else (v.finding.summary or ""), style="dim" if not crossed else "")
        if self.app.ascii:
            t = asciify(t)
        if t != self._strip_text:  # an unchanged strip is not repainted (bytes over SSH)
            self._strip_text = t
            strip.update(t, layout=False)  # two lines high whatever its text: no new layout of the screen

    @on(DataTable.RowHighlighted)
    def _row_highlighted(self) -> None:
        self._update_strip()

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_detail()

    # -- actions ----------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        if not box.has_focus:
            self.app.keyhold.hold()  # what is typed next belongs to the filter (tui/keyhold.py)
        box.value = self.filter
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter = event.value
        if self.state is not None:
            self.show_state(self.state)

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = bool(self.filter)
        self.query_one(FleetTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        self.filter = ""
        box.value = ""
        box.display = False
        self.query_one(FleetTable).focus()
        if self.state is not None:
            self.show_state(self.state)

    def action_faults(self) -> None:
        self.faults_only = not self.faults_only
        self.notify("pressured/faulty replicas only" if self.faults_only else "all replicas", timeout=2)
        if self.state is not None:
            self.show_state(self.state)

    def action_sort(self, how: str) -> None:
        if how == "group" and self.sort == "group":  # G toggles grouping: back to severity
            how, self.reverse = "severity", False
        else:
            self.reverse = (not self.reverse) if how == self.sort else False
        self.sort = how
        if self.state is not None:
            self.show_state(self.state)

    def action_cursor(self, delta: int) -> None:
        table = self.query_one(FleetTable)
        table.move_cursor(row=max(0, table.cursor_row + delta))

    def action_detail(self) -> None:
        name = self.query_one(FleetTable).selected_name()
        if name is None:
            return
        from .detail import DetailScreen

        self.app.push_screen(DetailScreen(name))

    def action_gpu(self) -> None:
        from .gpu import open_gpu

        open_gpu(self.app, self.query_one(FleetTable).selected_name())

    def action_triage(self) -> None:
        from .triage import open_diagnosis  # its runbook and facts load on first use

        open_diagnosis(self.app, self.query_one(FleetTable).selected_name(), "triage")

    def action_diagnosis(self, mode: str) -> None:
        from .triage import open_diagnosis

        open_diagnosis(self.app, self.query_one(FleetTable).selected_name(), mode)


"""Key help: every action (tui/actions.py) of the app and of the screen underneath, with its key.
`/` keeps the rows whose key, action or place contain the typed text; esc there clears it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from widgets.tint import TintedOnce

from tui.actions import APP, actions_for, bindings, keys_text, scope_of
from tui.keyhold import PromptInput

if TYPE_CHECKING:
    from tui.app import KvwatchApp


class RenderedOnce:
    """A Rich renderable rendered once per width: Textual renders a Rich table to measure its
    height, again to draw it, and again on each later repaint (about six times on opening the
    help, two thirds of its cost); the lines are the same each time."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable
        self._lines: dict[tuple[int, bool], list[list[Segment]]] = {}

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        key = (options.max_width, options.ascii_only)
        lines = self._lines.get(key)
        if lines is None:
            lines = self._lines[key] = console.render_lines(self.renderable, options.update(height=None), pad=False)
        new_line = Segment.line()
        for line in lines:
            yield from line
            yield new_line


class HelpScreen(TintedOnce, ModalScreen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("help")
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 72; max-width: 95%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1; }
    HelpScreen #help-search { display: none; }
    """

    def compose(self) -> ComposeResult:
        self.rows: list[tuple[str, str, str]] = []  # (keys, action, where) as listed
        self.query_text = ""  # the `/` search
        stack = [s for s in self.app.screen_stack if s is not self]  # compose may run once pushed
        under = stack[-1] if stack else None
        seen = set()
        sources = [("app", actions_for(APP))]  # tui/actions.py: what the footers are built from
        if under is not None and under is not self:
            sources.insert(0, (scope_of(under), actions_for(scope_of(under))))
        for where, actions in sources:
            for a in actions:
                if under is not None and hasattr(under, "check_action") and under is not self:
                    if under.check_action(a.action, ()) is False:
                        continue  # hidden: not allowed here (read-only, RBAC)
                if where == "app" and self.app.check_action(a.action, ()) is False:
                    continue  # e.g. replay keys in a live session
                keys = keys_text(getattr(self.app, "_keymap", {}).get(a.id) or a.key)  # config [keys]
                if (keys, a.description) in seen:
                    continue
                seen.add((keys, a.description))
                self.rows.append((keys, a.description, where))
        # keys not offered now, and why (read-only, RBAC, replay): the help explains, never lies
        self.hidden: list[tuple[str, str, str]] = []
        if under is not None and under is not self and hasattr(under, "hidden_keys"):
            self.hidden = under.hidden_keys()
        with VerticalScroll():
            yield Static("[b]kvwatch keys[/b]  (/ searches, esc closes)")
            yield PromptInput(placeholder="search keys and actions (esc clears)", id="help-search")
            yield Static(RenderedOnce(self._table()), id="help-table")

    def _matches(self, *cells: str) -> bool:
        q = self.query_text.lower()
        return not q or any(q in c.lower() for c in cells)

    def _table(self) -> Table | Text:
        """The rows (and the keys not offered now) that match the search."""
        self.shown = [r for r in self.rows if self._matches(*r)]
        hidden = [(k, what, why) for k, what, why in self.hidden if self._matches(keys_text(k), what, why)]
        if not self.shown and not hidden:
            return Text(f"no key matches {self.query_text!r}", style="dim")
        table = Table(box=None, show_header=True, header_style="bold", expand=True)
        table.add_column("key", no_wrap=True)
        table.add_column("action")
        table.add_column("where", style="dim")
        for keys, what, where in self.shown:  # plain Text: an action's words are never markup
            table.add_row(Text(keys), Text(what), Text(where))
        if hidden:  # keys not offered now, and why (read-only, RBAC, replay): the help explains, never lies
            table.add_row("", Text("not available now", style="bold"), "")
            for key, what, why in hidden:
                table.add_row(Text(keys_text(key), style="dim"), Text(f"{what}: {why}", style="dim"), "")
        return table

    def action_search(self) -> None:
        box = self.query_one("#help-search", Input)
        box.display = True
        if not box.has_focus:
            self.app.keyhold.hold()  # what is typed next belongs to the search (tui/keyhold.py)
        box.value = self.query_text
        box.focus()

    @on(Input.Changed, "#help-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.query_one("#help-table", Static).update(RenderedOnce(self._table()))

    @on(Input.Submitted, "#help-search")
    def _search_done(self) -> None:
        self.query_one("#help-search", Input).display = bool(self.query_text)
        self.query_one(VerticalScroll).focus()

    async def action_dismiss(self, result: object = None) -> None:
        box = self.query_one("#help-search", Input)
        if box.has_focus:  # esc in the search box clears the search; the help stays
            self.query_text, box.value, box.display = "", "", False
            self.query_one("#help-table", Static).update(RenderedOnce(self._table()))
            self.query_one(VerticalScroll).focus()
            return
        await super().action_dismiss(result)

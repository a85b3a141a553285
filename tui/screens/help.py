"""Key help: every binding of the app and of the screen underneath, with its description."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding

from tui.actions import bindings, keys_text
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen):
    BINDINGS = bindings("help")
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 72; max-width: 95%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        self.rows: list[tuple[str, str, str]] = []  # (keys, action, where) as listed
        table = Table(box=None, show_header=True, header_style="bold", expand=True)
        table.add_column("key", no_wrap=True)
        table.add_column("action")
        table.add_column("where", style="dim")
        stack = [s for s in self.app.screen_stack if s is not self]  # compose may run once pushed
        under = stack[-1] if stack else None
        seen = set()
        sources = [("app", self.app.BINDINGS)]
        if under is not None and under is not self:
            sources.insert(0, (type(under).__name__.replace("Screen", "").lower(), under.BINDINGS))
        for where, bindings in sources:
            for b in bindings:
                if not isinstance(b, Binding):
                    continue
                if under is not None and hasattr(under, "check_action") and under is not self:
                    if under.check_action(b.action, ()) is False:
                        continue  # hidden: not allowed here (read-only, RBAC)
                if where == "app" and self.app.check_action(b.action, ()) is False:
                    continue  # e.g. replay keys in a live session
                remapped = getattr(self.app, "_keymap", {}).get(b.id) if b.id else None  # config [keys]
                keys = keys_text(remapped or b.key)
                if (keys, b.description) in seen:
                    continue
                seen.add((keys, b.description))
                self.rows.append((keys, b.description or b.action, where))
                table.add_row(keys, b.description or b.action, where)
        # keys not offered now, and why (read-only, RBAC, replay): the help explains, never lies
        self.hidden: list[tuple[str, str, str]] = []
        if under is not None and under is not self and hasattr(under, "hidden_keys"):
            self.hidden = under.hidden_keys()
        if self.hidden:
            table.add_row("", Text("not available now", style="bold"), "")
            for key, what, why in self.hidden:
                table.add_row(Text(keys_text(key), style="dim"), Text(f"{what}: {why}", style="dim"), "")
        with VerticalScroll():
            yield Static("[b]kvwatch keys[/b]  (esc closes)")
            yield Static(table)

    def action_dismiss(self) -> None:
        self.dismiss()

"""Key help: every action (tui/actions.py) of the app and of the screen underneath, with its key."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.actions import APP, actions_for, bindings, keys_text, scope_of


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
                table.add_row(keys, a.description, where)
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

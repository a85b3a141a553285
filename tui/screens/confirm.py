"""The confirm dialog of every mitigation: exactly what will change, Cancel first and focused.

Production contexts get a distinct banner and the target's name must be typed before Confirm
is enabled (k9s' sweeping-action rule). Everything from the cluster is escaped and shown as
rich Text, never as markup.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from tui.core.cluster.base import ActionPlan, ActionResult, Cluster, ClusterError
from tui.core.textsafe import clean
from widgets.diff_view import DiffView, notes_text
from widgets.tint import TintedOnce

if TYPE_CHECKING:
    from tui.app import KvwatchApp

PATCH_LINES = 40  # a roll back's patch holds two pod templates: show its start, say how much more


def patch_text(plan: ActionPlan) -> Text:
    if plan.patch is None:
        return Text()
    kind = {"json": "JSON Patch", "merge": "merge patch"}.get(plan.patch_type, "request")
    where = f"{plan.target.kind.lower()}s/{plan.target.name}" + (f"/{plan.subresource}" if plan.subresource else "")
    if isinstance(plan.patch, list):  # JSON Patch: one operation per line
        lines = ["[", *(" " + json.dumps(op, default=str) + ("," if i < len(plan.patch) - 1 else "")
                        for i, op in enumerate(plan.patch)), "]"]
    else:
        lines = json.dumps(plan.patch, indent=1, default=str).splitlines()
    t = Text(f"{kind} sent to {clean(where)} (server-side dry run first):\n", style="bold")
    t.append(clean("\n".join(lines[:PATCH_LINES]), keep_newlines=True), style="dim")
    if len(lines) > PATCH_LINES:
        t.append(f"\n... {len(lines) - PATCH_LINES} more lines", style="dim italic")
    return t


def warnings_beside_preflight(plan: ActionPlan) -> tuple[str, ...]:
    """The plan's warnings less those the preflight block lists below them (the plan carries
    both for the CLI, which prints warnings only): each line is said once in the dialog."""
    shown = set(plan.preflight.messages) if plan.preflight is not None else set()
    return tuple(w for w in plan.warnings if w not in shown)


def preflight_text(plan: ActionPlan) -> Text:
    pf = plan.preflight
    if pf is None:
        return Text()
    style = {"ok": "green", "warn": "yellow", "fail": "bold red"}.get(pf.status, "")
    t = Text("preflight: ", style="bold")
    t.append(pf.status.upper(), style=style)
    for m in pf.messages:
        t.append("\n  " + clean(m))
    return t


class ConfirmScreen(TintedOnce, ModalScreen[bool]):
    """Returns True when confirmed; `typed_name` holds what was typed (production contexts)."""

    app: KvwatchApp  # the running app, typed (textual types it App[Any])

    BINDINGS = bindings("confirm")
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 110; max-width: 98%; height: auto; max-height: 96%;
        border: thick $warning; background: $surface; padding: 0 1; }
    ConfirmScreen.-production > Vertical { border: thick $production-bg; }
    ConfirmScreen #confirm-banner { height: auto; padding: 0 1; background: $primary-darken-2; color: $text; }
    ConfirmScreen.-production #confirm-banner { background: $production-bg; color: $banner-fg; text-style: bold; }
    ConfirmScreen #confirm-title { height: auto; text-style: bold; margin: 1 0 0 0; }
    ConfirmScreen #confirm-body { height: auto; max-height: 45vh; border: round $panel; }
    ConfirmScreen #confirm-body > Static { height: auto; padding: 0 1; }
    ConfirmScreen #confirm-name { margin: 1 0 0 0; }
    ConfirmScreen #confirm-buttons { height: auto; align-horizontal: right; }
    ConfirmScreen #confirm-keys { height: auto; color: $text-muted; margin: 1 0 0 0; }
    ConfirmScreen Button { margin: 0 0 0 2; }
    """

    def __init__(self, plan: ActionPlan, *, production: bool = False) -> None:
        super().__init__()
        self.plan = plan
        self.production = production or plan.requires_typed_name
        self.typed_name: str | None = None

    def compose(self) -> ComposeResult:
        plan = self.plan
        pal = self.app.palette() if hasattr(self.app, "palette") else {}
        ctx = clean(plan.context or "this cluster")
        if self.production:
            banner = Text(f"PRODUCTION context {ctx}: type ", style="bold")
            banner.append(clean(plan.target.name), style="bold underline")
            banner.append(" below to confirm")
        else:
            banner = Text(f"context {ctx}")
        banner.append(f"  ·  {clean(str(plan.target))}")
        with Vertical():
            yield Static(banner, id="confirm-banner")
            yield Static(Text(clean(plan.summary)), id="confirm-title")
            with VerticalScroll(id="confirm-body"):
                diff = DiffView(pal, id="confirm-diff")
                diff.show(plan.diff or "(no diff: see the request below)")
                yield diff
                parts = (
                    ("confirm-errors", notes_text("errors: nothing will be sent", plan.errors, "bold red", "x ")),
                    ("confirm-warnings", notes_text("warnings", warnings_beside_preflight(plan), "yellow")),
                    ("confirm-preflight", preflight_text(plan)),
                    ("confirm-patch", patch_text(plan)),
                )
                for sid, text in parts:
                    if text.plain:
                        yield Static(text, id=sid)
            if self.production:
                yield Input(placeholder=f"type {plan.target.name} to confirm", id="confirm-name")
            yield Static(self._keys_hint(), id="confirm-keys", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Confirm", id="confirm", variant="error" if self.production else "warning",
                             disabled=not self._can_confirm(""))

    def _keys_hint(self) -> str:
        """The dialog's keys, on its own button row (there is no footer under a dialog)."""
        if not self.plan.ok:
            ok = "nothing can be sent"
        elif self.production:
            ok = "type the name, enter confirms"
        else:
            ok = "enter/y confirm"
        return f"{ok} · esc cancel · pgdn/↓ scroll · ? help"

    def on_mount(self) -> None:
        self.set_class(self.production, "-production")
        # The body has the focus: PageDown / Down scroll the preflight and the patch into view at
        # 80x24, and Enter reaches the dialog's binding (a focused button would take it).
        if self.production:
            self.query_one("#confirm-name", Input).focus()
        else:
            self.query_one("#confirm-body", VerticalScroll).focus()

    def _can_confirm(self, typed: str) -> bool:
        if not self.plan.ok:
            return False
        return not self.production or typed == self.plan.target.name

    @on(Input.Changed, "#confirm-name")
    def _typed(self, event: Input.Changed) -> None:
        self.query_one("#confirm", Button).disabled = not self._can_confirm(event.value)

    @on(Input.Submitted, "#confirm-name")
    def _typed_enter(self, event: Input.Submitted) -> None:
        if self._can_confirm(event.value):
            self._confirm()

    def action_help(self) -> None:
        self.app.action_help()

    def action_confirm(self) -> None:
        if self.focused is not None and isinstance(self.focused, Button):
            self.focused.press()  # Tab onto Cancel, then Enter: what the button says
            return
        self._confirm()

    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        typed = self.query_one("#confirm-name", Input).value if self.production else None
        if not self._can_confirm(typed or ""):
            return
        self.typed_name = typed
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


def flash(app: Any, result: ActionResult, title: str) -> None:
    """Every action's outcome goes to a flash (the core has already written the audit line)."""
    app.notify(clean(result.message), title=title, severity="information" if result.ok else "error",
               timeout=6 if result.ok else 12, markup=False)


async def confirm_and_apply(screen: Any, cluster: Cluster, plan: ActionPlan, title: str) -> ActionResult | None:
    """Show `plan`, apply it when confirmed and flash the result; None when cancelled.
    Must run in a worker (it waits for the dialog)."""
    dialog = ConfirmScreen(plan, production=cluster.production)
    if not await screen.app.push_screen_wait(dialog):
        screen.app.notify(f"{title}: cancelled, nothing was sent", timeout=3, markup=False)
        return None
    try:
        result = await cluster.apply(plan, typed_name=dialog.typed_name)
    except ClusterError as e:  # apply maps errors itself; this is belt and braces for the UI
        result = e.result(f"{title}: ")
    flash(screen.app, result, title)
    return result

"""A one-line prompt (the `:` command line, the scale count): returns the text, or None on esc.

A prompt with a `detail` (what is being changed, the current value, kvwatch's suggestion) says it
on a line of its own above the field, so a narrow terminal never cuts the label beside the field."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Static

from widgets.tint import TintedOnce

from tui.keyhold import PromptInput


class PromptScreen(TintedOnce, ModalScreen[str | None]):
    BINDINGS = bindings("prompt")
    DEFAULT_CSS = """
    PromptScreen { align: center bottom; }
    PromptScreen > Vertical { width: 100%; height: auto; dock: bottom; background: $surface;
        border: round $primary; padding: 0 1; }
    PromptScreen Horizontal { height: 1; }
    PromptScreen #prompt-detail { height: 1; text-overflow: ellipsis; text-wrap: nowrap; color: $text-muted; }
    PromptScreen #prompt-title { width: auto; max-width: 60%; padding: 0 1 0 0; text-style: bold; }
    PromptScreen Input { width: 1fr; }
    PromptScreen #prompt-keys { width: auto; padding: 0 0 0 1; color: $text-muted; }
    """

    def __init__(self, title: str, *, placeholder: str = "", suggestions: list[str] | None = None,
                 value: str = "", detail: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail
        self.placeholder = placeholder
        self.suggestions = suggestions or []
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.detail:
                yield Static(self.detail, id="prompt-detail", markup=False)
            with Horizontal():
                yield Static(self.title_text, id="prompt-title", markup=False)
                suggester = SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None
                yield PromptInput(self.value, placeholder=self.placeholder, suggester=suggester, id="prompt-input",
                                  compact=True)
                yield Static("enter ok · esc cancel", id="prompt-keys", markup=False)

    def add_suggestions(self, more: list[str]) -> None:
        """Suggestions that arrived after the prompt opened (read from the cluster)."""
        self.suggestions += [m for m in more if m not in self.suggestions]
        if self.is_mounted:
            self.query_one(Input).suggester = SuggestFromList(self.suggestions, case_sensitive=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def scale_prompt(target: str, now: int, suggested: int | None) -> PromptScreen:
    """The count for `s`: the target and the counts above, "replicas:" beside the field, pre-filled
    with kvwatch's count when it suggests one (the arithmetic is on the runbook screen)."""
    detail = f"scale {target}  ·  now {now}"
    if suggested is not None:
        detail += f"  ·  kvwatch suggests {suggested} (pre-filled; g shows the arithmetic)"
    return PromptScreen("replicas:", placeholder=str(now), value=str(suggested) if suggested is not None else "",
                        detail=detail)

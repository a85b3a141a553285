"""Diffs, warnings and step lines as rich Text (never markup): cluster text is escaped first."""

from __future__ import annotations

from typing import Iterable, Mapping

from rich.text import Text
from textual.widgets import Static

from tui.core.textsafe import clean


def diff_text(diff: str, palette: Mapping[str, str] | None = None) -> Text:
    """A unified diff with added lines in the success colour and removed ones in the error colour."""
    pal = palette or {}
    add, rem, hunk = pal.get("success", "green"), pal.get("error", "red"), pal.get("accent", "cyan")
    t = Text(no_wrap=False)
    lines = diff.splitlines() or ["(no change)"]
    for i, raw in enumerate(lines):
        line = clean(raw)
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = hunk
        elif line.startswith("+"):
            style = f"bold {add}"
        elif line.startswith("-"):
            style = rem
        else:
            style = ""
        t.append(line, style=style)
        if i < len(lines) - 1:
            t.append("\n")
    return t


def notes_text(title: str, items: Iterable[str], style: str = "", mark: str = "! ") -> Text:
    """A titled list (warnings, errors, preflight messages); empty Text when there is none."""
    items = [clean(x) for x in items if x]
    t = Text()
    if not items:
        return t
    t.append(title + "\n", style=f"bold {style}".strip())
    for i, x in enumerate(items):
        t.append(mark + x, style=style)
        if i < len(items) - 1:
            t.append("\n")
    return t


class DiffView(Static):
    """Shows a unified diff; `show(diff)` repaints only when it changed."""

    DEFAULT_CSS = """
    DiffView { height: auto; padding: 0 1; }
    """

    def __init__(self, palette: Mapping[str, str] | None = None, **kw) -> None:
        super().__init__("", **kw)
        self.palette = palette
        self.diff: str | None = None

    def show(self, diff: str) -> None:
        if diff != self.diff:
            self.diff = diff
            self.update(diff_text(diff, self.palette))

"""Widgets that are styled once, when mounted, not also while being built.

Textual restyles a widget (and its component classes: an Input has five) whenever one of its
classes changes, even before it is mounted: `Input(compact=True)`, `Button(variant=...)` each
style a widget that mounting styles again a moment later (~0.3 ms a widget, and a form builds
dozens). Before mounting there is nothing to draw, and mounting applies the classes set by then.
"""

from __future__ import annotations

from textual.widgets import Button, Input


class StyledWhenMounted:
    """Skips the style updates of a widget that is not yet in the DOM."""

    def update_node_styles(self, animate: bool = True) -> None:
        if self.is_attached:  # type: ignore[attr-defined]
            super().update_node_styles(animate)  # type: ignore[misc]


class FormInput(StyledWhenMounted, Input):
    """An Input styled once on mount; with no validators it starts `-valid` (Textual adds that
    class on the first value set, restyling the widget for a class no rule reads); `can_focus`
    off: out of reach of keys and clicks (a form not filled yet) without the restyle of
    disabling it."""

    def __init__(self, *args, can_focus: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.can_focus = can_focus
        if not self.validators:
            self.add_class("-valid", update=False)


class FormButton(StyledWhenMounted, Button):
    pass

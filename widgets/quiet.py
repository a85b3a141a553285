"""Widgets that are styled once, when mounted, not also while being built.

Textual restyles a widget (and its component classes: an Input has five) whenever one of its
classes changes, even before it is mounted: `Input(compact=True)`, `Button(variant=...)` each
style a widget that mounting styles again a moment later (~0.3 ms a widget, and a form builds
dozens). Before mounting there is nothing to draw, and mounting applies the classes set by then.
"""

from __future__ import annotations

from textual import events
from textual.timer import Timer
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
        self._blink_args: tuple | None = None

    # The cursor's blink timer is made when the field is first focused, not on mount: a form of
    # nine fields started nine timers (a task each) on opening, where one field has the focus.
    # Input pauses it on blur and restarts it on focus, and checks for none before either.
    def set_interval(self, interval, callback=None, *, name=None, repeat=0, pause=False) -> Timer:
        if pause and self._blink_timer is None and callback == self._toggle_cursor:
            self._blink_args = (interval, callback, name, repeat)
            return None  # type: ignore[return-value]  # Input's own code allows for none
        return super().set_interval(interval, callback, name=name, repeat=repeat, pause=pause)

    def _on_focus(self, event: events.Focus) -> None:
        # before Input's own handler (Textual calls each class's in turn), which restarts it
        if self._blink_timer is None and self._blink_args is not None:
            interval, callback, name, repeat = self._blink_args
            self._blink_timer = super().set_interval(interval, callback, name=name, repeat=repeat,
                                                     pause=not (self.cursor_blink and self.has_focus))


class FormButton(StyledWhenMounted, Button):
    pass


class StyledOnOpening:
    """A screen not restyled on its first resume. Textual restyles a screen's whole tree on
    every resume (for a theme changed while it was covered); the first resume follows the push
    at once, the widgets styled as they were mounted a moment before (a second pass: ~1.5 ms of
    the detail's opening, ~5 ms of the edit form's 35 widgets). Later resumes restyle as before."""

    _resumed = False

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        if not self._resumed:
            self._resumed = True
            event.refresh_styles = False
            self.first_resume()
        super()._on_screen_resume(event)  # type: ignore[misc]

    def first_resume(self) -> None:
        """What the screen does once, on that first resume."""

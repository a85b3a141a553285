"""One row of a form: the flag, its value, and the help beside it, all drawn by the row itself.

The value is edited in an Input, but a row gets its Input (a `FieldEditor`) only when the field
is first edited: an Input cost ~3 ms to build, style, lay out and draw, and the engine-args form
has nine fields of which one has the focus on opening (nine Inputs were a third of the opening).
Until then the row draws the value, or the placeholder, in the cells the Input will cover, in
an unfocused compact Input's colours (Textual's own rules, restated below for the row's
component classes). Once made, a row's editor stays.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input

from widgets.quiet import FormInput

INPUT_W = 16
_LABEL = Style(bold=False)  # the label as it was: a segment of its own


class FieldEditor(FormInput):
    """A row's Input. Enter and the up / down arrows (and Tab / shift+tab, which the form binds
    for every widget in it) move to the next or the previous field: the form gives that field
    its editor first (the focus chain knows only the editors made so far)."""

    # priority: the app runs these as it reads the key, before it hands the keys behind it to
    # the focused widget; a widget's own binding runs later, when that widget's queue reaches
    # it, and the keys typed behind it were already queued for the field it left
    BINDINGS = [
        Binding("down,enter", "move(1)", "Next field", show=False, priority=True),
        Binding("up", "move(-1)", "Previous field", show=False, priority=True),
    ]

    def __init__(self, field: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.field = field

    def action_move(self, step: int) -> None:
        move = getattr(self.screen, "move_field", None)
        if move is not None:
            move(self, step)
        elif step > 0:
            self.screen.focus_next()
        else:
            self.screen.focus_previous()


class FieldRow(Horizontal):
    """`label` in the first `label_w` columns, the value in the next INPUT_W, then one space
    and the note, cut with an ellipsis; no note while `show_note` is off (too narrow: the form
    shows it below the row instead). `-invalid`: the value is in error."""

    COMPONENT_CLASSES = {"field-row--note", "field-row--value", "field-row--placeholder"}
    # the value's colours are a compact Input's, unfocused (textual/widgets/_input.py), with the
    # form's error background (tui/screens/edit_args.py); disabled, dimmed as Textual dims a
    # disabled Input
    DEFAULT_CSS = f"""
    FieldRow {{ height: 1; }}
    FieldRow:disabled {{ opacity: 0.7; }}
    FieldRow > Input {{ width: {INPUT_W}; }}
    FieldRow > .field-row--note {{ color: $text-muted; }}
    FieldRow > .field-row--value {{ background: $surface; color: $foreground; }}
    FieldRow > .field-row--placeholder {{ background: $surface; color: $text-disabled; }}
    FieldRow.-invalid > .field-row--value {{ background: $error 30%; background-tint: $error 20%; }}
    FieldRow.-invalid > .field-row--placeholder {{ background: $error 30%; background-tint: $error 20%; }}
    FieldRow:ansi > .field-row--value {{ background: ansi_default; color: ansi_default; }}
    FieldRow:ansi > .field-row--placeholder {{ background: ansi_default; color: ansi_default; text-style: dim; }}
    """

    class Picked(Message):
        """The row was clicked: edit its field."""

        def __init__(self, row: FieldRow) -> None:
            super().__init__()
            self.row = row

    def __init__(self, label: str, label_w: int, *, field: str, editor: Input | None = None,
                 classes: str | None = None, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(*([editor] if editor is not None else []), classes=classes, id=id)
        self.label, self.label_w, self.field = label, label_w, field
        self.note = Text()
        self.show_note = True
        self.value = ""
        self.placeholder = ""
        self.editor: Input | None = None
        if editor is not None:
            self.adopt(editor)

    def adopt(self, editor: Input) -> None:
        """`editor` edits this row's value from now on (it covers the value's cells)."""
        editor.styles.margin = (0, 0, 0, self.label_w)
        self.editor = editor

    @property
    def text(self) -> str:
        """The field's text: the editor's, once it has one."""
        return self.editor.value if self.editor is not None else self.value

    def set_text(self, value: str, placeholder: str | None = None) -> None:
        if placeholder is not None:
            self.placeholder = placeholder
            if self.editor is not None:
                self.editor.placeholder = placeholder
        self.value = value
        if self.editor is not None:
            self.editor.value = value
        else:
            self.refresh()

    def set_note(self, note: Text, show: bool | None = None) -> None:
        if show is not None:
            self.show_note = show
        self.note = note
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        if self.editor is None:
            self.post_message(self.Picked(self))

    def render(self) -> Text:
        # the flag and the blank after it as two segments, as a Label and its padding drew them
        t = Text(no_wrap=True, end="")
        t.append(self.label[: self.label_w], style=_LABEL)
        t.append(" " * (self.label_w - t.cell_len))
        # the value's cells (the editor, once made, is drawn over them)
        shown = self.value or self.placeholder
        cell = Text(shown, no_wrap=True, end="")
        cell.truncate(INPUT_W, pad=True)
        cell.stylize(self.get_component_rich_style("field-row--value"))
        if not self.value:
            cell.stylize(self.get_component_rich_style("field-row--placeholder"), 0, len(shown))
        t.append_text(cell)
        room = self.size.width - self.label_w - INPUT_W - 1
        if self.show_note and room > 0 and self.note:
            note = self.note.copy()
            note.truncate(room, overflow="ellipsis")
            note.stylize(self.get_component_rich_style("field-row--note"))
            t.append(" ")
            t.append_text(note)
        return t

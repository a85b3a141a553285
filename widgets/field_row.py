"""One row of a form: the flag, its Input, and the help beside it, the flag and the help drawn
by the row itself (a Label and a Static each were two more widgets a row to build, style, lay
out and draw: 18 on the engine-args form, a quarter of its opening)."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.containers import Horizontal
from textual.widgets import Input

INPUT_W = 16
_LABEL = Style(bold=False)  # the label as it was: a segment of its own


class FieldRow(Horizontal):
    """`label` in the first `label_w` columns, the Input in the next INPUT_W, then one space
    and the note, cut with an ellipsis; no note while `show_note` is off (too narrow: the form
    shows it below the row instead)."""

    COMPONENT_CLASSES = {"field-row--note"}
    DEFAULT_CSS = f"""
    FieldRow {{ height: 1; }}
    FieldRow > Input {{ width: {INPUT_W}; }}
    FieldRow > .field-row--note {{ color: $text-muted; }}
    """

    def __init__(self, label: str, label_w: int, field: Input, *, classes: str | None = None,
                 id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(field, classes=classes, id=id)
        self.label, self.label_w = label, label_w
        self.note = Text()
        self.show_note = True
        field.styles.margin = (0, 0, 0, label_w)

    def set_note(self, note: Text, show: bool | None = None) -> None:
        if show is not None:
            self.show_note = show
        self.note = note
        self.refresh()

    def render(self) -> Text:
        # the flag and the blank after it as two segments, as a Label and its padding drew them
        t = Text(no_wrap=True, end="")
        t.append(self.label[: self.label_w], style=_LABEL)
        t.append(" " * (self.label_w + INPUT_W - t.cell_len))
        room = self.size.width - self.label_w - INPUT_W - 1
        if self.show_note and room > 0 and self.note:
            note = self.note.copy()
            note.truncate(room, overflow="ellipsis")
            note.stylize(self.get_component_rich_style("field-row--note"))
            t.append(" ")
            t.append_text(note)
        return t

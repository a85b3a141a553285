"""Text that wraps each line under its own indent (a hanging indent), for the report screens.

Rich wraps a long line back to column 0, so at 80 columns a runbook step's description or an
evidence line went on at the left edge among the step numbers. Here a line's continuation starts
where its text started: under its leading blanks, and after a detail line's "│ " bar, which is
repeated so the block stays one block."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

_BARS = ("│ ", "| ")  # a detail line's bar (unicode and --ascii), kept on its continuations


def _prefix(plain: str) -> int:
    """Columns of a line's hanging prefix: its leading blanks, and a bar right after them."""
    n = len(plain) - len(plain.lstrip(" "))
    if plain[n:n + 2] in _BARS:
        n += 2
    return n


class Hanging:
    """`text` drawn line by line, each wrapped at the width under its own prefix."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        new_line = Segment.line()
        for line in self.text.split("\n", allow_blank=True):
            if line.cell_len <= width:
                yield from line.render(console, "")
                yield new_line
                continue
            n = min(_prefix(line.plain), max(0, width - 10))  # a deep indent never starves the text
            head, rest = line[:n], line[n:]
            wrapped = rest.wrap(console, width - n, overflow="fold", no_wrap=False)
            for i, part in enumerate(wrapped):
                part.rstrip()
                out = head.copy() if i == 0 else _continuation(head)
                out.append_text(part)
                yield from out.render(console, "")
                yield new_line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text)


def _continuation(head: Text) -> Text:
    """The prefix on a continuation line: blanks, then the bar where the line had one (styled)."""
    n = len(head.plain)
    bar = 2 if head.plain.endswith(_BARS) else 0
    out = Text(" " * (n - bar), end="")
    if bar:
        out.append_text(head[n - bar:])
    return out

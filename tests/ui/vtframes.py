"""The frames an app in a pilot test hands to the terminal, through a VT emulator: what a user
would see after each one (a partial update leaves the lines it does not touch as they were)."""

from __future__ import annotations

import pyte
from rich.console import Console


class Terminal:
    """What the terminal shows after each frame the app writes: (screen class, lines)."""

    def __init__(self, app, cols: int, rows: int) -> None:
        self.vt = pyte.Screen(cols, rows)
        self.stream = pyte.Stream(self.vt)
        self.console = Console(width=cols, height=rows, force_terminal=True, color_system="truecolor",
                               legacy_windows=False)
        self.frames: list[tuple[type, list[str]]] = []
        display = app._display

        def recording(screen, renderable) -> None:
            display(screen, renderable)
            if renderable is not None and not app._batch_count:
                self.stream.feed(renderable.render_segments(self.console))
                self.frames.append((type(screen), list(self.vt.display)))

        app._display = recording

    def of(self, cls: type) -> list[list[str]]:
        return [lines for screen, lines in self.frames if screen is cls]

"""Containers that are laid out but not drawn.

Textual paints every container over its whole area before the widgets in it, line by line,
even one with nothing of its own to show (no background, border, scrollbar or content): a
blank the colour of the screen under it, then covered by its children. A container marked
`-undrawn` is left out of the painting (`visibility: hidden`) and its children are painted as
before (each `visible` again): the same screen, cell for cell (tests/ui/test_screen_open.py
compares both), with less to paint. Only for containers that draw nothing: a hidden one with a
background, border or scrollbar would lose it; and a hidden container is not sized, so nothing
may read its size.

Set as inline styles when the screen is mounted, not as stylesheet rules: a rule for the
children (`.-undrawn > *`) would be checked against every widget of every screen once loaded.
"""

from __future__ import annotations

from textual.dom import DOMNode

UNDRAWN = "-undrawn"


def leave_out(screen: DOMNode) -> None:
    """Leave `screen`'s `-undrawn` containers out of the painting, their children in (once
    they are mounted, before the first layout: the screen's on_mount)."""
    for container in screen.query("." + UNDRAWN):  # parents before children
        container.styles.visibility = "hidden"
        for child in container.children:
            if not child.has_class(UNDRAWN):
                child.styles.visibility = "visible"

"""Containers that are laid out but not drawn.

Textual paints every container over its whole area before the widgets in it, line by line,
even one with nothing of its own to show (no background, border, scrollbar or content): a
blank the colour of the screen under it, then covered by its children. Marked `-undrawn`, such
a container is left out of the drawing (`visibility: hidden`) and its children are drawn as
before (each `visible` again): the same screen, character for character and style for style
(tests/ui/test_screen_open.py compares both), with less to paint. Only for containers that
draw nothing: a hidden one with a background, border or scrollbar would lose it.
"""

from __future__ import annotations


def undrawn_css(screen: str) -> str:
    """The rules for `screen`'s `-undrawn` containers (nested ones stay undrawn)."""
    return f"""
    {screen} .-undrawn {{ visibility: hidden; }}
    {screen} .-undrawn > * {{ visibility: visible; }}
    {screen} .-undrawn > .-undrawn {{ visibility: hidden; }}
    """

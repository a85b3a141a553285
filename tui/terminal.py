"""What the terminal can show: colours at all, Unicode glyphs, and the filter that strips colour.

kvwatch runs over SSH on bastions, inside tmux and screen, and on bare `TERM=linux` consoles.
NO_COLOR (https://no-color.org) or a terminal without colours gets the monochrome theme and no
colour escape sequences at all; a console without Unicode fonts gets ASCII glyphs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Mapping

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

# Terminals whose fonts lack block, braille and most symbol glyphs.
ASCII_TERMS = ("linux", "vt100", "vt102", "vt220", "cons25", "dumb")
NO_COLOUR_TERMS = ("dumb", "vt100", "vt102", "vt220")


@dataclass(frozen=True, slots=True)
class Terminal:
    no_color: bool  # emit no colour escape sequences
    ascii: bool  # ASCII glyphs only
    why: str = ""  # for the log/notification: what made us choose this


def _utf8(encoding: str | None) -> bool:
    return (encoding or "").lower().replace("-", "").replace("_", "") in ("utf8", "utf8sig")


def detect(environ: Mapping[str, str] | None = None, encoding: str | None = None) -> Terminal:
    env = os.environ if environ is None else environ
    term = env.get("TERM", "")
    enc = encoding if encoding is not None else getattr(sys.__stdout__, "encoding", None)
    reasons = []
    no_color = "NO_COLOR" in env  # any value, even empty, per no-color.org
    if no_color:
        reasons.append("NO_COLOR is set")
    elif term in NO_COLOUR_TERMS or env.get("TEXTUAL_COLOR_SYSTEM") == "none":
        no_color = True
        reasons.append(f"TERM={term} has no colours")
    ascii_only = term in ASCII_TERMS
    if ascii_only:
        reasons.append(f"TERM={term}: ASCII glyphs")
    elif enc and not _utf8(enc):
        ascii_only = True
        reasons.append(f"output encoding {enc}: ASCII glyphs")
    return Terminal(no_color, ascii_only, "; ".join(reasons))


class StripColor(LineFilter):
    """Remove every colour from the output, keeping bold, reverse, underline and dim.

    Textual's own NO_COLOR handling turns colours into greys, which still sends 24-bit colour
    sequences; this drops them entirely.
    """

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [Segment(text, None if style is None else style.without_color, control)
                for text, style, control in segments]

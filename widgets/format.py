"""Number formatting shared by the table, the detail view and the header."""

from __future__ import annotations

from tui.core.model import AtLeast


def num(v: float | None, digits: int = 0) -> str:
    if v is None:
        return "–"
    if abs(v) >= 10_000:
        return f"{v / 1000:.0f}k"
    if abs(v) >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:.{digits}f}"


def pct(v: float | None, scale: float = 1.0) -> str:
    """A ratio (scale 100 for 0..1 inputs) or a percentage as 'NN%'."""
    return "–" if v is None else f"{v * scale:.0f}%"


def secs(v: float | None) -> str:
    if v is None:
        return "–"
    if isinstance(v, AtLeast):  # in the +Inf bucket: more than the last bucket, not a number
        return "> " + secs(float(v))
    if v < 1:
        return f"{v * 1000:.0f}ms"
    if v < 100:
        return f"{v:.1f}s"
    return f"{v:.0f}s"


def rate(v: float | None) -> str:
    if v is None:
        return "–"
    if v == 0:
        return "0"
    if v < 0.1:
        return f"{v:.2f}"
    return num(v, 1)


def ago(seconds: float) -> str:
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


# ASCII stand-ins for the few non-ASCII glyphs kvwatch prints itself (TERM=linux consoles).
ASCII_MAP = str.maketrans({"–": "-", "·": "-", "…": "~", "█": "#", "░": ".", "│": "|", "→": ">", "✔": "+",
                           "≥": ">", "≤": "<"})


def asciify(t):
    """The same rich Text with every glyph above replaced one-for-one (styles and spans kept)."""
    from rich.text import Text

    plain = t.plain
    out = plain.translate(ASCII_MAP)
    if out == plain:
        return t
    return Text(out, style=t.style, spans=list(t.spans), justify=t.justify, overflow=t.overflow,
                no_wrap=t.no_wrap, end=t.end)

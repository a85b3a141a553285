"""Fixed-scale text sparklines.

Textual's Sparkline autoscales to its own min and max, so a line at 95% would look like one
at 5%. For percentages the scale must be fixed (0..1 or 0..100); rates get an explicit top.
"""

from __future__ import annotations

from typing import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII = " .:-=+*#@"  # for terminals without Unicode block glyphs (TERM=linux)


def spark(values: Sequence[float | None], width: int, top: float, *, ascii: bool = False) -> str:
    """Last `width` values on a 0..top scale; None (no data) shows as a gap."""
    chars = ASCII if ascii else BLOCKS
    vals = list(values)[-width:]
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
            continue
        frac = 0.0 if top <= 0 else max(0.0, min(1.0, v / top))
        # Any non-zero value gets at least the lowest glyph so "a little" differs from "none".
        idx = round(frac * (len(chars) - 1))
        if v > 0 and idx == 0:
            idx = 1
        out.append(chars[idx])
    return "".join(out).rjust(width)


def auto_top(values: Sequence[float | None], floor: float) -> float:
    """Scale for unbounded series (queue, rates): the window's max, never below `floor`."""
    m = max((v for v in values if v is not None), default=0.0)
    return max(floor, m)

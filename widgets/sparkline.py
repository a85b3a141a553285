"""Fixed-scale text sparklines.

Textual's Sparkline autoscales to its own min and max, so a line at 95% would look like one
at 5%. For percentages the scale must be fixed (0..1 or 0..100); rates get an explicit top.
"""

from __future__ import annotations

from typing import Sequence, cast

BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII = " .:-=+*#@"  # for terminals without Unicode block glyphs (TERM=linux)


def spark(values: Sequence[float | None], width: int, top: float, *, ascii: bool = False) -> str:
    """Last `width` values on a 0..top scale; None (no data) shows as a gap."""
    chars = ASCII if ascii else BLOCKS
    vals = values[-width:] if type(values) in (tuple, list) else list(values)[-width:]
    steps = len(chars) - 1
    out: list[str] = []
    add = out.append
    for v in vals:
        if v is None:
            add(" ")
            continue
        if top <= 0:
            frac = 0.0
        else:  # max(0.0, min(1.0, v / top)) written out (a NaN ends at 1.0, as there)
            frac = v / top
            frac = frac if frac < 1.0 else 1.0
            frac = frac if frac > 0.0 else 0.0
        # Any non-zero value gets at least the lowest glyph so "a little" differs from "none".
        idx = round(frac * steps)
        if v > 0 and idx == 0:
            idx = 1
        add(chars[idx])
    return "".join(out).rjust(width)


def auto_top(values: Sequence[float | None], floor: float) -> float:
    """Scale for unbounded series (queue, rates): the window's max, never below `floor`."""
    if type(values) not in (tuple, list) or None in values:
        nums: Sequence[float] = [v for v in values if v is not None]
    else:  # a tuple or list with no gap: its max in C
        nums = cast("Sequence[float]", values)
    return max(floor, max(nums, default=0.0))

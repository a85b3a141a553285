"""spark() and auto_top() run for every sparkline cell on screen at every refresh; their faster
forms must give exactly what the plain loops below give (kept here as the reference), for every
kind of value a series holds: None gaps, zeros, negatives, NaN, infinities, values above the top,
a top of zero or less, series shorter and longer than the width, tuples, lists and iterators."""

from __future__ import annotations

import math
import random

from widgets.sparkline import ASCII, BLOCKS, auto_top, spark


def spark_reference(values, width, top, *, ascii=False):
    chars = ASCII if ascii else BLOCKS
    vals = list(values)[-width:]
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
            continue
        frac = 0.0 if top <= 0 else max(0.0, min(1.0, v / top))
        idx = round(frac * (len(chars) - 1))
        if v > 0 and idx == 0:
            idx = 1
        out.append(chars[idx])
    return "".join(out).rjust(width)


def auto_top_reference(values, floor):
    m = max((v for v in values if v is not None), default=0.0)
    return max(floor, m)


ODD = (None, 0.0, -0.0, 0, 1, -3.5, math.nan, math.inf, -math.inf, 1e-300, 0.0625, 0.5, 100.0, 1e9)


def _series(rnd: random.Random) -> list:
    n = rnd.choice((0, 1, 5, 11, 12, 13, 60))
    top = rnd.choice((1.0, 4.0, 100.0))
    return [rnd.choice(ODD) if rnd.random() < 0.3 else rnd.uniform(-0.1, 1.3) * top for _ in range(n)]


def test_spark_and_auto_top_match_the_plain_loops():
    rnd = random.Random(7)
    for _ in range(4000):
        vals = _series(rnd)
        width = rnd.choice((1, 5, 11, 12, 40))
        top = rnd.choice((1.0, 4.0, 100.0, 0.0, -1.0, 0.37, math.inf, 1e-9))
        floor = rnd.choice((0.0, 1.0, 4.0))
        ascii = rnd.random() < 0.5
        want = spark_reference(vals, width, top, ascii=ascii)
        for form in (tuple(vals), list(vals), iter(vals)):
            assert spark(form, width, top, ascii=ascii) == want, (vals, width, top, ascii)
        want_top = auto_top_reference(vals, floor)
        for form in (tuple(vals), list(vals), iter(vals)):
            got = auto_top(form, floor)
            assert got == want_top or (math.isnan(got) and math.isnan(want_top)), (vals, floor)
            assert type(got) is type(want_top), (vals, floor)

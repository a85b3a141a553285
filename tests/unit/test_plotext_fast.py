"""widgets/plotext_fast.py draws the same plots as plotext's own functions, character for
character: plots built both ways, and each function called both ways on the same input."""

from __future__ import annotations

import contextlib
import math
import random

import plotext._utility as ut
import pytest
from plotext._figure import _figure_class
from plotext._matrix import matrix_class

from widgets import plotext_fast as F

FAST = {"hd_group": F.hd_group, "set_canvas": F.set_canvas, "set_matrices": F.set_matrices,
        "insert_element": F.insert_element}


@contextlib.contextmanager
def plotext_own():
    """plotext's functions for the duration (the app installs the fast ones at import)."""
    before = {"hd_group": ut.hd_group, **{n: getattr(matrix_class, n) for n in FAST if n != "hd_group"}}
    ut.hd_group = F.ORIGINAL["hd_group"]
    for n in FAST:
        if n != "hd_group":
            setattr(matrix_class, n, F.ORIGINAL[n])
    try:
        yield
    finally:
        ut.hd_group = before["hd_group"]
        for n in FAST:
            if n != "hd_group":
                setattr(matrix_class, n, before[n])


def _series(r: random.Random, n: int, gaps: bool) -> list:
    out = []
    for i in range(n):
        u = r.random()
        out.append(None if gaps and u < 0.08 else float("nan") if gaps and u < 0.1 else
                   r.choice((0.0, 1.0, r.random() * 10, -r.random(), 30 * r.random(), i % 3)))
    return out


def _build(seed: int) -> str:
    r = random.Random(seed)
    w, h = r.choice(((79, 12), (30, 6), (150, 40), (2, 2), (39, 9), (1, 1)))
    f = _figure_class()
    f.plotsize(w, h)
    f._set_size(w, h)
    f.theme(r.choice(("dark", "default", "clear", "pro")))
    f.title(r.choice(("KV usage (0-1)", "requests", "")))
    n = r.choice((0, 1, 2, 3, 31, 120, 300))
    xs = [float(i - n) for i in range(n)]
    for s in range(r.choice((1, 2, 3))):
        ys = _series(r, n, gaps=r.random() < 0.5)
        marker = r.choice(("braille", "braille", "hd", "fhd", "dot", "*"))
        if r.random() < 0.2:
            f.scatter(xs, ys, label=f"s{s}", marker=marker)
        else:
            f.plot(xs, ys, label=f"s{s}", marker=marker)
    if r.random() < 0.5:
        f.ylim(0.0, r.choice((1.0, 100.0, 12.5)))
    f.xlabel("seconds")
    return f.build()


@pytest.mark.parametrize("seed", range(120))
def test_a_plot_is_drawn_the_same(seed: int) -> None:
    with plotext_own():
        try:
            want: object = _build(seed)
        except Exception as e:  # noqa: BLE001 - an input plotext refuses is refused alike
            want = type(e)
    assert F.install()  # the installed plotext is one they were verified against
    try:
        got: object = _build(seed)
    except Exception as e:  # noqa: BLE001
        got = type(e)
    assert got == want


@pytest.mark.parametrize("seed", range(60))
def test_hd_group_the_same(seed: int) -> None:
    r = random.Random(seed)
    n = r.choice((1, 2, 7, 200))
    x = [r.choice((r.randrange(0, 300), None, math.nan)) if r.random() < 0.1 else r.randrange(0, 300) for _ in range(n)]
    y = [r.choice((r.randrange(0, 100), None)) if r.random() < 0.1 else r.randrange(0, 100) for _ in range(n)]
    f = r.choice(((2, 4), (2, 2), (1, 1), (2, 3)))
    xf = [f[0]] * n
    yf = [f[1]] * n
    if r.random() < 0.3:  # sizes that differ by point: plotext keeps the last one's
        xf = [r.choice((1, 2)) for _ in range(n)]
        yf = [r.choice((1, 2, 3, 4)) for _ in range(n)]
    try:
        want: object = F.ORIGINAL["hd_group"](list(x), list(y), list(xf), list(yf))
    except Exception as e:  # noqa: BLE001
        want = type(e)
    try:
        got: object = F.hd_group(list(x), list(y), list(xf), list(yf))
    except Exception as e:  # noqa: BLE001
        got = type(e)
    assert got == want


@pytest.mark.parametrize("seed", range(40))
def test_the_matrix_and_its_text_the_same(seed: int) -> None:
    def matrix(fast: bool) -> matrix_class:
        rr = random.Random(seed)
        m = matrix_class()
        m.set_size(rr.randrange(0, 40), rr.randrange(0, 12))
        m.set_canvas_area(rr.randrange(0, 5), rr.randrange(5, 40), rr.randrange(0, 3), rr.randrange(3, 12))
        m.set_canvas_color(rr.choice((ut.no_color, "black", 17, (10, 20, 30))))
        m.set_axes_color(rr.choice((ut.no_color, "white", 231)))
        (F.set_matrices if fast else F.ORIGINAL["set_matrices"])(m)
        put = F.insert_element if fast else F.ORIGINAL["insert_element"]
        for _ in range(rr.randrange(0, 300)):
            put(m, rr.randrange(-2, 42), rr.randrange(-2, 14), rr.choice("⠁⣿x─ "),
                rr.choice((None, "red", 9, (1, 2, 3))), rr.choice((None, "bold", ut.no_color)),
                rr.choice((None, None, "blue")), rr.random() < 0.3)
        return m

    want, got = matrix(False), matrix(True)
    assert (got.marker, got.fullground, got.style, got.background) == \
        (want.marker, want.fullground, want.style, want.background)
    assert F.set_canvas(got) == F.ORIGINAL["set_canvas"](want)


def test_another_plotext_release_keeps_its_own_functions(monkeypatch) -> None:
    import importlib.metadata

    with plotext_own():
        monkeypatch.setattr(importlib.metadata, "version", lambda name: "6.1.0")
        assert F.install() is False
        assert ut.hd_group is F.ORIGINAL["hd_group"] and matrix_class.set_canvas is F.ORIGINAL["set_canvas"]

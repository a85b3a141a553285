"""Faster equivalents of plotext's costliest steps in building a line plot, installed over
plotext's own (`install`): the same results, value for value and character for character
(tests/unit/test_plotext_fast.py builds plots both ways and compares them).

Building one of the detail screen's plots (a few dozen points, braille) took ~4 ms, six of
them half of the screen's opening; 0.5-0.6x that with these. Most of it went to functions
written for clarity, not speed:
- `hd_group` (which braille dots each cell lights) made a dot matrix for every interpolated
  point, though one a cell is kept;
- `matrix_class.set_canvas` (the matrix to ANSI text) compared each cell's colours with its
  neighbours' as new lists, and grew the text one character at a time;
- `matrix_class.set_matrices` (the blank canvas) asked, for every cell, whether it was inside
  the plotting area;
- `matrix_class.insert_element` (a character put in a cell) made five calls a character.
"""

from __future__ import annotations

import math
from itertools import chain

import plotext._utility as ut
from plotext._matrix import matrix_class

ORIGINAL = {"hd_group": ut.hd_group, "set_canvas": matrix_class.set_canvas,
            "set_matrices": matrix_class.set_matrices, "insert_element": matrix_class.insert_element}


def hd_group(x, y, xf, yf):
    """plotext's `hd_group`: the cells the points fall in (in order of first appearance) and
    the dots lit in each, as a flat tuple read from the cell's top row down."""
    l, xfm, yfm = len(x), max(xf), max(yf)
    isnan = math.isnan  # plotext's `numerical`, written out (a call a point was a tenth of the time)
    xm = [el // xfm if (el is not None and not isnan(el)) or isinstance(el, str) else el for el in x]
    ym = [el // yfm if (el is not None and not isnan(el)) or isinstance(el, str) else el for el in y]
    dims: dict = {}
    for key, xfi, yfi in zip(zip(xm, ym, strict=False), xf, yf, strict=False):  # a cell's matrix: its last point's size
        dims[key] = (xfi, yfi)
    m = {key: [[0] * xfi for _ in range(yfi)] for key, (xfi, yfi) in dims.items()}
    if l:
        xfi, yfi = xf[-1], yf[-1]  # as plotext's loop leaves them: the last point's size for every point
        floor = math.floor
        numerical = ut.numerical
        for xi, yi, key in zip(x, y, zip(xm, ym, strict=False), strict=False):
            a, b = key
            if type(a) is int and type(b) is int or all(list(map(numerical, key))):  # an int is numerical
                m[key][floor(yi % yfi)][floor(xi % xfi)] = 1
    x, y = ut.transpose(m.keys(), 2)
    return x, y, [tuple(chain.from_iterable(reversed(el))) for el in m.values()]


def set_canvas(self):
    """plotext's `set_canvas`: each run of cells of the same colours after its escape, closed
    by a reset, rows top first."""
    to_ansi, end, cols = ut.colors_to_ansi, ut.ansi_end, self.cols
    out: list[str] = []
    for row in self.Rows[::-1]:
        colours = list(zip(self.fullground[row], self.style[row], self.background[row], strict=False))[:cols]
        marker = self.marker[row]
        col = 0
        while col < cols:
            start, c = col, colours[col]
            col += 1
            while col < cols and colours[col] == c:
                col += 1
            out.append(to_ansi(*c))
            out.append("".join(marker[start:col]))
            out.append(end)
        out.append("\n")
    self.canvas = "".join(out)
    return self.canvas


def set_matrices(self):
    """plotext's `set_matrices`: blank markers and colours, the canvas colour inside the
    plotting area and the axes' outside it."""
    cols, canvas, axes = self.cols, self.canvas_color, self.axes_color
    self.marker = [[ut.space] * cols for _ in self.Rows]
    self.fullground = [[ut.no_color] * cols for _ in self.Rows]
    inside = [canvas if col in self.Cols_canvas else axes for col in self.Cols]
    self.background = [list(inside) if row in self.Rows_canvas else [axes] * cols for row in self.Rows]
    self.style = [[ut.no_color] * cols for _ in self.Rows]


def insert_element(self, col, row, marker, fullground=None, style=None, background=None, check_canvas=False):
    """plotext's `insert_element`: a character and its colours put in a cell of the matrix (in
    the plotting area only, with `check_canvas`), without a call per test and per setting."""
    if (check_canvas is False or (col in self.Cols_canvas and row in self.Rows_canvas)) \
            and col in self.Cols and row in self.Rows:
        self.marker[row][col] = marker
        if fullground is not None:
            self.fullground[row][col] = fullground
        if background is not None:
            self.background[row][col] = background
        if style is not None:
            self.style[row][col] = style


VERIFIED = ("5.3.2",)  # the plotext releases whose internals these were compared with


def install() -> bool:
    """plotext builds plots with these from now on (in this process), where its release is one
    they were verified against; another release keeps its own (slower, never different)."""
    try:
        from importlib.metadata import version

        if version("plotext") not in VERIFIED:
            return False
    except Exception:  # noqa: BLE001 - no metadata: plotext's own code is the safe choice
        return False
    ut.hd_group = hd_group
    matrix_class.insert_element = insert_element
    matrix_class.set_canvas = set_canvas
    matrix_class.set_matrices = set_matrices
    return True

"""FleetTable draws a data row's line in one pass (FleetTable._direct_line) instead of through
DataTable.render_line's layers and then _merged, with cached styles: every line must come out as
the very segments DataTable's own drawing and the rewrite render_line makes of it give (written
out uncached in this file). Each case paints every line of the table both ways and compares them:
kvwatch's own rows (every verdict, a stale and a down row, pressured rows, sparklines), the cursor
row, the hover row, scrolled down, ASCII mode, every shipped theme, every width the layout picks,
and lines the direct path must leave to the general one (the header, blank lines, a cell it does
not draw)."""

from __future__ import annotations

import pytest
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.coordinate import Coordinate
from textual.strip import Strip
from textual.widgets import DataTable

from tests.ui.conftest import PROFILES, make_app, prime
from themes import THEMES
from widgets.fleet_table import FleetTable

KINDS = ("healthy", "pressure", "compute", "fault", "capped", "stalled", "healthy", "down")
MANY = {**PROFILES, **{f"replica-{i:02d}": KINDS[i % len(KINDS)] for i in range(40)},
        "a-very-long-replica-name-for-a-narrow-column-0123456789": "pressure"}


def _reference_line(table: FleetTable, y: int) -> Strip:
    """The line as DataTable draws it (every cell through Rich), then rewritten as FleetTable's
    render_line always has: data cells on column 0's meta, a blank joining its neighbour's run
    where that looks the same, same-style neighbours merged. Written out here, uncached, so
    that neither the direct path nor the general path's caches judge themselves."""
    table._line_ctx = None
    strip = DataTable.render_line(table, y)
    segs: list[Segment] = []
    for text, style, control in strip:
        if style is not None and style._meta:
            meta = style.meta
            if meta.get("row", -1) >= 0 and meta.get("column", 0) > 0:
                style = style.clear_meta_and_links() + Style.from_meta({**meta, "column": 0})
        if segs and style is not None and not text.strip() and not style.underline and not style.reverse:
            prev = segs[-1].style
            if prev is not None and prev.bgcolor == style.bgcolor and prev.meta == style.meta:
                style = prev
        segs.append(Segment(text, style, control))
    return Strip(Segment.simplify(segs), strip.cell_length)


def _paint(table: FleetTable, monkeypatch, general: bool) -> tuple[list, int]:
    """Every line of the table as (text, style, control) triples, and how many the direct path
    drew; `general`: the reference (DataTable's cells, the rewrite uncached)."""
    direct = FleetTable._direct_line
    drawn = [0]

    def counted(self, y):
        strip = direct(self, y)
        drawn[0] += strip is not None
        return strip

    with monkeypatch.context() as m:
        m.setattr(FleetTable, "_direct_line", counted)
        if general:
            m.setattr(FleetTable, "_cell_line", lambda self, *a: None)
            m.setattr(FleetTable, "render_line", _reference_line)
        table._clear_caches()
        table._styles_cache.clear()
        table._update_count += 1
        lines = [[(s.text, s.style, s.control) for s in table.render_line(y)] for y in range(table.size.height)]
    assert not general or not drawn[0]
    return lines, drawn[0]


def _same(table: FleetTable, monkeypatch, least: int) -> None:
    table._pseudo_class_state = table.get_pseudo_class_state()
    want, _ = _paint(table, monkeypatch, general=True)
    got, drawn = _paint(table, monkeypatch, general=False)
    for y, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, (y, a, b)
    assert drawn >= least, drawn


async def _cases(pilot, monkeypatch) -> None:
    table = pilot.app.screen.query_one(FleetTable)
    rows_on_screen = min(table.row_count, table.size.height - 1)
    _same(table, monkeypatch, rows_on_screen)
    table.move_cursor(row=2, animate=False)
    table._show_hover_cursor = True
    table.hover_coordinate = Coordinate(4, 3)
    await pilot.pause()
    _same(table, monkeypatch, rows_on_screen)
    table.show_cursor = False
    await pilot.pause()
    _same(table, monkeypatch, rows_on_screen)
    table.show_cursor = True
    table.scroll_to(y=7, animate=False, immediate=True)
    await pilot.pause()
    assert table.scroll_offset.y == 7
    _same(table, monkeypatch, min(table.row_count - 7, table.size.height - 1))
    table.move_cursor(row=9, animate=False)
    await pilot.pause()
    _same(table, monkeypatch, 1)


@pytest.mark.parametrize("theme", sorted(THEMES))
async def test_every_theme_paints_the_same_lines(monkeypatch, theme):
    app = make_app(MANY, theme=theme, no_color=theme == "kvwatch-mono")
    async with app.run_test(size=(200, 30)) as pilot:
        await prime(pilot, 4)
        await _cases(pilot, monkeypatch)


@pytest.mark.parametrize("size", [(80, 24), (120, 30), (250, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
async def test_every_width_and_ascii_mode_paints_the_same_lines(monkeypatch, size, ascii):
    app = make_app(MANY, ascii=ascii)
    async with app.run_test(size=size) as pilot:
        await prime(pilot, 5)
        app.monitor.source.profiles["replica-01"] = "down"  # stale, then down: tagged name, dim values
        await prime(pilot, 2)
        await _cases(pilot, monkeypatch)


async def test_lines_the_direct_path_must_not_draw_are_drawn_by_the_general_path(monkeypatch):
    app = make_app(MANY)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        assert table._direct_line(0) is None  # the header
        name = table._order[1]
        table._set_cell(name, table.ordered_columns[3].key, Text("日本語"))  # wide: DataTable draws it
        table._update_count += 1
        assert table._direct_line(2) is None and table._direct_line(3) is not None
        _same(table, monkeypatch, 1)
    few = make_app({"only-one": "healthy"})
    async with few.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 3)
        table = few.screen.query_one(FleetTable)
        assert table._direct_line(1) is not None and table._direct_line(2) is None  # below the last row
        _same(table, monkeypatch, 1)

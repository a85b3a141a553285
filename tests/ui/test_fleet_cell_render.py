"""FleetTable draws its cells without Rich's general renderer (FleetTable._render_cell): every
cell, and every painted line, must come out as the very segments and styles DataTable's own path
gives. Each case renders through both and compares them: kvwatch's own rows (every verdict, stale
and dim values, tagged names, sparklines, every column width the layout picks), the header, the
cursor row, the hover row, ASCII mode and every shipped theme, plus hand-made cells the direct path
must hand back to DataTable (spans, wide characters, too long, justified, wrapped, multi-line)."""

from __future__ import annotations

import pytest
from rich.style import Style
from rich.text import Span, Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from tests.ui.conftest import PROFILES, make_app, prime
from themes import THEMES
from widgets.fleet_table import FleetTable

MANY = {**PROFILES, "llama-8b-7d9f-stale": "healthy", "sglang-qwen-0": "compute",
        "a-very-long-replica-name-for-a-narrow-column-0123456789": "pressure"}


def _reference(table: FleetTable, r: int, c: int, base: Style, width: int, cursor: bool, hover: bool):
    table._cell_render_cache.clear()
    out = DataTable._render_cell(table, r, c, base, width, cursor, hover)
    table._cell_render_cache.clear()
    return out


def _direct(table: FleetTable, r: int, c: int, base: Style, width: int, cursor: bool, hover: bool):
    table._cell_render_cache.clear()
    out = table._render_cell(r, c, base, width, cursor, hover)
    table._cell_render_cache.clear()
    return out


def _segments(lines):
    return [[(s.text, s.style, s.control) for s in line] for line in lines]


def _compare_cells(table: FleetTable) -> int:
    """Every cell of every row (and the header) through both paths; returns how many cells the
    direct path itself drew, so a test can tell it was exercised rather than bypassed."""
    drawn = 0
    widths = [col.get_render_width(table) for col in table.ordered_columns]
    bases = [table.rich_style, Style(), Style(color="red", bgcolor="#101010", bold=True)]
    for r in range(-1, table.row_count):
        for c, width in enumerate(widths):
            for base in bases:
                for cursor, hover in ((False, False), (True, False), (False, True), (True, True)):
                    want = _segments(_reference(table, r, c, base, width, cursor, hover))
                    table._cell_render_cache.clear()
                    got_direct = table._direct_cell(r, c, table._row_locations.get_key(r) if r >= 0
                                                    else table._header_row_key, base, width, cursor, hover)
                    got = _segments(_direct(table, r, c, base, width, cursor, hover))
                    assert got == want, (r, c, table.ordered_columns[c].key, cursor, hover)
                    if got_direct is not None:
                        assert _segments(got_direct) == want, (r, c, cursor, hover)
                        drawn += 1
    return drawn


def _lines(table: FleetTable, fallback: bool, monkeypatch) -> list:
    with monkeypatch.context() as m:
        if fallback:
            m.setattr(FleetTable, "_cell_line", lambda self, *a: None)
        table._clear_caches()
        table._styles_cache.clear()
        table._update_count += 1
        return [[(s.text, s.style, s.control) for s in table.render_line(y)] for y in range(table.size.height)]


async def _check(pilot, monkeypatch, hover_row: int | None = None) -> None:
    table = pilot.app.screen.query_one(FleetTable)
    assert table.row_count >= 3
    table.move_cursor(row=1, animate=False)
    if hover_row is not None:
        table._show_hover_cursor = True
        table.hover_coordinate = Coordinate(hover_row, 2)
    await pilot.pause()
    table._pseudo_class_state = table.get_pseudo_class_state()
    drawn = _compare_cells(table)
    assert drawn >= (table.row_count + 1) * len(table.ordered_columns) * 12, drawn
    assert _lines(table, False, monkeypatch) == _lines(table, True, monkeypatch)


@pytest.mark.parametrize("theme", sorted(THEMES))
async def test_every_theme_draws_the_same_cells(monkeypatch, theme):
    app = make_app(MANY, theme=theme, no_color=theme == "kvwatch-mono")
    async with app.run_test(size=(200, 50)) as pilot:
        await prime(pilot, 4)
        await _check(pilot, monkeypatch, hover_row=3)


@pytest.mark.parametrize("size", [(80, 24), (120, 30), (250, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("ascii", [False, True], ids=["unicode", "ascii"])
async def test_every_width_and_ascii_mode_draws_the_same_cells(monkeypatch, size, ascii):
    app = make_app(MANY, ascii=ascii)
    async with app.run_test(size=size) as pilot:
        await prime(pilot, 6)
        table = app.screen.query_one(FleetTable)
        # a stale row: its name tagged "(stale ..)", its values dimmed
        app.monitor.source.profiles["llama-8b-7d9f-stale"] = "down"
        await prime(pilot, 2)
        assert any(c.style and "dim" in str(c.style) for row in table._cells.values() for c in row)
        await _check(pilot, monkeypatch, hover_row=None if ascii else 0)


async def test_cells_the_direct_path_must_not_draw_are_drawn_by_datatable(monkeypatch):
    app = make_app(MANY)
    async with app.run_test(size=(160, 30)) as pilot:
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        name = table._order[0]
        width = table.ordered_columns[2].get_render_width(table)
        odd = [
            Text(""), Text("x"), Text(" " * width), Text("ab", style=Style(italic=True)),
            Text("ab", style="not-a-style"), Text("ab", style=""), Text("ab", style=Style.null()),
            Text("ab" * width), Text("日本語", style="bold"), Text("e\u0301", style="red"),
            Text("ab", spans=[Span(0, 1, "red")]), Text("a\tb"), Text("a\nb"),
            Text("ab", justify="right"), Text("ab", justify="center"), Text("ab cd " * width, no_wrap=False),
            Text("ab", no_wrap=False), Text("ab", end=""), Text("ab", overflow="ellipsis"),
            "plain [b]markup[/b]", 3.14159, None,
        ]
        for value in odd:
            table._set_cell(name, table.ordered_columns[2].key, value)
            table._update_count += 1
            for cursor, hover in ((False, False), (True, True)):
                want = _segments(_reference(table, 0, 2, table.rich_style, width, cursor, hover))
                got = _segments(_direct(table, 0, 2, table.rich_style, width, cursor, hover))
                assert got == want, repr(value)


async def test_a_theme_switched_at_run_time_draws_the_same_cells(monkeypatch):
    """The direct path keeps the styles it combined; a theme change must not leave them behind."""
    app = make_app(MANY)
    async with app.run_test(size=(160, 30)) as pilot:
        await prime(pilot, 3)
        table = app.screen.query_one(FleetTable)
        _compare_cells(table)
        for _ in range(len(THEMES)):
            app.action_cycle_theme()
            await prime(pilot, 1)
            table._pseudo_class_state = table.get_pseudo_class_state()
            assert _compare_cells(table) > 0, app.theme

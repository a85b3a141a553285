"""The fleet table builds cells only for the rows on screen (issue 14: 1024 replicas at 1 Hz);
a row that scrolls into view later still shows the latest refresh."""

from __future__ import annotations

from dataclasses import replace

from textual.geometry import Region

from tests.ui.conftest import make_app, prime
from widgets.fleet_table import FleetTable
from widgets.format import num

BIG = {f"r-{i:04d}": "healthy" for i in range(1024)}


def _count_rows(table: FleetTable) -> list[str]:
    """Record every row the table builds (instance-level wrap of `_row`)."""
    built: list[str] = []
    real = table._row

    def counting(v):
        built.append(v.name)
        return real(v)

    table._row = counting
    return built


def _screen_lines(table: FleetTable) -> list[str]:
    """The table's lines as the compositor would draw them now."""
    w, h = table.size
    return ["".join(seg.text for seg in strip) for strip in table.render_lines(Region(0, 0, w, h))]


def _wait_on_screen(table: FleetTable, name: str) -> str:
    """The WAIT cell of `name`'s line as drawn (cells are fixed-width, no padding)."""
    line = next(ln for ln in _screen_lines(table) if ln.startswith(name + " "))
    x = 0
    for c in table._cols:
        if c.key == "waiting":
            return line[x:x + c.width].strip()
        x += c.width
    raise AssertionError("no WAIT column")


async def test_an_update_builds_only_the_rows_on_screen():
    app = make_app(BIG)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 2)
        table = app.screen.query_one(FleetTable)
        assert table.row_count == 1024
        built = _count_rows(table)
        await app.refresh_once()
        await pilot.pause()
        _screen_lines(table)  # a full repaint builds nothing more than what is visible
        assert built, "the update built no row at all"
        assert len(built) <= table.size.height + 2, (len(built), table.size.height)


async def test_offscreen_row_shows_the_latest_values_when_scrolled_into_view():
    profiles = dict(BIG)
    profiles["zz-capped"] = "capped"  # its queue grows by 4 every poll; sorted by name it is last
    app = make_app(profiles)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 2)
        await pilot.press("N")
        await pilot.pause()
        table = app.screen.query_one(FleetTable)
        assert table.cursor_row == 0
        before = num(table.views["zz-capped"].metrics.waiting)
        await app.refresh_once()
        await pilot.pause()
        after = num(table.views["zz-capped"].metrics.waiting)
        assert after != before
        wait = [c.key for c in table._cols].index("waiting")
        assert table.get_row_at(table.row_count - 1)[wait].plain.split() == [after]
        # Scrolled like a mouse wheel: the cursor stays on row 0.
        table.scroll_to(y=table.max_scroll_y, animate=False)
        await pilot.pause()
        assert _wait_on_screen(table, "zz-capped") == after
        # And with the keys: ctrl+end moves the cursor to the last row.
        table.scroll_to(y=0, animate=False)
        await app.refresh_once()
        await pilot.pause()
        latest = num(table.views["zz-capped"].metrics.waiting)
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.selected_name() == "zz-capped"
        assert latest != after and _wait_on_screen(table, "zz-capped") == latest


async def test_a_row_drawn_before_shows_its_change_when_it_scrolls_back():
    """The row was drawn, scrolled away, changed while offscreen (nothing on screen changed):
    scrolling back must not show DataTable's cached drawing of the old values."""
    app = make_app(BIG)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 2)
        table = app.screen.query_one(FleetTable)
        last = table._order[-1]
        table.scroll_to(y=table.max_scroll_y, animate=False)
        await pilot.pause()
        assert _wait_on_screen(table, last) != "99"
        table.scroll_to(y=0, animate=False)
        await pilot.pause()
        views = [table.views[name] for name in table._order]
        views[-1] = replace(views[-1], metrics=replace(views[-1].metrics, waiting=99))
        table.show(views)
        table.scroll_to(y=table.max_scroll_y, animate=False)
        await pilot.pause()
        assert _wait_on_screen(table, last) == "99"


async def test_a_reorder_builds_only_the_rows_on_screen_and_follows_the_selection():
    """A verdict change moves rows (severity sort): the same replicas in a new order are moved,
    not rebuilt, and the cursor stays on the selected replica, scrolled into view."""
    app = make_app(BIG)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 2)
        table = app.screen.query_one(FleetTable)
        table.move_cursor(row=5)
        await pilot.pause()
        picked = table.selected_name()
        views = [table.views[name] for name in table._order]
        views = views[6:] + views[:6]  # the picked replica moves to the end
        built = _count_rows(table)
        table.show(views)
        await pilot.pause()
        lines = _screen_lines(table)
        assert len(built) <= table.size.height + 2, len(built)
        assert [table.get_row_at(r)[0].plain.strip() for r in range(table.row_count)] == [v.name for v in views]
        assert table.selected_name() == picked and table.cursor_row == 1024 - 1
        assert any(ln.startswith(picked + " ") for ln in lines)  # scrolled to the selection


async def test_the_render_caches_hold_a_few_screens_not_thousands_of_old_cells():
    # Textual's DataTable keys its render caches by an update counter that every refresh
    # moves: entries from earlier refreshes are never read again, so caches sized for
    # thousands of cells only hold garbage (~14 MiB at 256 replicas, measured in the TUI).
    app = make_app(BIG)
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 12)
        table = app.screen.query_one(FleetTable)
        cells_on_screen = table.size.height * len(table._cols)
        assert len(table._cell_render_cache) <= 4 * cells_on_screen, (len(table._cell_render_cache), cells_on_screen)
        for cache in (table._row_render_cache, table._line_cache, table._row_renderable_cache):
            assert len(cache) <= 4 * table.size.height, (cache, table.size.height)
        assert "r-0000" in "".join(_screen_lines(table))  # still drawn


async def test_a_refresh_frees_the_cyclic_garbage_of_the_frames_before():
    # Textual's strips and their caches form reference cycles that only a full collection
    # frees (many are old by the time they are dropped), and the command collects rarely
    # (core/perf.py, for CPU): that garbage grew for the whole session (~7 MiB at 256 replicas
    # after minutes, measured). The app runs a full collection every GC_EVERY refreshes.
    import gc

    from tui.app import GC_EVERY

    gc.disable()  # no automatic collection: only the app's own
    try:
        app = make_app()
        async with app.run_test(size=(120, 30)) as pilot:
            await prime(pilot, 3)
            gc.collect()
            per_frame = []
            for _ in range(5):
                await prime(pilot, 1)
                per_frame.append(gc.collect())
            one_frame = max(per_frame)
            await prime(pilot, 90)  # three times GC_EVERY (30)
            assert 0 < gc.collect() <= (GC_EVERY + 2) * one_frame, (per_frame,)
    finally:
        gc.enable()

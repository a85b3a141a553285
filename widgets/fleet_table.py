"""The fleet table: one row per replica, columns collapsing by priority to fit the width.

Rows are keyed by replica name. A refresh with the same row order only rewrites the cells that
changed (update_cell), so a steady screen sends almost nothing to the terminal. It also builds
cells only for the rows on screen: the others are marked stale and rebuilt from their latest view
when they are drawn or read (1024 replicas, ~45 rows visible: issue 14).
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual._two_way_dict import TwoWayDict
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from tui.core import engines
from tui.core.model import STALE, ReplicaMetrics, ReplicaView
from tui.core.textsafe import clean
from tui.core.verdicts import DOWN, KV_PRESSURE

from .format import ASCII_MAP, num, pct, rate, secs
from .sparkline import auto_top, spark
from .verdict import colour_var, label

SPARK_W = 12


class Row(tuple):
    """A row's cells (Texts), with the (text, style) of each that they were made of."""

    parts: tuple[tuple[str, str], ...]

    @classmethod
    def made(cls, parts: tuple[tuple[str, str], ...], old: Row | None = None) -> Row:
        """Texts of `parts`; where `old` was made of the same part, its Text is kept."""
        if old is None:
            row = cls(Text(text, style=style, no_wrap=True) for text, style in parts)
        else:
            row = cls(cell if was == part else Text(part[0], style=part[1], no_wrap=True)
                      for cell, was, part in zip(old, old.parts, parts, strict=True))
        row.parts = parts
        return row



def _one_line(cell: object, width: int) -> tuple[str, str | Style] | None:
    """The (text, style) of a cell drawn as one segment (the fleet table's direct paths), or None for one
    Rich would draw otherwise: not a Text as DataTable hands it on (str markup, numbers, None),
    spans, wrap, justify, newlines, tabs, no text, wider than `width`, characters not one cell wide."""
    if type(cell) is not Text or cell._spans or cell.no_wrap is False or cell.justify not in (None, "default"):
        return None
    plain = cell.plain
    n = len(plain)
    if not n or n > width or "\n" in plain or "\t" in plain or (not plain.isascii() and cell_len(plain) != n):
        return None
    return plain, cell.style

@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    priority: int  # 0 = never dropped; larger = dropped first when narrow


# Columns about the pod behind a replica (k9s habits); shown only where pods exist, like RESTART.
POD_COLUMNS: tuple[Column, ...] = (
    Column("age", "AGE", 7, 2),
    Column("node", "NODE", 16, 1),  # kept before sparklines: which node is what a fault needs
)
POD_KEYS = frozenset({"restarts"} | {c.key for c in POD_COLUMNS})

# sort name -> (column key, the natural direction's arrow); a second press reverses it
SORT_COLUMNS = {"severity": "verdict", "kv": "kv", "queue": "waiting", "name": "name", "group": "group"}
_ARROWS = {"severity": "↓", "kv": "↓", "queue": "↓", "name": "↑", "group": "↑"}


def sort_arrow(sort: str, reverse: bool, ascii: bool = False) -> str:
    arrow = _ARROWS.get(sort, "↓")
    if reverse:
        arrow = "↑" if arrow == "↓" else "↓"
    return {"↑": "^", "↓": "v"}[arrow] if ascii else arrow


def age_text(seconds: float | None) -> str:
    """k9s-style age: 45s, 1m40s, 3h0m, 2d4h."""
    if seconds is None or seconds < 0:
        return "–"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


COLUMNS: tuple[Column, ...] = (
    Column("name", "REPLICA", 22, 0),
    Column("verdict", "VERDICT", 14, 0),
    Column("kv", "KV", 9, 0),
    Column("waiting", "WAIT", 5, 0),
    Column("running", "RUN", 5, 0),
    Column("preempt", "PRE/s", 6, 0),
    Column("mem", "MEM%", 5, 0),
    Column("util", "GPU%", 5, 0),
    Column("ttft", "TTFT95", 7, 0),
    Column("restarts", "RESTART", 9, 1),
    *POD_COLUMNS,
    Column("s_kv", "KV usage", SPARK_W, 1),
    Column("s_queue", "queue", SPARK_W, 2),
    Column("s_preempt", "preempt/s", SPARK_W, 2),
    Column("s_mem", "GPU mem", SPARK_W, 3),
    Column("s_gpu", "GPU util", SPARK_W, 3),
    Column("engine", "ENGINE", 8, 5),  # vLLM V1 / vLLM V0 / SGLang: a mixed fleet's rows differ
    Column("group", "GROUP", 14, 4),
    Column("reason", "REASON", 18, 3),  # why a row is down or stale; only while one is
)


def fit_columns(width: int, skip: frozenset[str] = frozenset()) -> list[Column]:
    """Columns for a terminal `width`: drop the highest priority numbers first, keep order."""
    cols = [c for c in COLUMNS if c.key not in skip]
    name_col = cols[0]
    for prio in sorted({c.priority for c in COLUMNS}, reverse=True):
        if sum(c.width for c in cols) <= width or prio == 0:
            break
        cols = [c for c in cols if c.priority != prio]
    total = sum(c.width for c in cols)
    if total > width:  # still too wide (very narrow terminal): shrink the name column
        shrink = min(total - width, name_col.width - 8)
        cols[0] = Column(name_col.key, name_col.title, name_col.width - shrink, 0)
    elif total < width:
        # Give spare width to names (long pod names are the norm).
        cols[0] = Column(name_col.key, name_col.title, min(40, name_col.width + (width - total) // 2), 0)
    return cols


_REASONS = (("refused", "conn refused"), ("timed out", "timeout"), ("timeout", "timeout"),
            ("name or service", "DNS"), ("reset", "conn reset"), ("unreachable", "unreachable"))


def short_reason(v: ReplicaView) -> str:
    """Why a row is down or stale, in a few words ("" for a replica read fine)."""
    if v.state != STALE and v.verdict != DOWN:
        return ""
    err = clean(v.error or "")
    # an HTTP answer first: its body's words ("HTTP 500: engine dead: CUDA error", cut by the
    # cell) may mention a reset or a timeout the transport never had
    http = re.match(r"HTTP (\d{3})(?: \([^)]*\))?(: .*)?$", err)
    word: str | None
    if http:
        word = f"HTTP {http.group(1)}{http.group(2) or ''}"
    else:
        low = err.lower()
        word = next((short for hit, short in _REASONS if hit in low), None)
        if word is None:
            http = re.search(r"\bHTTP (\d{3})\b", err)
            word = f"HTTP {http.group(1)}" if http else (err[:17] or "no data")
    return ("stale: " if v.state == STALE else "") + word


def restarts_cell(v: ReplicaView) -> tuple[str, bool]:
    """Restarts and the last termination reason ("2 OOM", "1 137"); hot when OOM-killed."""
    pod = v.pod
    if pod is None:
        return "–", False
    reason = pod.last_termination_reason or ""
    oom = reason == "OOMKilled" or pod.last_exit_code == 137
    tag = "OOM" if reason == "OOMKilled" else (str(pod.last_exit_code) if pod.last_exit_code else clean(reason)[:4])
    return (f"{pod.restarts} {tag}".strip() if pod.restarts else "0"), oom


def _tagged(name: str, tag: str, width: int) -> str:
    """`name` + `tag` in `width`: the name gives way, never the tag. A cut name keeps its end:
    pods of one workload differ only in their last characters (`...-7d9f-abcde`)."""
    if len(name) + len(tag) <= width:
        return name + tag
    keep = max(1, width - len(tag) - 1)
    tail = min(len(name) - 1, max(keep // 2, min(keep - 1, 6)))  # the pod hash's 5 and more
    head = keep - tail
    return name[:head] + "…" + name[len(name) - tail:] + tag


def kv_bar(v: float | None, width: int) -> str:
    if v is None:
        return "–".rjust(width)
    label_ = f"{v * 100:3.0f}%"
    bar_w = max(0, width - len(label_) - 1)
    filled = round(max(0.0, min(1.0, v)) * bar_w)
    return "█" * filled + "░" * (bar_w - filled) + " " + label_


class FleetTable(DataTable):
    """DataTable of ReplicaViews. `palette` maps theme variable names to colours."""

    DEFAULT_CSS = """
    FleetTable { height: 1fr; }
    """

    def __init__(self, palette: Callable[[], Mapping[str, str]], thresholds=None, **kw) -> None:
        # The cursor's background must win over a pressured row's own: otherwise the selected
        # row shows cursor-coloured text on the row colour, unreadable.
        super().__init__(cursor_type="row", zebra_stripes=False, cell_padding=0,
                         cursor_background_priority="css", **kw)
        self._palette = palette
        self._thresholds = thresholds
        self._cols: list[Column] = []
        self._drawn_sort: tuple[str, bool] | None = None
        self._order: list[str] = []
        self._cells: dict[str, Row] = {}  # what each row's cells were built as, and from
        self._stale: set[str] = set()  # rows whose cells predate self.views
        self.views: dict[str, ReplicaView] = {}
        self.ascii = False
        self._row_styles: dict[Style, Style] = {}
        self._cell_styles: dict[tuple, tuple[Style, Style]] = {}  # _direct_cell's, per cell and style
        self._extend_styles: dict[tuple, Style] = {}  # the blank past the last column, per row state
        self._line_ctx: tuple | None = None  # _cell_context() while render_line draws a line
        self._line_memo: tuple | None = None  # _line_setup() while render_lines paints
        self._line_styles: dict[tuple, tuple[Style, Style]] = {}  # _direct_line's, per row and cell style
        self._joins: dict[tuple, Style] = {}  # _merge_runs': the style a blank takes after another
        self.now: float | None = None  # the state's clock (simulated in the demo): AGE counts to it
        self.has_pods = False  # pod columns stay while a filter hides every row
        self.sort_by: tuple[str, bool] = ("severity", False)  # (sort, reversed): the header's arrow

    # -- layout -----------------------------------------------------------------
    def _ensure_columns(self, views: list[ReplicaView] | None = None) -> bool:
        views = list(self.views.values()) if views is None else views
        # Restarts, age, node only mean something where pods exist (Kubernetes, the demo's cluster).
        self.has_pods = self.has_pods or any(v.pod is not None for v in views)
        skip = frozenset() if self.has_pods else POD_KEYS
        if not any(short_reason(v) for v in views):
            skip |= {"reason"}
        width = self.size.width or 120
        if len(views) + 1 > self.size.height:  # rows below the fold: keep the last column off the scrollbar
            width -= self.styles.scrollbar_size_vertical
        cols = fit_columns(max(40, width), skip)
        if [c.key for c in cols] == [c.key for c in self._cols] and cols[0].width == (
            self._cols[0].width if self._cols else -1
        ) and self.sort_by == self._drawn_sort:
            return False
        self._cols, self._drawn_sort = cols, self.sort_by
        self.clear(columns=True)
        sorted_key = SORT_COLUMNS.get(self.sort_by[0])
        for c in cols:
            title = c.title
            if c.key == sorted_key:  # the arrow must show in a narrow column (WAIT is 5 wide)
                title += (" " if len(title) + 2 <= c.width else "") + sort_arrow(*self.sort_by, ascii=self.ascii)
            self.add_column(Text(title, style="bold"), width=c.width, key=c.key)
        self._order, self._cells, self._stale = [], {}, set()
        self._size_render_caches()
        return True

    def _size_render_caches(self) -> None:
        """DataTable keys its render caches by an update counter that every refresh moves, so
        an entry is never read after the next refresh: hold two screens' worth, not the 10,000
        cells and 1,000 lines Textual sizes them for (~14 MiB of old cells at 256 replicas)."""
        rows = 2 * max(self.size.height, 24) + 8
        sizes = ((self._cell_render_cache, rows * max(len(self._cols), 1)), (self._row_render_cache, rows),
                 (self._line_cache, rows), (self._row_renderable_cache, rows))
        for cache, n in sizes:
            if cache.maxsize != n:
                cache.clear()  # (a shrunk LRUCache only evicts one entry per insert)
                cache.maxsize = n

    def on_resize(self) -> None:
        if self.views and self._ensure_columns():
            self.show(list(self.views.values()))
        else:
            self._size_render_caches()  # the height alone changed

    # -- data -------------------------------------------------------------------
    def selected_name(self) -> str | None:
        if not self._order or self.cursor_row is None or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    def show(self, views: list[ReplicaView]) -> None:
        self._ensure_columns(views)
        self.views = {v.name: v for v in views}
        order = [v.name for v in views]
        if order == self._order:
            # Rows on screen now, the rest when they scroll into view (render_lines, get_row).
            self._stale = set(order)
            changed = [idx for idx in self._rows_between(0, self.size.height) if self._freshen(order[idx])]
            if changed:
                self._update_count += 1  # DataTable's render caches key on this
                for idx in changed:
                    self.refresh_row(idx)
            return
        keep = self.selected_name()
        if len(order) == len(self._order) and set(order) == set(self._order):
            self._reorder(order, keep)
            return
        rows = {v.name: self._row(v) for v in views}
        with self.app.batch_update():
            self.clear(columns=False)
            for name in order:
                self.add_row(*rows[name], key=name)
        self._order, self._cells, self._stale = order, rows, set()
        if keep in order:
            self.move_cursor(row=order.index(keep), animate=False)

    def _reorder(self, order: list[str], keep: str | None) -> None:
        """The same replicas in a new order (a verdict changed): move the rows, as DataTable.sort
        does, instead of clearing and adding them all; they are rebuilt as they are drawn. Cursor
        and scroll end as a rebuild leaves them: on the kept replica, scrolled from the top."""
        self._row_locations = TwoWayDict({RowKey(name): i for i, name in enumerate(order)})
        self._order, self._stale = order, set(order)
        self._clear_caches()
        self._update_count += 1
        self.hover_coordinate = Coordinate(0, 0)
        self.scroll_x = self.scroll_y = self.scroll_target_x = self.scroll_target_y = 0
        self.refresh()
        self.move_cursor(row=order.index(keep) if keep in order else 0, animate=False)

    def _row_at_line0(self) -> int:
        """The index of the row that would be drawn on widget line 0 (row i is on line i - this)."""
        return self.scroll_offset.y - (self.header_height if self.show_header else 0)

    def _rows_between(self, y0: int, y1: int) -> range:
        """Indices of the rows drawn on widget lines y0..y1-1 (rows are one line high)."""
        header = self.header_height if self.show_header else 0
        top = self._row_at_line0()
        return range(top + max(y0, header), min(len(self._order), top + max(y1, header)))

    def _freshen(self, name: str) -> bool:
        """Rebuild a row's cells from its latest view; True when a cell changed."""
        self._stale.discard(name)
        old, new = self._cells.get(name), self._row(self.views[name])
        hit = False
        if new is not old:  # (the very tuple: no cell changed)
            for i, (c, cell) in enumerate(zip(self._cols, new, strict=True)):
                if old is not None and old[i] is cell:  # built from the same (text, style): kept
                    continue
                # Text equality ignores the base style, so compare it explicitly.
                if old is None or old[i] != cell or old[i].style != cell.style:
                    self._set_cell(name, c.key, cell)
                    hit = True
        self._cells[name] = new
        return hit

    def _freshen_lines(self, y0: int, y1: int) -> None:
        """Bring stale rows about to be drawn up to date. A row may have been drawn before it
        went stale (then scrolled away and back), so a change must miss the render caches:
        DataTable's (keyed on _update_count) and the widget's painted lines (StylesCache),
        which would otherwise hand back the row as it was last painted."""
        order, stale, hit = self._order, self._stale, False
        top = self._row_at_line0()
        for i in self._rows_between(y0, y1):
            if order[i] in stale and self._freshen(order[i]):
                hit = True
                self._styles_cache.set_dirty(Region(0, i - top, self.size.width, 1))
        if hit:
            self._update_count += 1

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._stale:
            self._freshen_lines(crop.y, crop.bottom)
        self._pseudo_class_state = self.get_pseudo_class_state()  # as DataTable.render_lines sets it
        self._line_memo = self._line_setup()  # one paint: columns, widths, base style
        try:
            return super().render_lines(crop)
        finally:
            self._line_memo = None

    def _freshen_key(self, row_key: RowKey | str) -> None:
        name = row_key.value if isinstance(row_key, RowKey) else row_key
        if name in self._stale and self._freshen(name):
            self._update_count += 1
            # read (not drawn) fresh: the line painted from the old cells must go too
            self.refresh_row(self._order.index(name))

    # DataTable reads cells for drawing through get_row; callers (and tests) see current values.
    def get_row(self, row_key: RowKey | str) -> list[Text]:
        self._freshen_key(row_key)
        return super().get_row(row_key)

    def get_cell(self, row_key: RowKey | str, column_key: ColumnKey | str) -> Text:
        self._freshen_key(row_key)
        return super().get_cell(row_key, column_key)

    def render_line(self, y: int) -> Strip:
        # One SGR run per style instead of one per cell: DataTable tags every cell with its own
        # {row, column} meta, which keeps equal-looking neighbours apart and costs a colour
        # sequence and a reset per cell on every changed row. Rows only need their row index
        # (row cursor), so data cells share column 0 and same-style neighbours merge.
        # Blank cells take their neighbour's foreground (invisible on spaces) to join its run.
        if self._stale:
            self._freshen_lines(y, y + 1)
        direct = self._direct_line(y)
        if direct is not None:
            return direct
        self._line_ctx = self._cell_context()
        try:
            strip = super().render_line(y)
        finally:
            self._line_ctx = None
        return Strip(self._merged(strip), strip.cell_length)

    def _merged(self, segments: Iterable[Segment]) -> list[Segment]:
        """A line's segments with data cells on column 0's meta and blanks joined to their
        neighbour's run (render_line)."""
        row_styles = self._row_styles
        return self._merge_runs(
            (text, (row_styles.get(style) or self._row_style(style)) if style is not None and style._meta else style,
             control) for text, style, control in segments)

    def _merge_runs(self, segments: Iterable[tuple[str, Style | None, object]]) -> list[Segment]:
        """Blank segments take their neighbour's style where that looks the same (same background
        and meta, no underline or reverse), then same-style neighbours are one segment: what
        Segment.simplify makes of the list rewritten blank by blank, in one pass."""
        out: list[Segment] = []
        joins = self._joins
        for text, style, control in segments:
            if out and style is not None:
                prev = out[-1].style
                if not text.strip() and prev is not None:
                    key = (prev, style)
                    joined = joins.get(key)
                    if joined is None:
                        joined = prev if (not style.underline and not style.reverse and prev.bgcolor == style.bgcolor
                                          and prev.meta == style.meta) else style
                        if len(joins) > 4096:
                            joins.clear()
                        joins[key] = joined
                    style = joined
                if prev == style and not control:
                    out[-1] = Segment(out[-1].text + text, prev)
                    continue
            elif out and style is None and out[-1].style is None and not control:
                out[-1] = Segment(out[-1].text + text, None)
                continue
            out.append(Segment(text, style, control))  # type: ignore[arg-type]
        return out

    def _direct_line(self, y: int) -> Strip | None:
        """Widget line `y` when it is a one-line data row whose every cell _cell_line draws and
        which fits the width unscrolled: the strip DataTable.render_line and _merged make of it,
        built without DataTable's per-line layers (its caches miss every refresh: they key on
        _update_count) and with the cells' styles already on column 0's meta, or None for the
        general path. tests/ui/test_fleet_line_render.py holds the two to the same segments."""
        memo = self._line_memo or self._line_setup()
        if memo is None or y < 1:
            return None
        ctx, base_style, columns, table_width, width, pseudo = memo
        scroll_x, scroll_y = self.scroll_offset
        if scroll_x:
            return None
        try:
            row_key, line_no = self._get_offsets(y + scroll_y)
        except LookupError:
            return None
        row_index = self._row_locations.get(row_key)
        row = self.rows.get(row_key)
        data = self._data.get(row_key)
        if line_no or row_index is None or row is None or row.height != 1 or data is None:
            return None
        row_style = self._get_row_style(row_index, base_style)
        cursor = self.cursor_coordinate.row == row_index
        hover = self.hover_coordinate.row == row_index
        styles = self._line_styles
        segments: list[tuple[str, Style | None, object]] = []
        for key, cell_width in columns:
            cell = data.get(key)
            one = _one_line(cell, cell_width)
            if one is None:
                return None
            plain, cell_style = one
            n = len(plain)
            skey = (row_style, row_index, cursor, hover, ctx, pseudo, cell_style)
            pair = styles.get(skey)
            if pair is None:
                pair = self._line_styles_for(row_index, row_style, cursor, hover, ctx, cell_style)
                if len(styles) > 16384:
                    styles.clear()
                styles[skey] = pair
            segments.append((plain, pair[0], None))
            if n < cell_width:
                segments.append((" " * (cell_width - n), pair[1], None))
        segments.append((" " * (width - table_width), self._extend_style(row_style, row_index, hover, cursor, ctx), None))
        return Strip(self._merge_runs(segments), width)

    def _line_setup(self) -> tuple | None:
        """What _direct_line reads for every line and which holds for a whole paint: None where
        no line can be drawn directly (a header not one line high, row labels, a cursor on
        cells, zebra stripes, a table wider than the widget: DataTable crops it)."""
        ctx = self._cell_context()
        if (ctx is None or not ctx[0] or not self.show_header or self.cursor_type != "row" or self.zebra_stripes
                or (self._labelled_row_exists and self.show_row_labels)):
            return None
        columns = [(column.key, column.get_render_width(self)) for column in self.ordered_columns]
        table_width = self._row_label_column_width + sum(w for _, w in columns)
        width = self.size.width
        if table_width > width:
            return None
        return ctx, self.rich_style, columns, table_width, width, self._pseudo_class_state

    def _line_styles_for(self, row_index: int, row_style: Style, cursor: bool, hover: bool, ctx: tuple,
                         cell_style: str | Style) -> tuple[Style, Style]:
        """A data cell's (text, pad) styles as _merged leaves them: column 0's, whichever the
        cell's column (_row_style gives every data cell of a row column 0's meta)."""
        text, pad = self._cell_styles_for(False, row_index, 0, row_style, cursor, hover, ctx, cell_style)
        return text, pad

    def _extend_style(self, row_style: Style, row_index: int, hover: bool, cursor: bool, ctx: tuple) -> Style:
        """The style of the blank past the last column, as DataTable draws it."""
        extend_key = (row_style, row_index, hover, cursor, ctx)
        extend_style = self._extend_styles.get(extend_key)
        if extend_style is None:
            extend, _ = self._get_styles_to_render_cell(False, False, False, hover, cursor, ctx[1],
                                                        ctx[2], False, False)
            extend_style = row_style + extend + Style.from_meta(
                {"row": row_index, "column": 0, "out_of_bounds": True})
            if len(self._extend_styles) > 4096:
                self._extend_styles.clear()
            self._extend_styles[extend_key] = extend_style
        return extend_style

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> list[list[Segment]]:
        # Every refresh moves _update_count, so DataTable re-renders each visible cell each
        # second through Rich (Styled(Padding(Text)) -> wrap, join, split_and_crop_lines), ~40 us
        # a cell. The cells this table builds (one-line Text, no spans, no wider than the column)
        # come out of that as one segment of style pre + cell + post and a blank pad: build
        # that directly, and leave anything else to DataTable (tests/ui/test_fleet_cell_render.py
        # holds the two paths to the same segments).
        cache = self._cell_render_cache
        row_key = self._row_locations.get_key(row_index) if row_index >= 0 else self._header_row_key
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        key = (row_key, column_key, base_style, cursor, hover, self._show_hover_cursor,
               self._update_count, self._pseudo_class_state)
        lines = cache.get(key)
        if lines is None:
            lines = self._direct_cell(row_index, column_index, row_key, base_style, width, cursor, hover)
            if lines is None:
                return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            cache[key] = lines
        return lines

    def _render_line_in_row(self, row_key: RowKey, line_no: int, base_style: Style,
                            cursor_location: Coordinate, hover_location: Coordinate):
        # DataTable's loop, less its per-cell Coordinates, highlight tests and cache keys: a
        # one-line data row under a row cursor, every cell drawn by _cell_line, else theirs.
        ctx = self._line_ctx or self._cell_context()
        found = self._row_locations.get(row_key)
        row_index = -1 if found is None else found
        if (ctx is None or line_no or row_index < 0 or self.cursor_type != "row" or self.zebra_stripes
                or (self._labelled_row_exists and self.show_row_labels)):
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        cache_key = (row_key, line_no, base_style, cursor_location, hover_location, self.cursor_type, self.show_cursor,
                     self._show_hover_cursor, self._update_count, self._pseudo_class_state)
        hit = self._row_render_cache.get(cache_key)
        if hit is not None:
            return hit
        row_style = self._get_row_style(row_index, base_style)
        cursor, hover = cursor_location.row == row_index, hover_location.row == row_index
        row = self.rows.get(row_key)
        if row is None or row.height != 1:
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        cells = self._get_row_renderables(row_index).cells
        scrollable_row: list[list[Segment]] = []
        table_width = self._row_label_column_width
        for column_index, column in enumerate(self.ordered_columns):
            width = column.get_render_width(self)
            table_width += width
            line = self._cell_line(cells[column_index] if column_index < len(cells) else None, False,
                                   row_index, column_index, row_style, width, cursor, hover, ctx)
            if line is None:
                return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
            scrollable_row.append(line)
        extend_style = self._extend_style(row_style, row_index, hover, cursor, ctx)
        scrollable_row.append([Segment(" " * max(0, self.size.width - table_width), extend_style)])
        pair: tuple[list, list] = ([], scrollable_row)
        self._row_render_cache[cache_key] = pair
        return pair

    def _direct_cell(self, row_index: int, column_index: int, row_key: RowKey | None, base_style: Style,
                     width: int, cursor: bool, hover: bool) -> list[list[Segment]] | None:
        """The cell's lines as DataTable._render_cell draws them, or None where this path does
        not apply (rows above one line, row labels, fixed cells, padding, text it would change)."""
        ctx = self._line_ctx or self._cell_context()
        if ctx is None or column_index < 0 or width < 1:
            return None
        header = row_index == -1
        if header:
            if not ctx[0]:
                return None
        else:
            row = self.rows.get(row_key) if row_key is not None else None
            if row is None or row.height != 1:
                return None
        cells = self._get_row_renderables(row_index).cells
        line = self._cell_line(cells[column_index] if column_index < len(cells) else None, header,
                               row_index, column_index, base_style, width, cursor, hover, ctx)
        return None if line is None else [line]

    def _cell_line(self, cell: object, header: bool, row_index: int, column_index: int, base_style: Style,
                   width: int, cursor: bool, hover: bool, ctx: tuple) -> list[Segment] | None:
        """A one-line cell's segments, or None for a cell Rich would draw otherwise (_one_line)."""
        one = _one_line(cell, width)
        if one is None:
            return None
        plain, cell_style = one
        n = len(plain)
        key = (base_style, row_index, column_index, cursor, hover, ctx, self._pseudo_class_state, cell_style)
        styles = self._cell_styles.get(key)
        if styles is None:
            styles = self._cell_styles_for(header, row_index, column_index, base_style, cursor, hover, ctx, cell_style)
            if len(self._cell_styles) > 16384:
                self._cell_styles.clear()
            self._cell_styles[key] = styles
        if n < width:
            return [Segment(plain, styles[0]), Segment(" " * (width - n), styles[1])]
        return [Segment(plain, styles[0])]

    def _cell_context(self) -> tuple | None:
        """What DataTable reads for every cell and which holds for a whole line: None where the
        direct path does not apply to any cell of it."""
        if self.cell_padding or self.fixed_rows or self.fixed_columns or (
                self.app.console_options.justify not in (None, "default")):
            return None
        return (self.header_height == 1, self.show_cursor, self._show_hover_cursor,
                self.cursor_foreground_priority == "css", self.cursor_background_priority == "css")

    def _cell_styles_for(self, header: bool, row_index: int, column_index: int, base_style: Style,
                         cursor: bool, hover: bool, ctx: tuple, cell_style: str | Style) -> tuple[Style, Style]:
        """(the text's style, the pad's style), combined as Styled(Padding(Text)) combines them:
        pre + the text's own + post, and pre + post on the blank Padding adds."""
        _, show_cursor, show_hover, fg_css, bg_css = ctx
        component, post = self._get_styles_to_render_cell(
            header, False, False, hover, cursor, show_cursor, show_hover, fg_css, bg_css)
        pre = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component
        style = self.app.console.get_style(cell_style, default=Style.null()) if cell_style else None
        return (pre + style) + post, pre + post

    def notify_style_update(self) -> None:
        self._cell_styles.clear()  # a theme or CSS change: DataTable drops its style caches too
        self._extend_styles.clear()
        self._line_styles.clear()
        super().notify_style_update()

    def _row_style(self, style: Style) -> Style:
        meta = style.meta
        if meta.get("row", -1) >= 0 and meta.get("column", 0) > 0:
            new = style.clear_meta_and_links() + Style.from_meta({**meta, "column": 0})
        else:
            new = style
        if len(self._row_styles) > 4096:
            self._row_styles.clear()
        self._row_styles[style] = new
        return new

    def _set_cell(self, row: str, col: str, value: Text) -> None:
        """update_cell without its refresh(): that repaints the whole widget, every blank line
        below the rows included, which is most of the bytes a steady screen sends. The caller
        refreshes only the rows that changed (textual is pinned, so this private use is safe)."""
        self._data[RowKey(row)][ColumnKey(col)] = value

    def _row(self, v: ReplicaView) -> Row:
        """The row's cells for view `v`. A cell made of the same (text, style) as the row's cells
        last built is that very Text, and a row whose every cell is, that very Row: a refresh
        makes again only the Texts that changed (tests/ui/test_fleet_row_parts.py holds this
        to rows built afresh)."""
        parts = self._row_parts(v)
        old = self._cells.get(v.name)
        if old is None or len(old.parts) != len(parts):
            return Row.made(parts)
        if old.parts == parts:
            return old
        return Row.made(parts, old)

    def _row_parts(self, v: ReplicaView) -> tuple[tuple[str, str], ...]:
        """Each cell of the row for view `v` as (text, style): what its Text is made of."""
        pal = self._palette()
        # a down replica's last values are history (the detail screen has them): not shown as live
        m = ReplicaMetrics() if v.state == DOWN else v.metrics
        verdict_col = pal.get(colour_var(v.verdict), "white")
        pressured = v.verdict == KV_PRESSURE
        row_bg = pal.get("pressure-row-bg") if pressured else None
        crossed = pal.get("cell-crossed", "red")
        t = self._thresholds
        kv_hi = t.kv_high if t else 0.9
        base = f"on {row_bg}" if row_bg else ""
        dim = v.state != "ok"

        out = []
        w = 0

        def cell(text: str, hot: bool = False, style: str = "", right: bool = True) -> tuple[str, str]:
            # cell_padding is 0, so each cell carries its own one-space gap to stay aligned.
            st = f"bold {crossed}" if hot else style
            if dim and not hot:
                st = f"{st} dim".strip()
            if len(text) > w:
                text = text[: w - 1] + "…"
            if self.ascii:
                text = text.translate(ASCII_MAP)
            if right:
                body = " " + text.rjust(w)
            else:  # the first column pads after itself, later ones before
                body = text.ljust(w) + " " if k == "name" else " " + text.ljust(w)
            return body, f"{st} {base}".strip()

        for c in self._cols:
            k, w = c.key, c.width - 1
            if k == "name":
                out.append(cell(_tagged(clean(v.name), self._stale_tag(v), w), right=False))  # Text() is literal
            elif k == "verdict":
                out.append(cell(label(v.verdict, ascii=self.ascii), style=f"bold {verdict_col}", right=False))
            elif k == "kv":
                out.append(cell(kv_bar(m.kv_usage, w), hot=(m.kv_usage or 0) >= kv_hi))
            elif k == "waiting":
                out.append(cell(num(m.waiting), hot=pressured and (m.waiting or 0) > 0))
            elif k == "running":
                out.append(cell(num(m.running)))
            elif k == "preempt":
                out.append(cell(rate(m.preemptions_per_s), hot=(m.preemptions_per_s or 0) > (t.preempt_rate if t else 0)))
            elif k == "mem":
                out.append(cell(pct(m.gpu_memory_pct)))
            elif k == "util":
                low = pressured and m.gpu_util_pct is not None and m.gpu_util_pct < (t.gpu_util_low_pct if t else 60)
                out.append(cell(pct(m.gpu_util_pct), hot=low))
            elif k == "ttft":
                out.append(cell(secs(m.ttft_p95_s)))
            elif k == "restarts":
                out.append(cell(*restarts_cell(v)))
            elif k.startswith("s_"):
                out.append(self._spark_cell(v, k, w, pal, base))
            elif k == "engine":
                out.append(cell(engines.display(v.engine, v.generation), right=False))
            elif k == "group":
                out.append(cell(clean(v.group or ""), right=False))
            elif k == "node":
                out.append(cell(clean(v.pod.node or "–") if v.pod else "–", right=False))
            elif k == "reason":
                out.append(cell(short_reason(v), hot=True, right=False))
            elif k == "age":
                start = v.pod.started_at if v.pod else None
                out.append(cell(age_text(self.now - start if start is not None and self.now else None)))
            else:
                out.append(cell(""))
        return tuple(out)

    def _stale_tag(self, v: ReplicaView) -> str:
        """" (stale 8s)": the row's values are its last good scrape's, this old."""
        if v.state != STALE:
            return ""
        age = self.now - v.last_ok_ts if self.now is not None and v.last_ok_ts is not None else None
        return f" (stale {age_text(age)})" if age is not None else " (stale)"

    def _spark_cell(self, v: ReplicaView, key: str, width: int, pal: Mapping[str, str], base: str) -> tuple[str, str]:
        s = v.series
        if key == "s_kv":
            vals, top, colour = s.get("kv_usage", ()), 1.0, pal.get("spark-kv")
        elif key == "s_queue":
            vals = s.get("waiting", ())
            top, colour = auto_top(vals, 4.0), pal.get("spark-queue")
        elif key == "s_preempt":
            vals = s.get("preemptions_per_s", ())
            top, colour = auto_top(vals, 1.0), pal.get("spark-preempt")
        elif key == "s_mem":
            vals, top, colour = s.get("gpu_memory_pct", ()), 100.0, pal.get("spark-mem")
        else:
            vals, top, colour = s.get("gpu_util_pct", ()), 100.0, pal.get("spark-gpu")
        text = spark(vals, width, top, ascii=self.ascii)
        return " " + text, f"{colour or ''} {base}".strip()

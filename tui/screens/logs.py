"""Logs of a replica's vLLM container, filtered for what signals trouble (diagnostics step 4:
preemption warnings, CUDA OOM, engine errors, tracebacks; never vLLM's periodic stats line),
followed live (`space` pauses and resumes), with `p` for the previous (restarted) container and
`f` to show every line. Long lines wrap under their own indent (`w` turns wrapping off). `/`
searches the text shown: matches are highlighted, `n` (or enter) and `N` jump between them.
`t` cycles the time range (all, last 5 / 1 min, since the replica's incident began: see
tui/core/log_range.py), asked of the cluster, never cut after a whole read."""

from __future__ import annotations

from typing import TYPE_CHECKING

import textwrap

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from tui.core.cluster.base import Cluster, ClusterError, LogLines
from tui.core import log_range
from tui.core.diagnosis.loglines import kind
from tui.core.textsafe import clean
from tui.keyhold import PromptInput
from widgets.footer import KvFooter

if TYPE_CHECKING:
    from tui.app import KvwatchApp

FOLLOW_EVERY_S = 2.0  # a live tail: re-read the log this often while following
_STYLE = {"oom": "bold red", "engine-error": "red", "traceback": "red", "preemption": "bold yellow"}
HANG = 4  # continuation lines of a wrapped line sit this much deeper than the line's own indent
MATCH, CURRENT = "black on yellow", "bold black on dark_orange"  # search hits; the one jumped to


def wrap_line(line: str, width: int | None) -> list[str]:
    """One log line cut to `width` columns, continuation lines under its own indent plus HANG."""
    if not width or width <= HANG + 8 or len(line) <= width:
        return [line]
    lead = line[:len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=lead + " " * HANG,
                         drop_whitespace=True, break_on_hyphens=False, replace_whitespace=False) or [line]


def find_all(text: str, query: str) -> list[tuple[int, int]]:
    """Every (start, end) of `query` in `text`, case-insensitive, plain text (not a regex)."""
    if not query:
        return []
    hay, q = text.lower(), query.lower()
    out, at = [], hay.find(q)
    while at >= 0:
        out.append((at, at + len(q)))
        at = hay.find(q, at + len(q))
    return out


def logs_text(logs: LogLines, width: int | None = None) -> Text:
    t = Text(no_wrap=width is None)
    in_tb = False
    for i, line in enumerate(logs.lines):
        safe = clean(line)
        k = kind(line)
        in_tb = k == "traceback" or (in_tb and line[:1] in (" ", "\t"))
        style = _STYLE.get(k or ("traceback" if in_tb else ""), "")
        t.append("\n".join(wrap_line(safe, width)), style=style)
        if i < len(logs.lines) - 1:
            t.append("\n")
    if not logs.lines:
        t.append("(no trouble lines: f shows every line)" if logs.filtered else "(empty log)", style="dim")
    return t


class LogsScreen(Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("logs")
    DEFAULT_CSS = """
    LogsScreen #logs-title { height: auto; padding: 0 1; background: $surface; text-style: bold; }
    LogsScreen #logs-body { height: 1fr; padding: 0 1; }
    LogsScreen #logs-text { height: auto; }
    LogsScreen.-nowrap #logs-body { overflow-x: auto; }
    LogsScreen.-nowrap #logs-text { width: auto; }
    LogsScreen #logs-search { dock: bottom; display: none; }
    """

    def __init__(self, cluster: Cluster, namespace: str, pod: str, *, container: str | None = None,
                 previous: bool = False, tail: int = 2000, replica: str | None = None) -> None:
        super().__init__()
        self.replica = replica  # the monitor's name for it: its incident bounds the range
        self.range = log_range.ALL
        self.cluster = cluster
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.previous = previous
        self.filtered = True
        self.following = True
        self.tail = tail
        self.logs: LogLines | None = None
        self.error: str | None = None
        self.wrap = True
        self.query_text = ""  # the `/` search
        self.matches: list[tuple[int, int]] = []  # offsets in the text shown
        self.current: int | None = None  # the match jumped to
        self._text = Text()  # the log as last shown (match offsets index it)

    def compose(self) -> ComposeResult:
        yield Static("", id="logs-title")
        with VerticalScroll(id="logs-body"):
            yield Static(Text("reading...", style="dim"), id="logs-text")
        yield PromptInput(placeholder="search the lines shown (n/enter next, N previous, esc clears)",
                          id="logs-search")
        yield KvFooter()

    def on_mount(self) -> None:
        self.action_reload()
        self.set_interval(FOLLOW_EVERY_S, self._follow)

    def _follow(self) -> None:
        if self.following and not self.previous:  # a previous container's log does not grow
            self._load(follow=True)

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        self._title()
        if self.following:
            self._load(follow=True)

    def action_toggle_previous(self) -> None:
        self.previous = not self.previous
        self.action_reload()

    def action_toggle_filter(self) -> None:
        self.filtered = not self.filtered
        self.action_reload()

    def action_reload(self) -> None:
        self._title()
        self._load()

    def action_cycle_range(self) -> None:
        self.range = log_range.next_range(self.range, self._incident() is not None)
        self.action_reload()

    def _incident(self) -> tuple[str, float] | None:
        if self.replica is None:
            return None
        state = self.app.monitor.state
        return log_range.incident(next((r for r in state.replicas if r.name == self.replica), None))

    def _since_s(self) -> float | None:
        inc = self._incident()
        return log_range.since_seconds(self.range, self.app.monitor.state.ts, inc[1] if inc else None,
                                       margin=self.app.interval)

    def on_resize(self) -> None:  # re-wrap at the new width
        self._show()

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self.set_class(not self.wrap, "-nowrap")
        self._show()
        self._title()

    # -- search -------------------------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#logs-search", Input)
        box.display = True
        if not box.has_focus:
            self.app.keyhold.hold()  # what is typed next belongs to the search (tui/keyhold.py)
        box.value = self.query_text
        box.focus()

    @on(Input.Changed, "#logs-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value
        self.current = None
        self._show()
        self._title()

    @on(Input.Submitted, "#logs-search")
    def _search_done(self) -> None:
        box = self.query_one("#logs-search", Input)
        box.display = bool(self.query_text)
        self.query_one("#logs-body", VerticalScroll).focus()
        self.action_next_match(1)

    def action_next_match(self, step: int) -> None:
        if not self.matches:
            return
        if self.current is None:  # the first match at or below the top of the view (k9s, less)
            top = self.query_one("#logs-body", VerticalScroll).scroll_y
            plain = self._shown().plain
            below = [i for i, (s, _) in enumerate(self.matches) if plain.count("\n", 0, s) >= top]
            self.current = (below[0] if below else 0) if step > 0 else (below[0] - 1 if below else -1)
        else:
            self.current += step
        self.current %= len(self.matches)
        self._show()
        self._title()
        line = self._shown().plain.count("\n", 0, self.matches[self.current][0])
        body = self.query_one("#logs-body", VerticalScroll)
        if not body.scroll_y <= line < body.scroll_y + body.size.height:
            body.scroll_to(y=max(0, line - body.size.height // 3), animate=False)

    def action_back(self) -> None:
        box = self.query_one("#logs-search", Input)
        if self.query_text or box.has_focus:  # esc clears a search before it leaves the screen
            self.query_text, box.value, box.display = "", "", False
            self.current = None
            self.query_one("#logs-body", VerticalScroll).focus()
            self._show()
            self._title()
            return
        self.app.pop_screen()

    def _shown(self) -> Text:
        return self._text

    def _show(self) -> None:
        """Render the log (wrapped or not) with the search's matches highlighted."""
        if self.logs is None or self.error:
            return
        t = logs_text(self.logs, self._width() if self.wrap else None)
        self.matches = find_all(t.plain, self.query_text) if self.logs.lines else []
        if self.current is not None and self.current >= len(self.matches):
            self.current = None
        for i, (start, end) in enumerate(self.matches):
            t.stylize(CURRENT if i == self.current else MATCH, start, end)
        self._text = t
        self.query_one("#logs-text", Static).update(t)

    def _width(self) -> int | None:
        w = self.query_one("#logs-body", VerticalScroll).size.width
        return w - 3 if w > 0 else None  # padding and the scroll bar

    def _title(self) -> None:
        what = "previous (restarted) container" if self.previous else "current container"
        filt = ("trouble: preemption, CUDA/OOM, engine errors, tracebacks (not the stats line)" if self.filtered
                else "all lines")
        t = Text(f"logs pod/{clean(self.pod)} -n {clean(self.namespace)}", style="bold")
        if self.logs is not None and self.logs.container:
            t.append(f" ({clean(self.logs.container)})")
        t.append(f"  ·  {what}  ·  {filt}", style="")
        if self.logs is not None:
            t.append(f"  ·  {len(self.logs.lines)} of {self.logs.total} lines")
        inc = self._incident()
        rng = self.range if self.range != log_range.INCIDENT or inc else log_range.ALL  # it ended
        t.append(f"  ·  {log_range.label(rng, inc)} (t)")
        if not self.wrap:
            t.append("  ·  wrap off (w)")
        if self.query_text:
            found = (f"{self.current + 1} of {len(self.matches)}" if self.current is not None and self.matches
                     else f"{len(self.matches)} matches" if self.matches else "no match")
            t.append(f"  ·  /{clean(self.query_text)}/ {found}", style="bold" if self.matches else "bold red")
        if not self.previous:
            t.append("  ·  following (space: pause)" if self.following else "  ·  PAUSED (space: follow)",
                     style="" if self.following else "bold reverse")
        self.query_one("#logs-title", Static).update(t)

    @work(exclusive=True, group="logs", exit_on_error=False)
    async def _load(self, follow: bool = False) -> None:
        body_scroll = self.query_one("#logs-body", VerticalScroll)
        at_end = body_scroll.scroll_y >= body_scroll.max_scroll_y - 1
        try:
            since = self._since_s()
            kw = {"since_s": since} if since is not None else {}  # all: the cluster's plain read
            logs = await self.cluster.logs(self.namespace, self.pod, self.container, previous=self.previous,
                                           tail=self.tail, filtered=self.filtered, **kw)
            error = None
        except ClusterError as e:
            logs, error = None, e.message
        except Exception as e:  # noqa: BLE001 - an odd log must not take the dashboard down
            logs, error = None, f"unexpected error: {type(e).__name__}: {e}"
        if follow and (not self.following or (logs is not None and logs == self.logs)):
            return  # paused meanwhile, or nothing new: leave the view (and the reader's scroll) alone
        self.logs, self.error = logs, error
        body = self.query_one("#logs-text", Static)
        if self.error or self.logs is None:
            body.update(Text(clean(self.error or "no logs read"), style="red"))
        else:
            self._show()
        self._title()
        if not follow or at_end:  # following keeps the tail in view unless the reader scrolled up
            body_scroll.scroll_end(animate=False)

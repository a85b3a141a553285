"""Logs of a replica's vLLM container, filtered for KV/memory lines (diagnostics step 4), with
`p` for the previous (restarted) container and `f` to show every line."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.core.cluster.base import LOG_FILTER, Cluster, ClusterError, LogLines
from tui.core.textsafe import clean
from widgets.footer import KvFooter


def logs_text(logs: LogLines) -> Text:
    t = Text()
    for i, line in enumerate(logs.lines):
        row = Text(clean(line))
        if logs.filtered:
            row.highlight_regex(LOG_FILTER, style="bold yellow")
        if "ERROR" in line or "Error" in line or "OutOfMemory" in line:
            row.stylize("red")
        t.append_text(row)
        if i < len(logs.lines) - 1:
            t.append("\n")
    if not logs.lines:
        t.append("(no matching lines)" if logs.filtered else "(empty log)", style="dim")
    return t


class LogsScreen(Screen):
    BINDINGS = bindings("logs")
    DEFAULT_CSS = """
    LogsScreen #logs-title { height: auto; padding: 0 1; background: $surface; text-style: bold; }
    LogsScreen #logs-body { height: 1fr; padding: 0 1; }
    LogsScreen #logs-text { height: auto; }
    """

    def __init__(self, cluster: Cluster, namespace: str, pod: str, *, container: str | None = None,
                 previous: bool = False, tail: int = 2000) -> None:
        super().__init__()
        self.cluster = cluster
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.previous = previous
        self.filtered = True
        self.tail = tail
        self.logs: LogLines | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="logs-title")
        with VerticalScroll(id="logs-body"):
            yield Static(Text("reading...", style="dim"), id="logs-text")
        yield KvFooter()

    def on_mount(self) -> None:
        self.action_reload()

    def action_toggle_previous(self) -> None:
        self.previous = not self.previous
        self.action_reload()

    def action_toggle_filter(self) -> None:
        self.filtered = not self.filtered
        self.action_reload()

    def action_reload(self) -> None:
        self._title()
        self._load()

    def _title(self) -> None:
        what = "previous (restarted) container" if self.previous else "current container"
        filt = "filtered: kv|cache|cuda|oom|alloc|out of memory|memory" if self.filtered else "all lines"
        t = Text(f"logs pod/{clean(self.pod)} -n {clean(self.namespace)}", style="bold")
        if self.logs is not None and self.logs.container:
            t.append(f" ({clean(self.logs.container)})")
        t.append(f"  ·  {what}  ·  {filt}", style="")
        if self.logs is not None:
            t.append(f"  ·  {len(self.logs.lines)} of {self.logs.total} lines")
        self.query_one("#logs-title", Static).update(t)

    @work(exclusive=True, group="logs", exit_on_error=False)
    async def _load(self) -> None:
        try:
            self.logs = await self.cluster.logs(self.namespace, self.pod, self.container, previous=self.previous,
                                                tail=self.tail, filtered=self.filtered)
            self.error = None
        except ClusterError as e:
            self.logs, self.error = None, e.message
        except Exception as e:  # noqa: BLE001 - an odd log must not take the dashboard down
            self.logs, self.error = None, f"unexpected error: {type(e).__name__}: {e}"
        body = self.query_one("#logs-text", Static)
        if self.error:
            body.update(Text(clean(self.error), style="red"))
        else:
            body.update(logs_text(self.logs))
        self._title()
        self.query_one("#logs-body", VerticalScroll).scroll_end(animate=False)

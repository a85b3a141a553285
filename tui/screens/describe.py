"""The read-only describe view (`y`): the selected replica's pod and its owner (Deployment,
StatefulSet) as YAML, as the API server returns them (managedFields left out), every line
escaped before the screen. Nothing here can change the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.actions import bindings
from tui.core.cluster.base import Cluster, ClusterError, Manifest
from tui.core.textsafe import clean
from widgets.footer import KvFooter

if TYPE_CHECKING:
    from tui.app import KvwatchApp


def manifests_text(manifests: list[Manifest]) -> Text:
    """Each manifest under a `# Kind/name` line, or why it could not be read; plain text (a
    value's brackets are never markup), control characters dropped."""
    t = Text()
    for i, m in enumerate(manifests):
        if i:
            t.append("\n")
        t.append(f"# {clean(m.kind)}/{clean(m.name)}\n", style="bold")
        if m.error is not None:
            t.append(f"could not read it: {clean(m.error)}\n", style="red")
            continue
        for line in m.text.splitlines():
            t.append(clean(line) + "\n")
    return t


class DescribeScreen(Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("describe")
    DEFAULT_CSS = """
    DescribeScreen #describe-title { height: auto; padding: 0 1; background: $surface; text-style: bold; }
    DescribeScreen #describe-body { height: 1fr; padding: 0 1; }
    DescribeScreen #describe-text { height: auto; }
    """

    def __init__(self, cluster: Cluster, namespace: str, pod: str) -> None:
        super().__init__()
        self.cluster = cluster
        self.namespace = namespace
        self.pod = pod
        self.manifests: list[Manifest] | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"describe pod/{clean(self.pod)} -n {clean(self.namespace)} and its owner  ·  read-only"),
                     id="describe-title")
        with VerticalScroll(id="describe-body"):
            yield Static(Text("reading...", style="dim"), id="describe-text")
        yield KvFooter()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self._load()

    @work(exclusive=True, group="describe", exit_on_error=False)
    async def _load(self) -> None:
        try:
            self.manifests, self.error = await self.cluster.describe(self.namespace, self.pod), None
        except ClusterError as e:
            self.manifests, self.error = None, e.message
        except Exception as e:  # noqa: BLE001 - an odd object must not take the dashboard down
            self.manifests, self.error = None, f"unexpected error: {type(e).__name__}: {e}"
        body = self.query_one("#describe-text", Static)
        if self.manifests is None:
            body.update(Text(clean(self.error or "nothing read"), style="red"))
        else:
            body.update(manifests_text(self.manifests))

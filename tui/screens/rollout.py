"""Rollout status of a Deployment (or StatefulSet), refreshed live: `kubectl rollout status` and
what it does not say (Pending pods waiting for GPUs, crash-looping new pods, model loading).

Reports done / progressing / stuck / failed clearly, with observedGeneration, the replica counts,
the conditions, the new and old ReplicaSets with their pods and args, and the elapsed time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.core.cluster.base import Cluster, ClusterError, ReplicaSetInfo, RolloutStatus
from tui.core.textsafe import clean
from widgets.footer import KvFooter
from widgets.format import ago

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from tui.app import KvwatchApp

STATE_STYLE = {"done": "bold green", "progressing": "bold cyan", "stuck": "bold yellow", "failed": "bold red",
               "unknown": "bold"}
STATE_LABEL = {"done": "DONE", "progressing": "PROGRESSING", "stuck": "STUCK", "failed": "FAILED", "unknown": "UNKNOWN"}


def _rs_text(t: Text, label: str, rs: ReplicaSetInfo) -> None:
    t.append(f"{label} ", style="bold")
    t.append(clean(rs.name or "-"))
    if rs.revision:
        t.append(f"  revision {rs.revision}")
    t.append(f"  {rs.ready}/{rs.replicas} ready, {rs.available} available\n")
    if rs.args_line:
        t.append("    args: ", style="dim")
        t.append(clean(rs.args_line) + "\n", style="dim")
    for p in rs.pods:
        mark = "✔" if p.ready else ("✗" if p.phase in ("CrashLoopBackOff", "Error", "Failed") else "…")
        style = "green" if p.ready else ("red" if mark == "✗" else "yellow")
        t.append(f"    {mark} ", style=style)
        t.append(clean(p.name))
        t.append(f"  {clean(p.phase)}{'  ready' if p.ready else ''}")
        if p.restarts:
            t.append(f"  restarts {p.restarts}", style="yellow")
        if p.node:
            t.append(f"  node {clean(p.node)}", style="dim")
        if p.reason:
            t.append(f"  {clean(p.reason)}", style="yellow" if not p.ready else "dim")
        t.append("\n")


def rollout_text(st: RolloutStatus, target: str, started_at: float | None = None) -> Text:
    """`started_at`: when kvwatch started this rollout (cluster clock), e.g. a scale of a
    ReplicaSet created long ago: the elapsed time counts from the later of the two."""
    t = Text()
    t.append(clean(target) + "  ", style="bold")
    t.append(f" {STATE_LABEL.get(st.state, st.state.upper())} ", style=f"reverse {STATE_STYLE.get(st.state, '')}")
    t.append("  " + clean(st.reason) + "\n")
    t.append(f"generation {st.generation}  observed {st.observed_generation}")
    if st.generation > st.observed_generation:
        t.append(" (not yet observed)", style="yellow")
    t.append(f"   desired {st.desired}  updated {st.updated}  ready {st.ready}  available {st.available}  "
             f"pods {st.current}")
    if st.elapsed_s is not None:
        elapsed = st.elapsed_s
        created = st.new_rs.created if st.new_rs is not None else None
        if started_at is not None and created is not None and started_at > created:
            elapsed = max(0.0, st.elapsed_s - (started_at - created))  # the rollout's own start
        t.append(f"   elapsed {ago(elapsed)}")
    t.append("\n")
    for c in st.conditions:
        ok = c.status == "True"
        bad = c.reason in ("ProgressDeadlineExceeded",) or (c.type == "ReplicaFailure" and ok)
        t.append(f"  {clean(c.type)}={clean(c.status)}", style="red" if bad else ("green" if ok else "yellow"))
        if c.reason:
            t.append(f" ({clean(c.reason)})")
        if c.message:
            t.append(f": {clean(c.message)}", style="dim")
        t.append("\n")
    t.append("\n")
    if st.new_rs is not None:
        _rs_text(t, "new", st.new_rs)
    for rs in st.old_rs:
        _rs_text(t, "old", rs)
    if st.new_rs is None and not st.old_rs:
        t.append("no ReplicaSets found\n", style="dim")
    t.rstrip()
    return t


class RolloutScreen(Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("rollout")
    DEFAULT_CSS = """
    RolloutScreen #rollout-body { height: 1fr; padding: 0 1; }
    RolloutScreen #rollout-text { height: auto; }
    """

    def __init__(self, cluster: Cluster, namespace: str, name: str, *, kind: str = "Deployment",
                 interval: float = 1.0, started_at: float | None = None) -> None:
        super().__init__()
        self.started_at = started_at  # when kvwatch started it (cluster clock); None: the new RS's age
        self.cluster = cluster
        self.namespace = namespace
        self.name_ = name
        self.kind = kind
        self.interval = interval
        self.status: RolloutStatus | None = None
        self.error: str | None = None
        self.polls = 0

    @property
    def target(self) -> str:
        return f"{self.kind.lower()}/{self.name_} -n {self.namespace}"

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="rollout-body"):
            yield Static(Text(f"rollout {self.target}: reading...", style="dim"), id="rollout-text")
        yield KvFooter()

    def on_mount(self) -> None:
        self.action_refresh_rollout()
        self.set_interval(self.interval, self.action_refresh_rollout)

    def action_refresh_rollout(self) -> None:
        self._poll()

    @work(exclusive=True, group="rollout", exit_on_error=False)
    async def _poll(self) -> None:
        prev = self.status.state if self.status else None
        try:
            st = await self.cluster.rollout_status(self.namespace, self.name_, self.kind)
        except ClusterError as e:
            self.error = e.message
        except Exception as e:  # noqa: BLE001 - the view keeps polling; the dashboard keeps running
            self.error = f"unexpected error: {type(e).__name__}: {e}"
        else:
            self.error = None
            self.status = st
            if prev is not None and st.state != prev and st.state in ("done", "stuck", "failed"):
                sev: SeverityLevel = "information" if st.state == "done" else "warning" if st.state == "stuck" else "error"
                self.app.notify(f"rollout {clean(self.target)}: {st.state}: {clean(st.reason)}", severity=sev,
                                timeout=8, markup=False)
        self.polls += 1
        self._draw()

    def _draw(self) -> None:
        if self.status is not None:
            t = rollout_text(self.status, f"rollout {self.target}", self.started_at)
        else:
            t = Text(f"rollout {clean(self.target)}\n", style="bold")
        if self.error:
            t.append("\n\ncannot read the rollout: ", style="bold red")
            t.append(clean(self.error), style="red")
        self.query_one("#rollout-text", Static).update(t)

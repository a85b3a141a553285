"""Drain progress (runbook preemption-thrash step 2): each step as it happens, with timestamps.

Spare first (scale +1, wait until ready), take the target out of rotation, wait until its own
running + waiting reaches 0 in the live metrics, delete it with the grace period. `c` cancels (the
target goes back in rotation if it was taken out); `u` afterwards restores the replica count the
spare raised.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from tui.actions import bindings
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.core.cluster.base import ActionPlan, Cluster, DrainStep, LoadFn
from tui.core.model import FleetState
from tui.core.textsafe import clean
from widgets.footer import KvFooter
from widgets.format import num, pct

from .events import event_clock

if TYPE_CHECKING:
    from tui.app import KvwatchApp

MARK = {"running": ("…", "cyan"), "ok": ("✔", "green"), "warn": ("!", "yellow"), "failed": ("✗", "bold red"),
        "cancelled": ("■", "yellow")}


def step_line(clock_ts: float, st: DrainStep) -> Text:
    mark, style = MARK.get(st.status, ("·", ""))
    t = Text(time.strftime("%H:%M:%S", time.localtime(clock_ts)), style="dim")
    t.append(f" {'+' + format(st.elapsed_s, '.1f') + 's':>8} ", style="dim")
    t.append(f"{mark} ", style=style)
    t.append(f"{st.step:<10} ", style="bold")
    t.append(clean(st.message), style=style if st.status in ("warn", "failed", "cancelled") else "")
    return t


class DrainScreen(Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    POLL_S = 2.0  # seconds between checks of the spare and of the target's load

    BINDINGS = bindings("drain")
    DEFAULT_CSS = """
    DrainScreen #drain-title { height: auto; padding: 0 1; background: $surface; }
    DrainScreen #drain-load { height: 1; padding: 0 1; }
    DrainScreen #drain-body { height: 1fr; padding: 0 1; border: round $panel; }
    DrainScreen #drain-steps { height: auto; }
    """

    def __init__(self, cluster: Cluster, plan: ActionPlan, load: LoadFn, *, typed_name: str | None = None,
                 poll_s: float | None = None, clock: Callable[[], float] | None = None, autostart: bool = True,
                 drain_kw: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.plan = plan
        self.load = load
        self.typed_name = typed_name
        self.poll_s = poll_s if poll_s is not None else self.POLL_S
        self.clock = clock or event_clock(cluster)  # the simulated clock in the demo
        self.autostart = autostart
        self.drain_kw = drain_kw or {}
        self.cancel_event = asyncio.Event()
        self.rows: list[tuple[float, DrainStep]] = []
        self.running = False
        self.finished = False
        self.restore: tuple[str, int] | None = None  # (owner, replicas) to scale back to
        self.restored = False

    @property
    def pod(self) -> str:
        return self.plan.target.name

    def compose(self) -> ComposeResult:
        t = Text(f"drain pod/{clean(self.pod)} -n {clean(self.plan.target.namespace)}", style="bold")
        t.append(f"  ·  context {clean(self.plan.context or self.cluster.context)}")
        t.append("\n" + clean(self.plan.diff, keep_newlines=True), style="dim")
        yield Static(t, id="drain-title")
        yield Static("", id="drain-load")
        with VerticalScroll(id="drain-body"):
            yield Static(Text("starting...", style="dim"), id="drain-steps")
        yield KvFooter()

    def on_mount(self) -> None:
        self._show_load()
        if self.autostart:
            self.start()

    def start(self) -> None:
        self.running = True
        self.refresh_bindings()
        self._run()

    # -- live metrics (the app calls show_state on every screen after each refresh) ------
    def show_state(self, state: FleetState) -> None:
        self._show_load(state)

    def _show_load(self, state: FleetState | None = None) -> None:
        t = Text("target load (live metrics): ", style="bold")
        cur: tuple[float, ...] | None = None
        try:
            got = self.load()
        except Exception:  # noqa: BLE001 - shown as unknown
            got = None
        if asyncio.iscoroutine(got):
            got.close()
        elif isinstance(got, tuple):
            cur = got
        if cur is None:
            t.append("unknown (no current scrape)", style="dim")
        else:
            running, waiting = cur[0], cur[1]
            t.append(f"running {num(running)}  waiting {num(waiting)}  in flight {num(running + waiting)}")
        view = next((v for v in state.replicas if v.name == self.pod), None) if state is not None else None
        if view is not None and view.metrics.kv_usage is not None:
            t.append(f"  KV {pct(view.metrics.kv_usage, 100)}")
        self.query_one("#drain-load", Static).update(t)

    # -- the drain --------------------------------------------------------------------------
    @work(exclusive=True, group="drain", exit_on_error=False)
    async def _run(self) -> None:
        gen = self.cluster.drain(self.plan, self.load, typed_name=self.typed_name, cancel=self.cancel_event,
                                 poll_s=self.poll_s, **self.drain_kw)
        last: DrainStep | None = None
        try:
            async for st in gen:
                last = st
                self.add_step(st)
        except Exception as e:  # noqa: BLE001 - the dashboard keeps running; the step log says why
            last = DrainStep("error", "failed", f"unexpected error: {type(e).__name__}: {e}")
            self.add_step(last)
        finally:
            await gen.aclose()
            self.running = False
            self.finished = True
            self.refresh_bindings()
        if last is None:
            return
        ok = (last.step, last.status) == ("done", "ok")
        msg = f"drain {self.pod}: {last.step} {last.status}: {last.message}"
        if self.restore is not None:
            msg += f" (u restores {self.restore[0]} to {self.restore[1]} replicas)"
        self.app.notify(clean(msg), title="drain", severity="information" if ok else "warning" if last.status == "cancelled" else "error",
                        timeout=10, markup=False)

    def add_step(self, st: DrainStep) -> None:
        owner = st.data.get("owner") or self.plan.data.get("owner")
        if st.data.get("restore_replicas") is not None and owner:
            self.restore = (str(owner), int(st.data["restore_replicas"]))
        now = self.clock()
        if self.rows and st.status == "running" and self.rows[-1][1].status == "running" and self.rows[-1][1].step == st.step:
            self.rows[-1] = (now, st)  # a wait loop updates its line instead of adding one per poll
        else:
            self.rows.append((now, st))
        text = Text()
        for i, (ts, row) in enumerate(self.rows):
            text.append_text(step_line(ts, row))
            if i < len(self.rows) - 1:
                text.append("\n")
        self.query_one("#drain-steps", Static).update(text)
        self.query_one("#drain-body", VerticalScroll).scroll_end(animate=False)
        self.refresh_bindings()

    # -- keys -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_drain":
            return self.running and not self.cancel_event.is_set()
        if action == "restore":
            return (self.finished and self.restore is not None and not self.restored
                    and not (self.cluster.readonly or getattr(self.app, "readonly", False)))
        return True

    def action_cancel_drain(self) -> None:
        if self.running:
            self.cancel_event.set()
            self.app.notify(f"drain {clean(self.pod)}: cancelling at the next check...", timeout=4, markup=False)
            self.refresh_bindings()

    def action_back(self) -> None:
        if self.running:
            self.app.notify("a drain is running: c cancels it (the target goes back in rotation), then esc",
                            severity="warning", timeout=5)
            return
        self.app.pop_screen()

    def action_restore(self) -> None:
        if self.restore is not None:
            self._restore()

    @work(group="drain-restore", exit_on_error=False)
    async def _restore(self) -> None:
        from .confirm import confirm_and_apply

        if self.restore is None:
            return
        owner, replicas = self.restore
        try:
            plan = await self.cluster.plan_restore(self.plan.target.namespace, owner, replicas)
        except Exception as e:  # noqa: BLE001
            self.app.notify(clean(getattr(e, "message", None) or f"{type(e).__name__}: {e}"), title="restore",
                            severity="error", timeout=10, markup=False)
            return
        result = await confirm_and_apply(self, self.cluster, plan, "restore replicas")
        if result is not None and result.ok:
            self.restored = True
            self.add_step(DrainStep("restore", "ok", clean(result.message)))

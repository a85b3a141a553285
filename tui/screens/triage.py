"""One replica's diagnosis: triage (diagnostics.md steps 2-8), the guided preemption-thrash
runbook, and the capacity planner, as three views of one screen (`t`, `g`, `c`).

The reports come from the core (tui/core/diagnosis) and are recomputed on every refresh from the
replica's history, so every answer is live. What only the cluster knows (log lines, events,
rollouts, the engine args, mitigations already applied) is fetched in a worker when the screen
opens and every FETCH_EVERY_S after; without a cluster it is listed as missing evidence.

The mitigation keys are the fleet screen's own (MitigationMixin, same gating: hidden when
read-only, in replay, without a cluster or without RBAC), aimed at this replica; `e` opens the
edit form pre-filled with the runbook's or the capacity planner's values.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Mapping

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.core.cluster.facts import fetch_facts
from tui.actions import actions_for, bindings, key_name
from tui.core.diagnosis.capacity import CapacityPlan, plan_for_history
from tui.core.diagnosis.context import ClusterFacts
from tui.core.diagnosis.runbook import Runbook, _num, runbook
from tui.core.diagnosis.triage import TriageReport, triage
from tui.core.model import SEVERITY, FleetState, ReplicaView
from tui.core.textsafe import clean
from widgets.footer import KvFooter
from widgets.format import ago, asciify
from widgets.hanging import Hanging

from .diagnosis_text import capacity_text, runbook_text, triage_text, verdict_head
from .mitigation import MitigationMixin, workload_scale_out

if TYPE_CHECKING:
    from tui.app import KvwatchApp

MODES = ("triage", "runbook", "capacity")
MODE_TITLE = {"triage": "triage", "runbook": "runbook", "capacity": "capacity"}
FETCH_EVERY_S = 30.0  # logs and events change slowly; a kube read every refresh would be waste
ARM_S = 5.0  # a discouraged edit needs the key twice within this many seconds


def kv_breached(h, now: float, t) -> bool:
    """KV at the ceiling, a preemption, or a queue held for `queue_points` scrapes anywhere in the
    retained history up to `now`: there is an episode for the runbook's verification to track."""
    prev = gen_prev = None
    queued = 0
    for s in h.scrapes:
        if s.ts > now:
            break
        kv, pre = s.sample.value("kv_usage"), s.sample.value("preemptions")
        if (kv is not None and kv >= t.kv_high) or (pre is not None and prev is not None and pre > prev):
            return True
        # a queue on an engine that works through it (a wedged one's queue is no capacity episode)
        w, gen = s.sample.value("waiting"), s.sample.value("generation_tokens")
        moving = gen is not None and gen_prev is not None and gen > gen_prev
        queued = queued + 1 if w is not None and w >= t.waiting_min and moving else 0
        if queued >= t.queue_points:
            return True
        prev = pre if pre is not None else prev
        gen_prev = gen if gen is not None else gen_prev
    return False


def open_diagnosis(app: Any, name: str | None, mode: str) -> None:
    """Push the diagnosis screen for replica `name` (the fleet and detail screens' t / g / c)."""
    if name is None:
        app.notify("select a replica first", severity="warning", timeout=3)
        return
    app.push_screen(TriageScreen(name, mode))


def edit_screen(cluster: Any, namespace: str, name: str, kind: str, replica: str,
                suggest: Mapping[str, str]) -> Screen:
    """The edit form for the replica's owner, its fields pre-filled with `suggest`."""
    from .edit_args import EditArgsScreen

    return EditArgsScreen(cluster, namespace, name, kind=kind, replica=replica, suggest=dict(suggest))


class TriageScreen(MitigationMixin, Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("triage")  # tui/actions.py: back, t / g / c, f, the one-replica mitigation keys
    DEFAULT_CSS = """
    TriageScreen #diag-head { height: auto; padding: 0 1; background: $surface; }
    TriageScreen #diag-scroll { height: 1fr; }
    TriageScreen #diag-body { height: auto; padding: 0 1; }
    """

    def __init__(self, name: str, mode: str = "triage") -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"unknown diagnosis view {mode!r} (known: {', '.join(MODES)})")
        self.replica = name
        self.mode = mode
        self.group: str | None = None  # the workload, to follow the replica when its pod is replaced
        self.followed: tuple[str, float] | None = None  # (replica gone, since): said in the head
        self.facts = ClusterFacts()
        self.fetch_note = ""  # why nothing was fetched, or that a fetch is running
        self.fetching = False
        self.report: TriageReport | None = None
        self.book: Runbook | None = None
        self.plan: CapacityPlan | None = None
        self._armed_at = 0.0
        self._fetched_wall = 0.0
        self._body: Text | None = None
        self._head: Text | None = None

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="diag-head")
        with VerticalScroll(id="diag-scroll"):
            yield Static("", id="diag-body")
        yield KvFooter()

    def on_mount(self) -> None:
        super().on_mount()  # RBAC check for the mitigation keys
        self.query_one("#diag-scroll").focus()
        self._start_fetch()  # before the first draw, which then says "fetching" (one report, not two)
        self.show_state(self.app.monitor.state)
        self.set_interval(FETCH_EVERY_S, self.action_fetch)
        self.call_after_refresh(self._scroll_to_current)

    # -- the replica --------------------------------------------------------------------------
    def view(self) -> ReplicaView | None:
        return next((r for r in self.app.monitor.state.replicas if r.name == self.replica), None)

    def selected_view(self) -> ReplicaView | None:  # MitigationMixin: the keys act on this replica
        return self.view()

    # -- drawing ------------------------------------------------------------------------------
    def show_state(self, state: FleetState) -> None:
        pal = self.app.palette()
        ascii = self.app.ascii
        view = next((r for r in state.replicas if r.name == self.replica), None)
        if view is None:
            view = self._successor(state)
        if view is None or self.app.monitor.replica_snapshot(self.replica) is None:
            self._paint(Text(f"{clean(self.replica)}: gone from the fleet (deleted or replaced pod)", style="bold"),
                        Text("esc: back to the fleet", style="dim"))
            return
        self.group = view.group
        body = self.compute(view, state.ts)
        head = verdict_head(view.name, view.verdict, view.finding.since, state.ts, pal, ascii)
        if self.followed is not None:  # a changed subject stays said, not only flashed once
            gone, since = self.followed
            head.append(f"\n{clean(gone)} gone since {time.strftime('%H:%M:%S', time.localtime(since))}: "
                        f"following {clean(view.name)} of the same workload", style="bold reverse")
        head.append("\n")
        for m in MODES:
            key = self._key_for(m)
            active = m == self.mode
            head.append(f" {key} {MODE_TITLE[m]} ", style=f"bold reverse {pal.get('accent', '')}" if active else "dim")
            head.append(" ")
        head.append_text(self._facts_line(state.ts))
        if ascii:
            head = asciify(head)
        self._paint(head, body)

    def _successor(self, state: FleetState) -> ReplicaView | None:
        """The replica gone (a rollout or a drain replaced its pod): follow the worst one of the
        same workload, so the runbook's verification keeps tracking the incident."""
        if not self.group:
            return None
        same = [r for r in state.replicas if r.group == self.group and self.app.monitor.knows(r.name)]
        if not same:
            return None
        nxt = min(same, key=lambda r: (SEVERITY.get(r.verdict, 99), r.name))
        self.app.notify(f"{clean(self.replica)} is gone (replaced); following {clean(nxt.name)} of the same workload",
                        timeout=6, markup=False)
        self.followed = (self.followed[0] if self.followed else self.replica, state.ts)
        self.replica = nxt.name
        self.facts = ClusterFacts()
        self.fetching = False
        self._start_fetch()
        return nxt

    def compute(self, view: ReplicaView, now: float) -> Text:
        """The active view's report, from the history up to `now` and the cluster facts."""
        snap = self.app.monitor.replica_snapshot(self.replica)
        if snap is None:  # forgotten since the screen opened (a deleted pod)
            return Text(f"{self.replica}: no longer watched", style="dim")
        h = snap.history  # read by the pure reports only
        t = self.app.monitor.thresholds
        pal = self.app.palette()
        f = self.facts
        if self.mode == "triage":
            self.report = triage(h, now, t, finding=view.finding, logs=f.logs, events=f.events)
            return triage_text(self.report, pal, self.app.ascii)
        self.plan = self._capacity(h)
        if self.mode == "capacity":
            return capacity_text(self.plan, pal, self.keyinfo, self.app.ascii)
        # the workload's incident (its start, the latency before it) outlives the pods it began on
        key = view.group or self.replica
        inc = self.app.incidents.get(key, now)
        self.book = runbook(h, now, t, finding=view.finding, rollouts=f.rollouts, applied=f.applied,
                            capacity=self.plan, logs=f.logs, args=f.args,
                            scale=workload_scale_out(self.app.monitor, view.group, now),
                            incident_start=inc.start if inc is not None else None,
                            baselines=inc.baselines if inc is not None else None)
        self.app.incidents.note(key, self.book)
        return runbook_text(self.book, self.keyinfo, pal, self.app.ascii, kv_breached(h, now, t))

    def _capacity(self, h) -> CapacityPlan:
        args = self.facts.args or {}
        mml = _num(args.get("max-model-len"))
        mns = _num(args.get("max-num-seqs"))
        return plan_for_history(h, t=self.app.monitor.thresholds, max_model_len=int(mml) if mml else None,
                                current_max_num_seqs=int(mns) if mns else None)

    def _scroll_to_current(self) -> None:
        """Bring the runbook's current step into view (once per switch: the user may scroll)."""
        if self.mode != "runbook" or self._body is None:
            return
        lines = self._body.plain.splitlines()
        mark = ">" if self.app.ascii else "▶"
        row = next((i for i, ln in enumerate(lines) if ln.startswith(mark) and ln[1:2].isdigit()), 0)
        scroll = self.query_one("#diag-scroll", VerticalScroll)
        if row + 4 > scroll.size.height:  # below the fold (wrapped lines aside): bring it up
            scroll.scroll_to(y=max(0, row - 6), animate=False)

    @property
    def head_text(self) -> str:
        """The head's text as last painted (the Statics hold it wrapped, as a renderable)."""
        return self._head.plain if self._head is not None else ""

    @property
    def body_text(self) -> str:
        return self._body.plain if self._body is not None else ""

    def _paint(self, head: Text, body: Text) -> None:
        if head != self._head:
            self._head = head
            self.query_one("#diag-head", Static).update(Hanging(head))
        if body != self._body:
            self._body = body
            self.query_one("#diag-body", Static).update(Hanging(body))  # wrapped under each line's indent

    def _facts_line(self, now: float) -> Text:
        t = Text()
        f = self.facts
        if self.fetching:
            t.append("cluster: fetching logs, events and rollouts...", style="dim italic")
        elif f.fetched_at is None:
            t.append(self.fetch_note or "cluster: not fetched yet", style="dim")
        else:
            parts = [f"logs {len(f.logs)} lines" if f.logs is not None else "logs -",
                     f"events {len(f.events)}" if f.events is not None else "events -",
                     f"rollouts {len(f.rollouts)}" if f.rollouts is not None else "rollouts -"]
            t.append("cluster: " + " · ".join(parts) + f" · fetched {ago(time.time() - self._fetched_wall)} ago"
                     f" ({self._key_for('fetch')}: again)", style="dim")
            if f.problems:
                t.append("\n  ! " + "; ".join(clean(p) for p in f.problems), style=self.app.palette().get("warning", ""))
        return t

    # -- keys ---------------------------------------------------------------------------------
    def _key_for(self, action: str) -> str:
        """The key bound to `action` here, after the user's remapping (config [keys])."""
        keymap = getattr(self.app, "_keymap", {}) or {}
        for a in actions_for("triage"):
            if a.action == action or a.action == f"diagnosis('{action}')":
                return ",".join(key_name(k.strip()) for k in keymap.get(a.id, a.key).split(","))
        return "?"

    def keyinfo(self, action: str) -> tuple[str | None, str | None]:
        """(key, why it is not offered now) of a mitigation action, for the runbook's steps."""
        key = self._key_for(action)
        if key == "?":
            return None, "no such key"
        return key, self.gate.why_not(action, self.gate.namespace(self.view()))

    def action_diagnosis(self, mode: str) -> None:
        if mode in MODES and mode != self.mode:
            self.mode = mode
            self._body = None
            self.show_state(self.app.monitor.state)
            self.query_one("#diag-scroll", VerticalScroll).scroll_home(animate=False)
            self.call_after_refresh(self._scroll_to_current)

    # -- cluster facts --------------------------------------------------------------------------
    def action_fetch(self) -> None:
        self._start_fetch()
        if not self.app.paused:
            self.show_state(self.app.monitor.state)

    def _start_fetch(self) -> None:
        cluster = self.app.current_cluster()
        view = self.view()
        if self.app.mode == "replay":
            self.fetch_note = "replay: no logs, events or rollouts"
        elif cluster is None:
            self.fetch_note = "no cluster: no logs, events or rollouts"
        elif view is None or view.pod is None:
            self.fetch_note = "pod unknown to the cluster: no logs, events"
        elif not self.fetching:
            self.fetching = True
            self._fetch(cluster, view.pod, self.replica)

    @work(group="triage-fetch", exit_on_error=False)
    async def _fetch(self, cluster, pod, replica: str) -> None:
        try:
            facts = await fetch_facts(cluster, pod, now=self.app.monitor.state.ts,
                                      since_wall=getattr(self.app, "started_at", None))
        except Exception as e:  # noqa: BLE001 - fetch_facts keeps per-read failures; this is a bug guard
            facts = ClusterFacts(problems=(f"cluster: {type(e).__name__}: {clean(e)}",),
                                 fetched_at=self.app.monitor.state.ts)
        if replica != self.replica:
            return  # the screen moved on to a successor replica meanwhile; its own fetch is running
        self.fetching = False
        self.facts = facts
        self._fetched_wall = time.time()  # "fetched N s ago" in wall seconds (the demo's clock runs faster)
        if self.is_attached and not self.app.paused:
            self.show_state(self.app.monitor.state)

    # -- edit, pre-filled -----------------------------------------------------------------------
    def suggestion(self) -> dict[str, str]:
        """What `e` pre-fills: the capacity planner's value in its view; else the runbook's
        current edit step, or the first edit step still to do; else, for a replica held by its
        concurrency cap, the planner's value; else nothing (the form opens as it is)."""
        view = self.view()
        snap = self.app.monitor.replica_snapshot(self.replica)
        if view is None or snap is None:
            return {}
        h = snap.history
        now = self.app.monitor.state.ts
        plan = self._capacity(h)
        if self.mode == "capacity":
            return dict(plan.suggest)
        f = self.facts
        rb = runbook(h, now, self.app.monitor.thresholds, finding=view.finding, rollouts=f.rollouts,
                     applied=f.applied, capacity=plan, logs=f.logs, args=f.args)
        cur = rb.step(rb.current)
        if cur is not None and (cur.action or "").startswith("edit:") and cur.suggest:
            return dict(cur.suggest)
        todo = next((s for s in rb.steps if (s.action or "").startswith("edit:") and s.status == "todo"
                     and s.suggest), None)
        if todo is not None:
            return dict(todo.suggest)
        return dict(plan.suggest) if view.verdict == "concurrency-capped" else {}

    def _discouraged(self) -> bool:
        view = self.view()
        return view is not None and view.verdict == "node-fault"

    def action_edit_args(self) -> None:
        t = self._owner_target()
        if t is None:
            return
        if self._discouraged() and time.monotonic() - self._armed_at > ARM_S:
            self._armed_at = time.monotonic()
            self.app.notify("node-fault: the GPU is unhealthy and tuning the server cannot fix it; drain the replica "
                            f"instead. Press {self._key_for('edit_args')} again to edit anyway.",
                            title="tuning discouraged", severity="warning", timeout=ARM_S, markup=False)
            return
        self._armed_at = 0.0
        cluster, v, kind, name = t
        suggest = self.suggestion()
        if suggest:
            self.app.push_screen(edit_screen(cluster, v.pod.namespace, name, kind, v.name, suggest))
        else:
            super().action_edit_args()

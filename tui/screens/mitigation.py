"""Mitigation keys of the fleet screen (k9s style): edit args, drain, rollout, restart, scale, roll
back, logs, events, describe (YAML) and the `:` prompt.

A key is bound only when the app's permission gate (tui/gate.py) allows it: `check_action` says
so, so the footer and the help never lie; pressing a hidden key flashes why. The `:` line is
parsed by tui/command_line.py; a context or namespace switch is the app's `switch_cluster`.

Every action: key -> plan (reads only) -> confirm dialog with the exact change -> apply in a
worker -> flash; the cluster core writes the audit line.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual import work

from tui.actions import FLEET, actions_for
from tui.command_line import PLACEHOLDER, SUGGESTIONS, parse_command
from tui.contexts import ContextSwitcher
from tui.core.results import ClusterError
from tui.core.model import PodInfo, ReplicaView
from tui.core.textsafe import clean
from tui.gate import NEEDS, Gate

if TYPE_CHECKING:
    from textual.screen import Screen

    from tui.app import KvwatchApp
    from tui.core.cluster.base import Cluster

    _MixinBase = Screen[None]  # what the mixin is mixed into, for the type checker
else:
    _MixinBase = object

__all__ = ["ACTION_OF_KEY", "DESCRIPTION", "KEY_OF", "NEEDS", "MitigationMixin", "live_load"]

# the keys themselves are declared in tui/actions.py (fleet and triage scopes)
_KEYS = [a for a in actions_for(FLEET) if a.id in NEEDS or a.id == "command"]
KEY_OF = {a.action: a.key for a in _KEYS}
ACTION_OF_KEY = {a.key: a.action for a in _KEYS}
DESCRIPTION = {a.action: a.description for a in _KEYS}


def live_load(monitor: Any, name: str):
    """The drain's load callable: (running, waiting, scraped at) of `name` from its latest good
    scrape, or None when the replica's last scrape failed or it exposes neither."""

    def load() -> tuple[float, float, float | None] | None:
        snap = monitor.replica_snapshot(name)
        if snap is None or snap.load is None:
            return None
        # when it was scraped: the drain judges in-flight only from scrapes after the pod left rotation
        return (snap.load[0], snap.load[1], snap.points[-1][0] if snap.points else None)

    return load


def workload_scale_out(monitor: Any, group: str | None, now: float):
    """The scale-out arithmetic (core diagnosis.scaleout) over the replicas of workload `group`
    as the monitor knows them now; None without a group or rates."""
    from tui.core.diagnosis.scaleout import scale_out

    if not group:
        return None
    reps = [(snap.history, r.verdict) for r in monitor.state.replicas
            if r.group == group and (snap := monitor.replica_snapshot(r.name)) is not None]
    return scale_out(reps, now, monitor.thresholds) if reps else None


@dataclass(frozen=True)
class PodReplica:
    """The selected replica once its pod is known: what the pod and owner actions act on."""

    name: str
    pod: PodInfo
    group: str | None


class MitigationMixin(_MixinBase):
    """Mixed into a Screen (before Screen): FleetScreen, TriageScreen. `selected_view()` says which
    replica the keys act on (the fleet table's highlighted row by default)."""

    app: KvwatchApp  # the running app, typed (textual types it App[Any])

    # -- gate -----------------------------------------------------------------------------
    @property
    def gate(self) -> Gate:
        return self.app.mitigation_gate

    def selected_view(self) -> ReplicaView | None:
        from widgets.fleet_table import FleetTable

        table = self.query_one(FleetTable)
        name = table.selected_name()
        return table.views.get(name) if name else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in NEEDS:
            v = self.selected_view()
            return self.gate.why_not(action, self.gate.namespace(v), self.gate.kind(v)) is None
        return True

    def hidden_keys(self) -> list[tuple[str, str, str]]:
        """(key, description, why) of the mitigation keys not offered now (for the help)."""
        ns = self.gate.namespace(self.selected_view())
        by_reason: dict[str, list[str]] = {}
        for action in NEEDS:
            why = self.gate.why_not(action, ns)
            if why:
                by_reason.setdefault(why, []).append(action)
        out = []
        for why, actions in by_reason.items():
            what = ", ".join(DESCRIPTION[a] for a in actions) if len(actions) <= 2 else "mitigation keys"
            out.append((",".join(KEY_OF[a] for a in actions), what, why))
        return out

    RBAC_RECHECK_S = 60.0

    def on_mount(self) -> None:
        # Textual calls every class's on_mount along the MRO; a subclass may also call super()
        if getattr(self, "_mitigation_mounted", False):
            return
        self._mitigation_mounted = True
        self._check_permissions()
        self.set_interval(self.RBAC_RECHECK_S, lambda: self._check_permissions(force=True))

    def on_data_table_row_highlighted(self) -> None:
        ns = self.gate.namespace(self.selected_view())
        if ns not in self.gate.perms and ns not in self.gate.failed:
            self._check_permissions()
        self.refresh_bindings()

    def on_key(self, event: Any) -> None:
        """A hidden mitigation key says why it is not offered, instead of doing nothing."""
        action = ACTION_OF_KEY.get(event.key)
        if action is None or action not in NEEDS:
            return
        v = self.selected_view()
        why = self.gate.why_not(action, self.gate.namespace(v), self.gate.kind(v))
        if why:
            event.stop()
            self.app.notify(f"{DESCRIPTION[action]}: {why}", severity="warning", timeout=5, markup=False)

    @work(group="permissions", exit_on_error=False)
    async def _check_permissions(self, force: bool = False) -> None:
        if self.gate.cluster() is None or self.app.mode == "replay":
            return
        if await self.gate.load(self.gate.namespace(self.selected_view()), force):
            self.refresh_bindings()

    def recheck_permissions(self) -> None:
        """After a context or namespace switch."""
        self.gate.perms.clear()
        self.gate.failed.clear()
        self.refresh_bindings()
        self._check_permissions()

    # -- targets ----------------------------------------------------------------------------
    def _pod_target(self) -> tuple[Cluster, PodReplica] | None:
        cluster = self.gate.cluster()
        v = self.selected_view()
        if cluster is None:
            return None
        if v is None:
            self.app.notify("select a replica first", severity="warning", timeout=3)
            return None
        if v.pod is None:
            self.app.notify(f"{clean(v.name)}: the cluster does not know this replica's pod", severity="warning",
                            timeout=5, markup=False)
            return None
        return cluster, PodReplica(v.name, v.pod, v.group)

    def _owner_target(self) -> tuple[Cluster, PodReplica, str, str] | None:
        t = self._pod_target()
        if t is None:
            return None
        cluster, v = t
        kind, name = v.pod.owner_kind, v.pod.owner_name
        if kind not in ("Deployment", "StatefulSet") or not name:
            what = f"a {kind}" if kind else "no owner"
            self.app.notify(f"{clean(v.name)} has {clean(what)}: kvwatch acts on Deployments and StatefulSets",
                            severity="warning", timeout=5, markup=False)
            return None
        return cluster, v, kind, name

    def _error(self, title: str, e: BaseException) -> None:
        msg = e.message if isinstance(e, ClusterError) else f"unexpected error: {type(e).__name__}: {e}"
        self.app.notify(clean(msg), title=title, severity="error", timeout=10, markup=False)

    # -- actions ----------------------------------------------------------------------------
    def action_edit_args(self) -> None:
        t = self._owner_target()
        if t is None:
            return
        from .edit_args import EditArgsScreen

        cluster, v, kind, name = t
        self.app.push_screen(EditArgsScreen(cluster, v.pod.namespace, name, kind=kind, replica=v.name))

    def action_rollout_status(self) -> None:
        t = self._owner_target()
        if t is not None:
            self.open_rollout(t[0], t[1].pod.namespace, t[3], t[2])

    def open_rollout(self, cluster: Cluster, namespace: str, name: str, kind: str = "Deployment") -> None:
        from .rollout import RolloutScreen

        import time

        from tui.core.cluster.base import ClusterReads

        # the action just applied started this rollout: its elapsed time counts from now, on the
        # clock of the ReplicaSets' timestamps (the simulated cluster's own; else wall time)
        started = cluster.now() if type(cluster).now is not ClusterReads.now else time.time()
        self.app.push_screen(RolloutScreen(cluster, namespace, name, kind=kind, started_at=started))

    def action_logs(self) -> None:
        t = self._pod_target()
        if t is not None:
            from .logs import LogsScreen

            self.app.push_screen(LogsScreen(t[0], t[1].pod.namespace, t[1].pod.name, replica=t[1].name))

    def action_describe(self) -> None:
        t = self._pod_target()
        if t is not None:
            from .describe import DescribeScreen

            self.app.push_screen(DescribeScreen(t[0], t[1].pod.namespace, t[1].pod.name))

    def action_events(self) -> None:
        cluster = self.gate.cluster()
        if cluster is not None:
            from .events import EventsScreen

            self.app.push_screen(EventsScreen(cluster, self.gate.namespace(self.selected_view())))

    def action_drain(self) -> None:
        t = self._pod_target()
        if t is not None:
            self._drain(*t)

    def action_rollout_restart(self) -> None:
        t = self._owner_target()
        if t is not None:
            cluster, v, kind, name = t
            self._plan_confirm_apply("rollout restart", cluster, cluster.plan_restart(v.pod.namespace, name, kind),
                                     rollout=(v.pod.namespace, name, kind))

    def action_rollback(self) -> None:
        t = self._owner_target()
        if t is not None:
            cluster, v, kind, name = t
            self._plan_confirm_apply("roll back", cluster, cluster.plan_rollback(v.pod.namespace, name, kind),
                                     rollout=(v.pod.namespace, name, kind))

    def action_scale(self) -> None:
        t = self._owner_target()
        if t is not None:
            # the count and enter typed while the Deployment is read belong to the prompt that
            # follows, not to this screen (enter would open the detail) (tui/keyhold.py)
            self.app.keyhold.hold()
            self._scale(*t)

    def action_command(self) -> None:
        self.app.keyhold.hold()  # what is typed after `:` belongs to the prompt (tui/keyhold.py)
        self._command()

    # -- workers ----------------------------------------------------------------------------
    @work(group="mitigation", exit_on_error=False)
    async def _plan_confirm_apply(self, title: str, cluster: Cluster, plan_coro, rollout: tuple | None = None) -> None:
        from .confirm import confirm_and_apply

        try:
            plan = await plan_coro
        except Exception as e:  # noqa: BLE001 - reads raise ClusterError; anything else is reported too
            self._error(title, e)
            return
        result = await confirm_and_apply(self, cluster, plan, title)
        if result is not None and result.ok and rollout is not None:
            self.open_rollout(cluster, *rollout)

    @work(group="mitigation", exit_on_error=False)
    async def _scale(self, cluster: Cluster, v: PodReplica, kind: str, name: str) -> None:
        from .prompt import scale_prompt

        ns = v.pod.namespace
        try:
            info = await cluster.get_deployment(ns, name, kind)
        except Exception as e:  # noqa: BLE001
            self.app.keyhold.drop()  # no prompt: what was typed for it is dropped (and said)
            self._error("scale", e)
            return
        # pre-filled with kvwatch's count when the workload's queue persists (the arithmetic is
        # on the runbook screen); the user still types over it or confirms it
        so = workload_scale_out(self.app.monitor, v.group, self.app.monitor.state.ts)
        want = so is not None and so.replicas > info.replicas
        answer = await self.app.push_screen_wait(scale_prompt(
            f"{kind.lower()}/{name} -n {ns}", info.replicas, so.replicas if so is not None and want else None))
        if answer is None or not answer.strip():
            return
        try:
            replicas = int(answer.strip())
        except ValueError:
            self.app.notify(f"scale: {clean(answer)!r} is not a whole number", severity="error", timeout=5, markup=False)
            return
        self._plan_confirm_apply("scale", cluster, cluster.plan_scale(ns, name, replicas, kind), rollout=(ns, name, kind))

    @work(group="mitigation", exit_on_error=False)
    async def _drain(self, cluster: Cluster, v: PodReplica) -> None:
        from .confirm import ConfirmScreen
        from .drain import DrainScreen

        ns, pod = v.pod.namespace, v.pod.name
        try:
            plan = await cluster.plan_drain(ns, pod)
        except Exception as e:  # noqa: BLE001
            self._error("drain", e)
            return
        dialog = ConfirmScreen(plan, production=cluster.production)
        if not await self.app.push_screen_wait(dialog):
            self.app.notify("drain: cancelled, nothing was sent", timeout=3)
            return
        self.app.push_screen(DrainScreen(cluster, plan, live_load(self.app.monitor, pod), typed_name=dialog.typed_name))

    @work(group="command", exit_on_error=False)
    async def _command(self) -> None:
        from .prompt import PromptScreen

        # The prompt opens at once; the cluster's contexts and deployments join its suggestions
        # when they arrive (a slow API server must not keep the prompt closed).
        prompt = PromptScreen(":", placeholder=PLACEHOLDER, suggestions=list(SUGGESTIONS))
        self._command_suggestions(prompt)
        line = await self.app.push_screen_wait(prompt)
        if line:
            await self.run_command(line)

    @work(group="command-suggestions", exit_on_error=False)
    async def _command_suggestions(self, prompt) -> None:
        cluster = self.gate.cluster()
        if cluster is None:
            return
        more: list[str] = []
        try:
            async with asyncio.timeout(2.0):
                more += [f"ctx {c.name}" for c in await cluster.list_contexts()]
                ns = self.gate.namespace(self.selected_view())
                more += [f"rollout {d.name}" for d in await cluster.list_deployments(ns)]
        except Exception:  # noqa: BLE001 - suggestions are a nicety
            pass
        if more:
            prompt.add_suggestions(more)

    def _switcher(self) -> ContextSwitcher:
        return ContextSwitcher(self.app, self._error, self.recheck_permissions)

    async def run_command(self, line: str) -> None:
        """Act on one `:` line (tui/command_line.py)."""
        cmd = parse_command(line)
        if cmd is None:
            return
        if cmd.name == "quit":
            self.app.exit()
            return
        if cmd.name == "report":
            await self.app.action_write_report()
            return
        cluster = self.gate.cluster()
        if not cmd.needs_cluster:
            self.app.notify(f"unknown command :{clean(cmd.typed)} (try :ctx, :ns, :rollout, :events, :report, :q)",
                            severity="warning", timeout=5, markup=False)
            return
        if cluster is None:
            self.app.notify(f":{cmd.typed}: {self.gate.why_not('events')}", severity="warning", timeout=5, markup=False)
            return
        arg = cmd.arg
        if cmd.name == "events":
            why = self.gate.why_not("events")
            if why:
                self.app.notify(f":events: {why}", severity="warning", timeout=5, markup=False)
            else:
                from .events import EventsScreen

                self.app.push_screen(EventsScreen(cluster, arg or self.gate.namespace(self.selected_view())))
        elif cmd.name == "rollout":
            v = self.selected_view()
            name = arg or (v.pod.owner_name if v is not None and v.pod is not None else None)
            if not name:
                self.app.notify(":rollout DEPLOYMENT (no replica selected)", severity="warning", timeout=4)
                return
            kind = v.pod.owner_kind if (v is not None and v.pod is not None and not arg and v.pod.owner_kind) else "Deployment"
            self.open_rollout(cluster, self.gate.namespace(v), name, kind)
        elif cmd.name == "ctx":
            await self._switcher().context(cluster, arg)
        else:  # ns
            await self._switcher().namespace(cluster, arg)

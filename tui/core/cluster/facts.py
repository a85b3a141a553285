"""What triage and the guided runbook need from the cluster, gathered for one replica.

The cluster I/O lives here, beside the diagnosis: the reads come back as a `ClusterFacts`
(plain data, defined in `diagnosis.context`) that the caller hands to triage and the runbook,
so the diagnosis stays pure.

Triage (diagnostics.md steps 4 and 6) wants the container's log lines and the recent events;
the runbook wants the workload's rollouts (to spot a deploy in the burn window, with its diff),
the engine args it runs with now (to pre-fill edits) and the mitigations already applied (so it
moves on from drain to cap to headroom to scale). Each read may fail on its own (RBAC, timeout,
a StatefulSet has no ReplicaSets): the failure is kept in `problems` and that piece stays None,
which triage and the runbook report as missing evidence, never as "nothing found".

Times are on the history's clock (scrape timestamps): rollout and event times come from the
cluster on that clock already; audit-log entries (wall time) are mapped onto it.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import re
import shlex
import time
from typing import Any, Awaitable, Iterable, Mapping, Sequence, TypeVar

from ..diagnosis.context import ClusterFacts
from ..diagnosis.runbook import Rollout, _num
from ..model import PodInfo
from ..textsafe import clean
from .args import SPECS, ArgError, default_for, find_vllm_container, parse_container
from .base import PREVIOUS_ARGS_ANNOTATION, Cluster, ClusterError, EventInfo, ReplicaSetInfo

T = TypeVar("T")


def _err(what: str, e: BaseException) -> str:
    if isinstance(e, ClusterError):
        return f"{what}: {clean(e.message)}"
    if isinstance(e, TimeoutError):
        return f"{what}: timed out"
    return f"{what}: {type(e).__name__}: {clean(e)}"


async def _timed(coro: Awaitable[T], timeout: float) -> T:
    async with asyncio.timeout(timeout):
        return await coro


def engine_args(container: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical flag -> effective value of the container's vLLM invocation ({} when not vLLM)."""
    try:
        cmd = parse_container(container)
    except ArgError:
        return {}
    if not cmd.is_vllm:
        return {}
    return {v.name: v.value for v in cmd.kv_args() if v.value is not None}


def _explicit_args(container: Mapping[str, Any]) -> dict[str, Any]:
    """Only the flags set in the spec: a rollout's diff is about what someone wrote."""
    try:
        cmd = parse_container(container)
    except ArgError:
        return {}
    return {v.name: v.value for v in cmd.kv_args() if not v.is_default}


def _line_container(line: str) -> dict[str, Any]:
    try:
        words = shlex.split(line)
    except ValueError:  # unbalanced quotes in a sanitized line: whitespace is close enough
        words = line.split()
    return {"name": "vllm", "args": words}


def rollouts_from_replicasets(rss: Iterable[ReplicaSetInfo], workload: str = "",
                              previous: Mapping[str, Any] | None = None) -> list[Rollout]:
    """Each ReplicaSet revision diffed with the one before (explicit flags only).

    Kubernetes lists the ReplicaSets scaled to zero too, but a rollout status may keep only the
    live ones; `previous` (the container kvwatch recorded before its last edit) then stands in
    for the revision before the newest."""
    known = sorted((rs for rs in rss if rs.created is not None), key=lambda r: (r.revision, r.created))
    out: list[Rollout] = []
    prev: dict[str, Any] | None = None
    for rs in known:
        vals = _explicit_args(_line_container(rs.args_line))
        if prev is not None and vals != prev and rs.created is not None:
            out.append(Rollout(rs.created, str(rs.revision), prev, vals, workload))
        prev = vals
    if len(known) == 1 and previous is not None:
        before = _explicit_args(previous)
        if "model" not in (prev or {}):
            before.pop("model", None)  # the args line may lack the command that names the model
        rs = known[0]
        if before != prev and rs.created is not None:
            out.append(Rollout(rs.created, str(rs.revision), before, prev or {}, workload))
    return out


def applied_from_rollouts(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Runbook mitigations visible in the rollout history, whoever made them (kvwatch, kubectl, CD):
    a lowered max-num-seqs / max-model-len caps concurrency; a raised gpu-memory-utilization or
    prefix caching / chunked prefill turned on adds KV headroom."""
    out: dict[str, float] = {}

    def values(r: Rollout, flag: str) -> tuple[float | None, float | None]:
        # an absent flag runs with the engine default
        dflt = _num(default_for(flag)) if flag in SPECS else None
        a, b = _num(r.before.get(flag)), _num(r.after.get(flag))
        return (dflt if a is None else a), (dflt if b is None else b)

    def lowered(r: Rollout, flag: str) -> bool:
        a, b = values(r, flag)
        return a is not None and b is not None and b < a

    def raised(r: Rollout, flag: str) -> bool:
        a, b = values(r, flag)
        return a is not None and b is not None and b > a

    def turned_on(r: Rollout, flag: str) -> bool:
        return str(r.after.get(flag)).lower() in ("true", "1") and str(r.before.get(flag)).lower() in ("false", "0")

    for r in sorted(rollouts, key=lambda r: r.ts):
        if lowered(r, "max-num-seqs") or lowered(r, "max-model-len"):
            out["edit:max_num_seqs"] = r.ts
        if raised(r, "gpu-memory-utilization") or turned_on(r, "enable-prefix-caching") \
                or turned_on(r, "enable-chunked-prefill"):
            out["edit:gpu_memory_utilization"] = r.ts
    return out


def _wall(entry: Mapping[str, Any]) -> float | None:
    try:
        return _dt.datetime.fromisoformat(str(entry.get("time"))).timestamp()
    except (TypeError, ValueError):
        return None


_REPLICAS = re.compile(r"^-replicas: (\d+)\n\+replicas: (\d+)$")


def applied_from_audit(entries: Iterable[Mapping[str, Any]], pod: PodInfo, *, now: float, wall_now: float,
                       speed: float = 1.0, context: str | None = None,
                       not_before: float | None = None) -> dict[str, float]:
    """Completed drains of the workload's pods and scale-outs of the workload, from the audit log,
    on the history clock (`now` is the history time at `wall_now`; the demo's simulated clock
    runs `speed` times faster than the wall). Only entries of `context` and from `not_before` on
    (this session's history) count; a drain's own spare replica is not a scale-out."""
    out: dict[str, float] = {}
    owner = pod.owner_name or ""
    draining = False
    for e in entries:
        res = e.get("result") or {}
        if not isinstance(res, Mapping) or (context is not None and e.get("context") != context):
            continue
        action, target = str(e.get("action") or ""), str(e.get("target") or "")
        name = target.split(" ", 1)[0].split("/", 1)[-1]
        if not (name == pod.name or (owner and (name == owner or name.startswith(owner + "-")))):
            continue
        message = str(res.get("message", ""))
        if action == "drain":
            draining = message == "drain started" and bool(res.get("ok"))
            if not (res.get("ok") and message.startswith("drain done")):
                continue  # started, cancelled or failed: not a drain
        elif action == "scale":
            m = _REPLICAS.match(str(e.get("diff") or ""))
            if draining or not res.get("ok") or m is None or int(m.group(2)) <= int(m.group(1)):
                continue  # the drain's spare, a failure, or not out
        else:
            continue
        wall = _wall(e)
        if wall is None:
            continue
        at = now - (wall_now - wall) * speed
        if not_before is not None and at < not_before:
            continue
        out[action] = max(out.get(action, float("-inf")), at)
    return out


def relevant_events(events: Iterable[EventInfo], pod: PodInfo) -> list[EventInfo]:
    """Events about the pod, its workload (Deployment, ReplicaSets, sibling pods) or its node."""
    owner = pod.owner_name or ""
    out = []
    for e in events:
        kind, _, name = e.object.partition("/")
        if name == pod.name or (owner and (name == owner or name.startswith(owner + "-"))) \
                or (kind == "Node" and pod.node and name == pod.node):
            out.append(e)
    return out


async def fetch_facts(cluster: Cluster, pod: PodInfo, *, now: float, timeout: float = 5.0,
                      log_tail: int = 2000, wall_now: float | None = None,
                      since_wall: float | None = None) -> ClusterFacts:
    """Logs (current and, after a restart, previous container), events, the workload's args and
    rollouts, and the mitigations applied since `since_wall` (wall clock; kvwatch's start: older
    changes are not this incident's mitigations), for the replica running in `pod`."""
    problems: list[str] = []
    ns = pod.namespace

    logs: list[str] | None = None
    try:
        cur = await _timed(cluster.logs(ns, pod.name, tail=log_tail, filtered=True), timeout)
        logs = list(cur.lines)
    except Exception as e:  # noqa: BLE001 - one failed read is a missing piece, not a failed triage
        problems.append(_err("logs", e))
    if logs is not None and pod.restarts:
        try:
            prev = await _timed(cluster.logs(ns, pod.name, previous=True, tail=log_tail, filtered=True), timeout)
            logs = list(prev.lines) + logs
        except Exception as e:  # noqa: BLE001
            problems.append(_err("previous logs", e))

    events: list[EventInfo] | None = None
    try:
        events = relevant_events(await _timed(cluster.events(ns, limit=200), timeout), pod)
    except Exception as e:  # noqa: BLE001
        problems.append(_err("events", e))

    args: dict[str, Any] | None = None
    rollouts: list[Rollout] | None = None
    kind, owner = pod.owner_kind, pod.owner_name
    if kind in ("Deployment", "StatefulSet") and owner:
        previous = None
        try:
            dep = await _timed(cluster.get_deployment(ns, owner, kind), timeout)
            found = find_vllm_container([c.as_dict() for c in dep.containers])
            if found is not None:
                args = engine_args(found[1])
            raw = dep.annotations.get(PREVIOUS_ARGS_ANNOTATION)
            if raw:
                import json

                try:
                    previous = json.loads(raw)
                except ValueError:
                    previous = None
        except Exception as e:  # noqa: BLE001
            problems.append(_err(f"{kind.lower()}/{owner}", e))
        if kind == "Deployment":
            try:
                st = await _timed(cluster.rollout_status(ns, owner, kind), timeout)
                rss = ([st.new_rs] if st.new_rs is not None else []) + list(st.old_rs)
                rollouts = rollouts_from_replicasets(rss, f"{kind.lower()}/{owner}", previous)
                dated = [rs for rs in rss if rs.created is not None]
                if len(dated) == 1 and not rollouts and previous is None and dated[0].revision > 1:
                    # the revision it replaced is no longer listed: a rollout happened, its diff is unknown
                    rollouts = None
                    problems.append(f"rollouts: only revision {dated[0].revision} of {kind.lower()}/{owner} is "
                                    "retained; the revision before it cannot be diffed")
            except Exception as e:  # noqa: BLE001
                problems.append(_err("rollout history", e))
        else:
            problems.append(f"rollouts: {kind.lower()}/{owner} keeps no ReplicaSet history to diff")
    else:
        problems.append("rollouts: the pod has no Deployment / StatefulSet owner")

    wall_now = time.time() if wall_now is None else wall_now
    speed = float(getattr(getattr(cluster, "fleet", None), "speed", 1.0) or 1.0)  # the demo's clock rate
    not_before = None if since_wall is None else now - (wall_now - since_wall) * speed
    applied = applied_from_rollouts([r for r in rollouts or () if not_before is None or r.ts >= not_before])
    entries = cluster.audit.read() if getattr(cluster, "audit", None) is not None else []
    applied.update(applied_from_audit(entries, pod, now=now, wall_now=wall_now, speed=speed,
                                      context=cluster.context, not_before=not_before))
    return ClusterFacts(
        logs=tuple(logs) if logs is not None else None,
        events=tuple(events) if events is not None else None,
        rollouts=tuple(rollouts) if rollouts is not None else None,
        args=args,
        applied=applied,
        problems=tuple(problems),
        fetched_at=now,
    )

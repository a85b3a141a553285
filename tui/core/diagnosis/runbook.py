"""The preemption-thrash runbook as a live, guided flow for one replica.

  node healthy? -> OOM-crashing? -> deploy in the burn window? -> cordon + drain ->
  cap concurrency -> (recovered?) -> add KV headroom -> (still pressured?) -> scale out -> verify

Each step carries its live answer, the evidence, and the id of the action that acts on it
("drain", "edit:max_num_seqs", "edit:gpu_memory_utilization", "rollback", "scale"), with edit
values pre-filled where kvwatch can compute them (capacity planner). A sick node short-circuits
the flow and marks every tuning action discouraged: tuning the server cannot fix a GPU.
A deploy in the burn window that raised max-num-seqs / max-model-len or changed the KV dtype
short-circuits to rollback, with the diff. Verification tracks the runbook's recovery criteria
and says when recovery is confirmed (held for `recovery_window_s`).

Pure function of the history up to `now`, plus what the caller knows: rollout history and the
actions already taken (id -> time), e.g. from the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..history import ReplicaHistory
from ..model import AtLeast, Evidence, Finding, seconds_text
from ..textsafe import clean
from .. import verdicts as V
from .capacity import CapacityPlan
from .rules import diagnose, info, missing, node_fault_evidence, rank_bound
from . import gmu_policy
from .scaleout import ScaleOut
from .thresholds import Thresholds
from .loglines import kind as log_kind
from .triage import hist_between

# Flags whose change in a rollout can cause KV pressure, and in which direction.
RISKY = {
    "max-num-seqs": "up",
    "max-model-len": "up",
    "max-num-batched-tokens": "up",
    "kv-cache-dtype": "change",
    "quantization": "change",
    "gpu-memory-utilization": "down",  # a smaller pool
    "block-size": "change",
    "enable-prefix-caching": "off",
}


@dataclass(frozen=True, slots=True)
class Rollout:
    """One revision of the replica's workload: engine args before and after (canonical flag
    names as in cluster.args, e.g. "max-num-seqs"; a missing key means the default)."""

    ts: float
    revision: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    workload: str = ""


@dataclass(frozen=True, slots=True)
class ArgChange:
    flag: str
    before: Any
    after: Any
    risky: bool
    why: str = ""

    @property
    def line(self) -> str:
        def show(v: Any) -> str:
            return "(default)" if v is None else str(v)

        return f"--{self.flag}: {show(self.before)} -> {show(self.after)}" + (f"  ({self.why})" if self.why else "")


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def arg_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[ArgChange]:
    """Every changed flag; `risky` marks the ones the runbook names as KV-pressure causes."""
    out = []
    for flag in sorted(set(before) | set(after)):
        a, b = before.get(flag), after.get(flag)
        if a == b or (_num(a) is not None and _num(a) == _num(b)):
            continue
        way = RISKY.get(flag)
        risky, why = False, ""
        na, nb = _num(a), _num(b)
        if way == "up":
            risky = nb is None or na is None or nb > na  # raised, or set from / back to a default
            why = "raised: more KV demand" if na is not None and nb is not None and nb > na else \
                ("set explicitly" if a is None else "back to the default") if risky else ""
        elif way == "down":
            risky = na is not None and nb is not None and nb < na
            why = "lowered: fewer KV blocks" if risky else ""
        elif way == "change":
            risky, why = True, "changed: bytes per token / blocks differ"
        elif way == "off":
            risky = str(b).lower() in ("false", "0", "no")
            why = "turned off" if risky else ""
        out.append(ArgChange(flag, a, b, risky, why))
    return out


@dataclass(frozen=True, slots=True)
class Step:
    id: str  # node, oom, deploy, drain, cap, headroom, scale, verify
    title: str
    status: str  # yes / no / unknown (questions); todo / done / skip / wait (actions); met / not-met
    answer: str
    action: str | None = None
    action_label: str = ""
    discouraged: bool = False  # shown, but tuning is the wrong move now (sick node)
    evidence: tuple[Evidence, ...] = ()
    details: tuple[str, ...] = ()  # e.g. the rollout diff
    suggest: Mapping[str, str] = field(default_factory=dict)  # edit-form pre-fill: flag -> value

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status, "answer": self.answer,
                "action": self.action, "action_label": self.action_label, "discouraged": self.discouraged,
                "evidence": [e.as_dict() for e in self.evidence], "details": list(self.details),
                "suggest": dict(self.suggest)}


@dataclass(frozen=True, slots=True)
class Criterion:
    key: str
    label: str
    met: bool | None  # met now; None = cannot tell (data missing)
    text: str
    held: bool | None = None  # met continuously for the recovery window (time-based criteria)
    exposed: bool = True  # False: the replica does not expose the signal (it cannot hold recovery back)

    @property
    def status(self) -> str:
        """met / not-yet (met now, short of its window or its data) / not-met / unknown."""
        if self.met is None:
            return "unknown"
        if not self.met:
            return "not-met"
        return "not-yet" if self.held is False else "met"


@dataclass(frozen=True, slots=True)
class Verification:
    criteria: tuple[Criterion, ...]
    met: bool  # every criterion that can be evaluated is met now
    confirmed: bool  # ... and the preemption / KV / queue ones have held for the recovery window
    since: float | None  # when the replica last breached (start of the clean run)
    confirmed_at: float | None
    text: str
    # the pre-incident latency p95 per signal ("ttft", "itl") compared with; None where none
    baselines: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Runbook:
    replica: str
    ts: float
    finding: Finding
    steps: tuple[Step, ...]
    current: str  # id of the step to act on now
    branch: str  # divert / oom / rollback / mitigate / scale / verify / not-kv
    verification: Verification
    tuning_discouraged: bool
    incident_start: float | None
    node: str | None = None  # the pod's node (from the cluster), named wherever the GPU is at issue

    def step(self, sid: str) -> Step | None:
        return next((s for s in self.steps if s.id == sid), None)

    def as_dict(self) -> dict[str, Any]:
        v = self.verification
        return {
            "replica": self.replica, "ts": self.ts, "verdict": self.finding.verdict, "current": self.current,
            "node": self.node,
            "branch": self.branch, "tuning_discouraged": self.tuning_discouraged,
            "incident_start": self.incident_start, "steps": [s.as_dict() for s in self.steps],
            "verification": {"met": v.met, "confirmed": v.confirmed, "since": v.since,
                             "confirmed_at": v.confirmed_at, "text": v.text,
                             "criteria": [{"key": c.key, "label": c.label, "met": c.met, "held": c.held,
                                           "status": c.status, "text": c.text}
                                          for c in v.criteria]},
        }


# -- verification -----------------------------------------------------------------------------


CALM_BASELINE_S = 60.0  # the shortest calm stretch a latency baseline is taken from


def _calm(kv: float | None, waiting: float | None, preempted: bool, t: Thresholds) -> bool:
    return not preempted and (kv is None or kv < t.kv_high) and (waiting is None or waiting < t.waiting_min)


def pre_incident(h: ReplicaHistory, name: str, incident_start: float | None, t: Thresholds) -> float | None:
    """p95 of histogram `name` over the calm stretch of `h` before the incident's start (in the
    max(recovery window, 5 min) before it; at least CALM_BASELINE_S long): KV off the ceiling, no
    queue, no preemption. A replica born into the incident (a rollout's new pod) has none: its
    first minutes are no baseline."""
    if incident_start is None:
        return None
    scr = [s for s in h.scrapes.since(incident_start - max(t.recovery_window_s, 300.0), incident_start)
           if s.ts < incident_start]
    first = last = None
    for i in range(len(scr) - 1, -1, -1):  # back over the onset, then the calm stretch before it
        s = scr[i]
        pre, prev = s.page.value("preemptions"), scr[i - 1].page.value("preemptions") if i else None
        if not _calm(s.page.value("kv_usage"), s.page.value("waiting"),
                     pre is not None and prev is not None and pre > prev, t):
            if last is None:
                continue
            break
        last = last if last is not None else s.ts
        first = s.ts
    if first is None or last is None or last - first < CALM_BASELINE_S:
        return None
    base = hist_between(h, name, first + 1e-6, last)  # (the delta from the stretch's first scrape)
    p = base.quantile(0.95) if base is not None else None
    return None if p is None or isinstance(p, AtLeast) else p


def verify(h: ReplicaHistory, now: float, t: Thresholds, incident_start: float | None,
           baselines: Mapping[str, float | None] | None = None) -> Verification:
    """The runbook's recovery criteria over the last `recovery_window_s` seconds.

    `baselines`: the pre-incident latency p95 per signal, when known from elsewhere (the
    incident's first replica, for its replacement pods); else from `h`'s calm time before
    `incident_start` (`pre_incident`)."""
    w = t.recovery_window_s
    scr = [s for s in h.scrapes if s.ts <= now]
    crit: list[Criterion] = []
    if not scr:
        return Verification((), False, False, None, None, "no data")
    covered = now - scr[0].ts
    # the last time each criterion was breached (None = never in the retained history)
    last_pre = last_kv = last_wait = None
    prev = None
    for s in scr:
        kv, waiting, pre = s.page.value("kv_usage"), s.page.value("waiting"), s.page.value("preemptions")
        if kv is not None and kv >= t.kv_high:
            last_kv = s.ts
        if waiting is not None and waiting >= t.waiting_min:
            last_wait = s.ts
        if pre is not None and prev is not None and pre > prev:
            last_pre = s.ts
        if pre is not None:
            prev = pre
    latest = scr[-1].page

    def held(last: float | None, label: str, key: str, exposed: bool, ok_now: bool) -> Criterion:
        if not exposed:
            return Criterion(key, label, None, f"{label}: not exposed", exposed=False)
        quiet = now - last if last is not None else covered
        when = f"last breach {quiet:.0f} s ago" if last is not None else f"none in {covered:.0f} s of history"
        return Criterion(key, label, ok_now, f"{label}: {when} (needs {w:.0f} s)", quiet >= w and ok_now)

    pre_now = latest.value("preemptions")
    crit.append(held(last_pre, "preemptions ~0", "preemptions", pre_now is not None,
                     last_pre is None or last_pre < scr[-1].ts))
    kv_now = latest.value("kv_usage")
    c = held(last_kv, f"KV usage < {t.kv_high:.2f}", "kv", kv_now is not None,
             kv_now is not None and kv_now < t.kv_high)
    crit.append(Criterion(c.key, c.label, c.met, c.text + (f", now {kv_now:.2f}" if kv_now is not None else ""),
                          c.held))
    w_now = latest.value("waiting")
    c = held(last_wait, "waiting drained", "waiting", w_now is not None, w_now is not None and w_now < t.waiting_min)
    crit.append(Criterion(c.key, c.label, c.met, c.text + (f", now {w_now:.0f}" if w_now is not None else ""),
                          c.held))
    # latency back: p95 over the recovery window vs p95 before the incident
    used: dict[str, float | None] = {}
    for name, label in (("ttft", "TTFT"), ("itl", "TPOT / inter-token latency")):
        if latest.hist(name) is None:
            crit.append(Criterion(name, f"{label} back", None, f"{label}: not exposed", exposed=False))
            continue
        given = (baselines or {}).get(name)
        pb = used[name] = given if given is not None else pre_incident(h, name, incident_start, t)
        if pb is None:
            why = ("no incident start to compare with" if incident_start is None and not baselines
                   else "no pre-incident baseline (no calm time before the incident in this replica's history)")
            crit.append(Criterion(name, f"{label} back", None, f"{label}: not yet: {why}"))
            continue
        cur = hist_between(h, name, now - w, now)
        pc = cur.quantile(0.95) if cur is not None else None
        if pc is None:
            crit.append(Criterion(name, f"{label} back", None, f"{label}: not yet: no requests lately"))
            continue
        ok = pc <= pb * t.latency_recovered_ratio and not isinstance(pc, AtLeast)
        crit.append(Criterion(name, f"{label} back", ok,
                              f"{label} p95 {seconds_text(pc)} vs {seconds_text(pb)} before the incident "
                              f"({'within' if ok else 'above'} {t.latency_recovered_ratio:g}x)"))
    pod = h.last_ok.pod if h.last_ok is not None else None
    if pod is not None:
        oom = pod.last_termination_reason == "OOMKilled" or pod.last_exit_code == 137
        restarts = [s.pod.restarts for s in scr if s.pod is not None and s.ts >= now - w]
        new_restart = bool(restarts) and restarts[-1] > restarts[0]
        ok = not new_restart
        crit.append(Criterion("oom", "no new OOM / restart", ok,
                              "no restart in the window" if ok else
                              f"the pod restarted in the window{' (OOMKilled)' if oom else ''}"))
    known = [c for c in crit if c.met is not None]
    met = bool(known) and all(c.met for c in known)
    core = [c for c in crit if c.key in ("preemptions", "kv", "waiting")]
    breaches = [x for x in (last_pre, last_kv, last_wait) if x is not None]
    since = max(breaches) if breaches else scr[0].ts
    # every criterion the replica exposes must be met on its data: one without it is "not yet"
    pending = [c for c in crit if c.exposed and c.met is None]
    confirmed = met and not pending and all(c.held for c in core if c.met is not None) and covered >= w
    confirmed_at = since + w if confirmed else None
    if confirmed:
        text = f"recovery confirmed: criteria held for {w:.0f} s"
    elif met:
        text = "criteria met now; not yet confirmed: " + (
            "; ".join(c.text for c in pending) if pending and all(c.held is not False for c in core)
            else f"waiting for the {w:.0f} s window to pass")
    else:
        bad = [c.label for c in known if not c.met]
        text = "not recovered: " + ", ".join(bad)
    return Verification(tuple(crit), met, confirmed, since if breaches else None, confirmed_at, text, used)


# -- the flow -------------------------------------------------------------------------------------


def _current_value(h: ReplicaHistory, name: str, args: Mapping[str, Any] | None) -> float | None:
    if args is not None and _num(args.get(name)) is not None:
        return _num(args.get(name))
    s = h.last_ok
    if s is not None:
        v = _num(s.page.cache_config.get(name.replace("-", "_")))
        if v is not None:
            return v
    if name == "max-num-seqs" and h.latest.max_num_seqs:
        return h.latest.max_num_seqs
    return None


def runbook(
    h: ReplicaHistory,
    now: float,
    t: Thresholds | None = None,
    *,
    finding: Finding | None = None,
    rollouts: Sequence[Rollout] | None = None,
    applied: Mapping[str, float] | None = None,
    capacity: CapacityPlan | None = None,
    logs: Sequence[str] | None = None,
    args: Mapping[str, Any] | None = None,
    incident_start: float | None = None,
    scale: ScaleOut | None = None,
    baselines: Mapping[str, float | None] | None = None,
) -> Runbook:
    """The guided runbook for one replica at `now`.

    rollouts: the workload's revisions (None = unknown); applied: action id -> when it was done;
    args: the engine args the replica runs with now (canonical names), for pre-filled edits;
    incident_start: when the pressure began (default: the kv-pressure finding's `since`);
    scale: the workload's scale-out arithmetic (scaleout.scale_out), for the scale step;
    baselines: the incident's pre-incident latency p95s (`Verification.baselines` of the
    replica it began on), for a replica that replaced it.
    """
    t = t or Thresholds()
    finding = finding or diagnose(h, now, t)
    applied = dict(applied or {})
    if incident_start is None:
        incident_start = finding.since if finding.verdict in (V.KV_PRESSURE, V.OVERLOADED) else None
    steps: list[Step] = []
    branch = ""

    def done(action: str) -> float | None:
        at = applied.get(action)
        if at is None or at > now:
            return None
        if incident_start is not None and at < incident_start - t.burn_window_s:
            return None
        return at

    # 1. node healthy?
    gpu = h.last_ok.gpu if h.last_ok is not None else None
    fault = node_fault_evidence(gpu, t)
    pod = h.last_ok.pod if h.last_ok is not None else None
    if h.last_error is not None and h.last_error.pod is not None:
        pod = h.last_error.pod
    node = clean(pod.node) if pod is not None and pod.node else None
    on_node = f" on node {node}" if node else ""
    if fault:
        steps.append(Step("node", "Node healthy?", "no",
                          f"GPU unhealthy{on_node}: divert to the thermal / GPU-fault runbook; do not tune the server",
                          "drain", "drain the replica off this node", evidence=tuple(fault)))
        branch = "divert"
    elif gpu is None:
        steps.append(Step("node", "Node healthy?", "unknown", "GPU data absent: cannot rule out a sick GPU",
                          evidence=(missing("gpu", "GPU data absent"),)))
    else:
        steps.append(Step("node", "Node healthy?", "yes", "no throttling, ECC or XID errors",
                          evidence=(info("throttle_reasons", ",".join(gpu.throttle_reasons) or "none",
                                         f"throttle reasons: {', '.join(gpu.throttle_reasons) or 'none'}"),)))
    discouraged = bool(fault)

    # 2. OOM-crashing?
    log_oom = [clean(line)[:300] for line in (logs or ()) if log_kind(line) == "oom"]
    oom = pod is not None and (pod.last_termination_reason == "OOMKilled" or pod.last_exit_code == 137)
    gmu = _current_value(h, "gpu-memory-utilization", args)
    if oom or log_oom:
        lower = gmu_policy.lower_for_oom(gmu, t)
        ev = []
        if pod is not None:
            ev.append(info("last_termination", pod.last_termination_reason,
                           f"last termination {clean(pod.last_termination_reason or '-')}, exit "
                           f"{pod.last_exit_code if pod.last_exit_code is not None else '-'}, {pod.restarts} restart(s)"))
        steps.append(Step("oom", "Replica OOM-crashing?", "yes",
                          "CUDA OOM: a sizing failure, not steady preemption; lower gpu-memory-utilization and restart",
                          "edit:gpu_memory_utilization", "lower --gpu-memory-utilization", discouraged,
                          tuple(ev), tuple(log_oom[-5:]), {"gpu-memory-utilization": f"{lower:g}"}))
        branch = branch or "oom"
    elif pod is None and logs is None:
        steps.append(Step("oom", "Replica OOM-crashing?", "unknown", "no pod status or logs to tell",
                          evidence=(missing("pod", "pod status / logs not available"),)))
    else:
        steps.append(Step("oom", "Replica OOM-crashing?", "no", "no OOM kill or CUDA OOM"
                          + (": steady preemption" if finding.verdict == V.KV_PRESSURE else "")))

    # 3. deploy in the burn window?
    ref = incident_start if incident_start is not None else now
    if rollouts is None:
        steps.append(Step("deploy", "Deploy in the burn window?", "unknown", "rollout history not available",
                          evidence=(missing("rollouts", "rollout history not available"),)))
    else:
        suspects = [(r, ch) for r in rollouts if ref - t.burn_window_s <= r.ts <= now
                    for ch in [arg_changes(r.before, r.after)] if any(c.risky for c in ch)]
        if suspects:
            r, ch = max(suspects, key=lambda x: x[0].ts)
            ago = ref - r.ts
            steps.append(Step("deploy", "Deploy in the burn window?", "yes",
                              f"revision {clean(r.revision)} rolled out {abs(ago):.0f} s "
                              f"{'before' if ago >= 0 else 'after'} the incident: roll it back",
                              "rollback", f"roll back {clean(r.workload) or 'the workload'}", discouraged,
                              (info("rollout", r.revision, f"rollout {clean(r.revision)} at {r.ts:.0f}"),),
                              tuple(clean(c.line) for c in ch)))
            branch = branch or "rollback"
        else:
            steps.append(Step("deploy", "Deploy in the burn window?", "no",
                              f"no rollout raising KV demand in the last {t.burn_window_s / 60:.0f} min"))

    # 4-7. mitigation (demand first, then supply, then scale)
    pressured = finding.verdict == "kv-pressure"
    settle = t.recovery_window_s
    d_drain, d_cap = done("drain"), done("edit:max_num_seqs")
    d_head, d_scale = done("edit:gpu_memory_utilization"), done("scale")
    mns = _current_value(h, "max-num-seqs", args)
    cap_suggest: dict[str, str] = {}
    cap_lines: tuple[str, ...] = ()
    if capacity is not None and capacity.suggested_max_num_seqs:
        target = capacity.suggested_max_num_seqs
        if mns:
            target = min(target, int(mns * 0.75))  # the runbook's cut: at least 25 %
        cap_suggest["max-num-seqs"] = str(max(1, target))
        cap_lines = capacity.lines
    elif mns:
        cap_suggest["max-num-seqs"] = str(max(1, int(mns * 0.75)))
        cap_lines = (f"cut max-num-seqs {mns:.0f} by 25 % -> {max(1, int(mns * 0.75))} (emergency-mitigation.md)",)
    steps.append(Step("drain", "Cordon and drain one replica", "done" if d_drain else ("todo" if pressured else "skip"),
                      "drained" if d_drain else "take it out of rotation before changing it (in-flight requests finish "
                      "elsewhere)", "drain", "cordon + drain", discouraged=False))
    steps.append(Step("cap", "Cap concurrency: lower --max-num-seqs / --max-model-len",
                      "done" if d_cap else ("todo" if pressured else "skip"),
                      "capped" if d_cap else "fewer concurrent sequences cut KV demand at once",
                      "edit:max_num_seqs", "edit max-num-seqs", discouraged, details=cap_lines, suggest=cap_suggest))
    still_after_cap = d_cap is not None and now - d_cap >= settle and pressured
    head_suggest = {"enable-prefix-caching": "true", "enable-chunked-prefill": "true"}
    mml = _current_value(h, "max-model-len", args)
    long_ctx = mml is not None and mml >= t.long_context_tokens
    raised = gmu_policy.raise_to(gmu, t, long_ctx)
    at_ceiling = gmu is not None and raised is None
    if raised is not None:
        head_suggest["gpu-memory-utilization"] = f"{raised:g}"
    top = gmu_policy.ceiling(t, long_ctx)
    ceiling_note = (f"; gpu-memory-utilization {gmu:g} is {'at' if abs(gmu - top) < 1e-9 else 'above'} the policy "
                    f"ceiling {top:g} (prevention.md): no raise, scale out next") if at_ceiling and gmu is not None else ""
    steps.append(Step("headroom", "Add KV headroom: raise gpu-memory-utilization, prefix cache, chunked prefill",
                      "done" if d_head else ("todo" if still_after_cap else ("wait" if d_cap and pressured else "skip")),
                      "headroom added" if d_head else (
                          "still pressured after the cap: grow KV supply" if still_after_cap
                          else "after the cap, if still pressured") + ceiling_note,
                      "edit:gpu_memory_utilization", "edit KV headroom", discouraged, suggest=head_suggest))
    still_after_head = d_head is not None and now - d_head >= settle and pressured
    # A queue that persists with no room to raise the cap (typically right after the cap step:
    # preemptions gone, the cap now holds admission) is the runbook's "still pressured": scale out.
    overloaded = finding.verdict == V.OVERLOADED
    # one full data-parallel rank beside ranks with room: more replicas do not help that rank
    one_rank = rank_bound(finding)
    scale_now = (still_after_head or overloaded) and not d_scale and not one_rank
    scale_label = f"scale out to {scale.replicas}" if scale is not None and scale_now else "scale out"
    if d_scale:
        scale_answer = "scaled out"
    elif one_rank:
        scale_answer = ("one data-parallel rank is full while the others have room: rebalance the ranks "
                        "(DP load-balance method, prefix / session affinity); scaling out does not help it")
    elif overloaded:
        # the same case as the finding's own room evidence: "no room" only when it shows none
        room = any(e.signal == "kv_peak" and e.crossed for e in finding.evidence)
        scale_answer = (("KV has room but no cap holds the queue (prefill budget, long prompts): it persists, "
                         if room else "the cap holds admission and KV has no room to raise it: the queue persists, ")
                        + (f"scale out to {scale.replicas} replicas (now {scale.replicas_now})"
                           if scale is not None else "add replicas (arrival rate not measured yet)"))
    elif still_after_head:
        scale_answer = "demand capped and supply maxed, still pressured: add replicas"
    else:
        scale_answer = "last resort, after headroom"
    steps.append(Step("scale", "Scale replicas out", "done" if d_scale else ("todo" if scale_now else "skip"),
                      scale_answer, "scale", scale_label, discouraged=False,
                      details=scale.lines if scale is not None else (),
                      suggest=scale.suggest if scale is not None else {}))

    # 8. verify
    ver = verify(h, now, t, incident_start if incident_start is not None else _last_pressure(h, now, t), baselines)
    steps.append(Step("verify", "Verify: preemptions ~0, KV off the ceiling, queue drained, latency back",
                      "met" if ver.confirmed else "not-met", ver.text,
                      evidence=tuple(Evidence(c.key, c.status, None, "info" if c.met is not None else "missing",
                                              c.status == "met", c.text) for c in ver.criteria)))

    if branch:
        current = {"divert": "node", "oom": "oom", "rollback": "deploy"}[branch]
    elif one_rank and not d_scale:
        branch, current = "rebalance", ("cap" if pressured and not d_cap else "verify")
    elif overloaded and not d_scale:
        branch, current = "scale", "scale"
    elif pressured:
        branch = "mitigate"
        current = next((s.id for s in steps if s.id in ("drain", "cap", "headroom", "scale") and s.status == "todo"),
                       "verify")
    elif any((d_drain, d_cap, d_head, d_scale)) or ver.since is not None:
        branch, current = "verify", "verify"
    else:
        branch, current = "not-kv", "verify"
    return Runbook(h.name, now, finding, tuple(steps), current, branch, ver, discouraged, incident_start, node)


def _last_pressure(h: ReplicaHistory, now: float, t: Thresholds) -> float | None:
    """Start of the last stretch of KV near the ceiling in the retained history (for baselines)."""
    start = None
    in_run = False
    for s in h.scrapes:
        if s.ts > now:
            break
        kv = s.page.value("kv_usage")
        high = kv is not None and kv >= t.kv_high
        if high and not in_run:
            start = s.ts
        in_run = high
    return start

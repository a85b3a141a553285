"""The triage report, the guided runbook and the capacity plan as rich Text.

Plain functions of the core's reports (tui/core/diagnosis), so the screen and the tests draw the
same thing. Every status is a symbol and a word (never colour alone); everything that came from
the network or the cluster (log lines, events, revision names, errors) is escaped with `clean`
and appended as literal Text, never parsed as markup.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

from rich.text import Text

from tui.core.diagnosis.capacity import CapacityPlan
from tui.core.diagnosis.rules import SUMMARY
from tui.core.diagnosis.runbook import Runbook, Step
from tui.core.diagnosis.triage import BAD, MISSING, OK, WARN, TriageReport
from tui.core.model import Evidence
from tui.core.textsafe import clean
from widgets.format import asciify
from widgets.verdict import colour_var, label

# triage item status -> (symbol, ascii symbol, word, palette variable)
TRIAGE_MARK = {
    OK: ("✔", "+", "pass", "success"),
    WARN: ("!", "!", "warn", "warning"),
    BAD: ("✗", "X", "fail", "error"),
    MISSING: ("?", "?", "no data", "text-muted"),
}

# runbook step status -> (symbol, ascii, palette variable); the word is the status itself
STEP_MARK = {
    "unknown": ("?", "?", "text-muted"),
    "todo": ("→", ">", "warning"),
    "done": ("✔", "+", "success"),
    "skip": ("·", "-", "text-muted"),
    "wait": ("…", "~", "text-muted"),
    "met": ("✔", "+", "success"),
    "not-met": ("✗", "X", "error"),
}
# recovery criterion status -> (symbol, palette variable): a tick only for one met on its data
_CRITERION_MARK = {"met": ("✔", "success"), "not-yet": ("…", "warning"), "not-met": ("✗", "error"),
                   "unknown": ("?", "text-muted")}


def asciify_mark(mark: str) -> str:
    return {"✔": "+", "…": "~", "✗": "X"}.get(mark, mark)


# the answer to each question of the flow that means "all right, carry on"
_GOOD_ANSWER = {"node": "yes", "oom": "no", "deploy": "no"}

BRANCH_TEXT = {
    "divert": "node fault: divert to the thermal / GPU-fault runbook",
    "oom": "OOM-crashing: a sizing failure, fix gpu-memory-utilization first",
    "rollback": "deploy in the burn window: roll it back",
    "mitigate": "steady preemption: mitigate step by step",
    "scale": "the cap holds admission and KV has no room to raise it: scale out",
    "verify": "mitigations applied: verify recovery",
    "not-kv": "not KV pressure: the preemption-thrash runbook does not apply",
    "rebalance": "one data-parallel rank full, the others with room: rebalance the ranks (not a scale-out)",
}

# What kvwatch says about a verdict the preemption-thrash flow does not cover, and the keys for it
OTHER_REMEDY = {
    "stalled": (("rollout_restart", "restart the workload (drain first if it still serves)"),
                ("drain", "drain the wedged replica")),
    "concurrency-capped": (("edit_args", "raise --max-num-seqs (KV has headroom)"), ("scale", "scale out")),
    "overloaded": (("scale", "scale out (replica count below)"),),
    "lora-capped": (("edit_args", "raise --max-loras / --max-cpu-loras (adapter slots)"),),
    "compute-bound": (("scale", "scale out if latency is over the SLO"),),
    "node-fault": (("drain", "drain the replica off this node"),),
}

KeyInfo = Callable[[str], "tuple[str | None, str | None]"]  # screen action -> (key, why not offered)


def _style(pal: Mapping[str, str], var: str, extra: str = "") -> str:
    colour = pal.get(var, "")
    if not colour.startswith("#"):  # CSS-only values ("auto 60%") are no rich colour
        colour = "dim" if var == "text-muted" else ""
    return f"{extra} {colour}".strip()


def _evidence_line(t: Text, e: Evidence, ascii: bool, indent: str = "    ") -> None:
    if e.op == "missing":
        t.append(f"{indent}? ", style="dim")
        t.append(clean(e.text) + "\n", style="dim italic")
        return
    mark = ("+ " if ascii else "✔ ") if e.crossed else ("- " if ascii else "· ")
    t.append(indent + mark, style="bold" if e.crossed else "dim")
    t.append(clean(e.text) + "\n", style="bold" if e.crossed else "")


# glyphs of these views that widgets.format.asciify does not know, one-for-one
_ASCII_MORE = str.maketrans({"⚠": "!", "—": "-", "▶": ">", "✗": "X", "●": "*", "○": "o"})


def _finish(t: Text, ascii: bool) -> Text:
    t.rstrip()
    if not ascii:
        return t
    plain = t.plain.translate(_ASCII_MORE)
    t = Text(plain, style=t.style, spans=list(t.spans), no_wrap=t.no_wrap, overflow=t.overflow)
    return asciify(t)


def verdict_head(name: str, verdict: str, since: float | None, now: float, pal: Mapping[str, str],
                 ascii: bool = False) -> Text:
    from widgets.format import ago

    t = Text()
    t.append(label(verdict, ascii=ascii), style=f"bold {pal.get(colour_var(verdict), '')}")
    t.append("  ")
    t.append(clean(name), style="bold")
    if since is not None:
        t.append(f"  since {ago(now - since)} ago", style="dim")
    return t


# -- triage -----------------------------------------------------------------------------------


def triage_text(r: TriageReport, pal: Mapping[str, str], ascii: bool = False) -> Text:
    t = Text()
    f = r.finding
    t.append("Verdict ", style="bold")
    t.append(label(f.verdict, ascii=ascii), style=f"bold {pal.get(colour_var(f.verdict), '')}")
    if f.summary and f.summary != f.verdict:
        t.append(": " + f.summary)
    t.append("\n")
    if r.stage:
        t.append(r.stage + "\n", style=_style(pal, "error" if r.stage.startswith("end-stage") else "warning", "bold"))
    if f.evidence:
        t.append("Evidence for the verdict\n", style="bold")
        for e in f.evidence:
            _evidence_line(t, e, ascii, "  ")
    t.append("Missing evidence: ", style="bold")
    if r.missing:
        t.append(" · ".join(clean(m) for m in r.missing) + "\n", style=_style(pal, "warning"))
    else:
        t.append("none: every step had data\n", style=_style(pal, "success"))
    t.append("\nDiagnostics steps 2-8\n", style="bold underline")
    for item in r.items:
        sym, asym, word, var = TRIAGE_MARK.get(item.status, ("?", "?", item.status, "text-muted"))
        t.append(f" {item.step} ", style="bold")
        t.append(f"{asym if ascii else sym} {word:<7}", style=_style(pal, var, "bold"))
        t.append(" " + item.title, style="bold")
        t.append(": " + clean(item.summary) + "\n")
        for e in item.evidence:
            if e.op == "missing" and item.status == MISSING:
                continue  # the summary already says what is missing
            _evidence_line(t, e, ascii, "      ")
        for d in item.details:
            t.append("      │ " if not ascii else "      | ", style="dim")
            t.append(clean(d) + "\n", style="dim")
    return _finish(t, ascii)


# -- runbook ----------------------------------------------------------------------------------

SCREEN_ACTION = {  # runbook action id -> the mitigation key's screen action (tui/screens/mitigation.py)
    "drain": "drain",
    "edit:max_num_seqs": "edit_args",
    "edit:gpu_memory_utilization": "edit_args",
    "rollback": "rollback",
    "scale": "scale",
}


# The runbook's title follows the verdict: the preemption-thrash flow is what kvwatch guides, but
# a sick GPU or a queue over capacity is not "KV-cache preemption thrash".
_TITLES = {
    "kv-pressure": "KV-cache preemption thrash",
    "node-fault": "GPU node fault: divert (do not tune the server)",
    "overloaded": "queue over capacity: scale out",
    "concurrency-capped": "queue held by the concurrency cap",
    "lora-capped": "queue held by the LoRA adapter slots",
    "stalled": "wedged engine",
    "starting": "pod starting",
    "down": "replica down",
}


def runbook_title(verdict: str) -> str:
    return _TITLES.get(verdict, f"KV-cache preemption thrash (verdict now: {verdict})")


def _suggest_text(suggest: Mapping[str, str]) -> str:
    return ", ".join(f"{clean(k)}={clean(v)}" for k, v in suggest.items())


def _key_text(t: Text, screen_action: str | None, label_: str, keyinfo: KeyInfo, pal: Mapping[str, str],
              discouraged: bool, suggest: Mapping[str, str] | None = None) -> None:
    if screen_action is None:
        return
    key, why = keyinfo(screen_action)
    t.append("      ")
    if discouraged:
        t.append("⚠ DISCOURAGED", style=_style(pal, "error", "bold reverse"))
        t.append(" the GPU is sick: tuning the server cannot fix it  ", style=_style(pal, "error", "bold"))
        if key:
            t.append(f"{key} {label_}", style="dim strike")
        t.append("\n")
        return
    if key is None:
        t.append(f"(no key for {label_} yet)\n", style="dim")
        return
    if why:
        t.append(f"{key} {label_}: not offered ({clean(why)})\n", style="dim")
        return
    t.append(f" {key} ", style=_style(pal, "accent", "bold reverse"))
    t.append(f" {label_}", style="bold")
    if suggest:
        what = "prompt" if screen_action == "scale" else "form"
        t.append(f"  ({what} pre-filled: {_suggest_text(suggest)})", style="dim")
    t.append("\n")


def runbook_text(rb: Runbook, keyinfo: KeyInfo, pal: Mapping[str, str], ascii: bool = False,
                 kv_breached: bool = True) -> Text:
    """`kv_breached`: KV hit the ceiling or preemptions happened in the retained history; when
    not (and the verdict is another one) there is nothing for the verification step to verify."""
    t = Text()
    verdict = rb.finding.verdict
    idle = not kv_breached and verdict not in ("kv-pressure", "overloaded")
    t.append(f"Guided runbook: {runbook_title(verdict)}", style="bold underline")
    if rb.node:
        t.append(f"  ·  node {clean(rb.node)}", style="bold")
    t.append("\n")
    t.append("Branch: ", style="bold")
    t.append(BRANCH_TEXT["not-kv" if idle and rb.branch == "verify" else rb.branch])
    cur = rb.step(rb.current)
    if cur is not None and not (idle and rb.current == "verify"):
        t.append("  ·  act on: ", style="bold")
        t.append(cur.title, style=_style(pal, "accent", "bold"))
    t.append("\n")
    if rb.tuning_discouraged:
        t.append(" ⚠ TUNING DISCOURAGED ", style=_style(pal, "error", "bold reverse"))
        t.append(" the GPU is unhealthy: do not edit engine args; drain the replica off this node and follow the "
                 "thermal / GPU-fault runbook\n", style=_style(pal, "error", "bold"))
    _recovery_text(t, rb, pal, idle)
    # one reason shared by every key (no cluster, read-only, replay) is said once, not per step
    whys = {keyinfo(SCREEN_ACTION[s.action])[1] for s in rb.steps if s.action in SCREEN_ACTION}
    common = next(iter(whys)) if len(whys) == 1 else None
    if common:
        t.append("Mitigation keys not offered: ", style="bold")
        t.append(clean(common) + "\n", style="dim")
        inner = keyinfo
        keyinfo = lambda a: (inner(a)[0], "see above" if inner(a)[1] == common else inner(a)[1])  # noqa: E731
    if rb.branch == "rebalance" or (rb.branch != "divert" and verdict not in ("kv-pressure", "healthy", "unknown")):
        t.append(f"The verdict is {verdict}: ", style="bold")
        # the finding's own advice: it may differ from the verdict's usual one (one full rank)
        t.append(clean(rb.finding.summary or SUMMARY.get(verdict, verdict)) + "\n")
        for action, what in (() if rb.branch == "rebalance" else OTHER_REMEDY.get(verdict, ())):
            _key_text(t, action, what, keyinfo, pal, False)
    t.append("\n")
    for n, s in enumerate(rb.steps, 1):
        _step_text(t, n, s, s.id == rb.current, keyinfo, pal, ascii, idle and s.id == "verify")
    return _finish(t, ascii)


def _recovery_text(t: Text, rb: Runbook, pal: Mapping[str, str], idle: bool) -> None:
    """The verification step's outcome, on top: the one line an SRE waits for."""
    v = rb.verification
    t.append("Recovery: ", style="bold")
    if idle:
        t.append("no KV-pressure breach in the retained history: nothing to recover from\n", style="dim")
        return
    if v.confirmed:
        when = time.strftime("%H:%M:%S", time.localtime(v.confirmed_at)) if v.confirmed_at else ""
        t.append(f" RECOVERY CONFIRMED{' at ' + when if when else ''} ", style=_style(pal, "success", "bold reverse"))
        t.append(" " + clean(v.text), style=_style(pal, "success", "bold"))
    elif v.met:
        t.append(" RECOVERING ", style=_style(pal, "warning", "bold reverse"))
        t.append(" " + clean(v.text))
    else:
        t.append(" NOT RECOVERED ", style=_style(pal, "error", "bold reverse"))
        t.append(" " + clean(v.text).removeprefix("not recovered: "))
    t.append("\n")


def _step_text(t: Text, n: int, s: Step, current: bool, keyinfo: KeyInfo, pal: Mapping[str, str],
               ascii: bool, not_applicable: bool = False) -> None:
    if not_applicable:
        t.append(f" {n} ", style="bold")
        t.append("· n/a    ", style="dim bold")
        t.append(" " + s.title + "\n", style="dim")
        t.append("      nothing to verify: no KV-pressure breach in the retained history\n", style="dim")
        return
    sym, asym, var = STEP_MARK.get(s.status, ("?", "?", "text-muted"))
    if s.id in _GOOD_ANSWER and s.status in ("yes", "no"):
        good = s.status == _GOOD_ANSWER[s.id]
        sym, asym, var = ("✔", "+", "success") if good else ("✗", "X", "error")
    pointer = (">" if ascii else "▶") if current else " "
    t.append(f"{pointer}{n} ", style=_style(pal, "accent", "bold") if current else "bold")
    t.append(f"{asym if ascii else sym} {s.status:<7}", style=_style(pal, var, "bold"))
    t.append(" " + s.title, style="bold" if current else "")
    t.append("\n      " + clean(s.answer) + "\n", style="" if s.status not in ("skip", "wait") else "dim")
    # an unanswered question's answer already says what is missing
    shown = [e for e in s.evidence if s.id != "verify" and not (s.status == "unknown" and e.op == "missing")]
    for e in shown:
        _evidence_line(t, e, ascii, "      ")
    if s.id == "verify":
        for e in s.evidence:  # e.value: the criterion's status (runbook.Criterion.status)
            mark, var = _CRITERION_MARK.get(str(e.value), ("?", "text-muted"))
            style = _style(pal, var)
            t.append(f"      {asciify_mark(mark) if ascii else mark} ", style=style)
            t.append(clean(e.text) + ("  (not yet)" if e.value == "not-yet" else "") + "\n",
                     style=style if e.value != "unknown" else "dim italic")
    if s.id == "deploy" and s.details:
        t.append("      args diff of the rollout:\n", style="bold")
        for d in s.details:
            risky = "(" in d  # ArgChange.line adds "(why)" to the flags the runbook names
            t.append("        " + clean(d) + "\n", style=_style(pal, "error", "bold") if risky else "")
    elif s.status not in ("skip", "done"):  # a step not taken now (or done) keeps its workings out of the way
        for d in s.details:
            t.append("      │ " if not ascii else "      | ", style="dim")
            t.append(clean(d) + "\n", style="dim")
    if s.action:
        _key_text(t, SCREEN_ACTION.get(s.action), s.action_label or s.action, keyinfo, pal, s.discouraged,
                  s.suggest if (current or s.status in ("todo", "yes", "no")) else None)


# -- capacity ---------------------------------------------------------------------------------


def _n(v: float | None, digits: int = 0) -> str:
    if v is None:
        return "unknown"
    return f"{v:,.{digits}f}"


def capacity_text(p: CapacityPlan, pal: Mapping[str, str], keyinfo: KeyInfo | None = None,
                  ascii: bool = False) -> Text:
    t = Text()
    t.append("Capacity planner\n", style="bold underline")
    rows = (
        ("KV capacity", f"{_n(p.capacity_tokens)} tokens per engine" if p.capacity_tokens is not None else "unknown"),
        ("source", p.source or "none"),
        ("max concurrency", f"{p.max_concurrency:.2f}x at max-model-len "
                            f"{_n(p.max_model_len) if p.max_model_len else '(as vLLM reports it)'}"
         if p.max_concurrency is not None else "unknown (needs max-model-len or the kv_cache_max_concurrency label)"),
        ("KV bytes per token", f"{_n(p.bytes_per_token)} B" if p.bytes_per_token else "not computed (no model architecture)"),
        ("tokens per request", f"{_n(p.tokens_per_request)} (p95 prompt + p95 output)"
         if p.tokens_per_request is not None else "unknown (no request-length histograms yet)"),
        ("max-num-seqs", (f"suggested {p.suggested_max_num_seqs}" if p.suggested_max_num_seqs else "no suggestion")
         + (f" (now {p.current_max_num_seqs})" if p.current_max_num_seqs else "")),
    )
    for k, v in rows:
        t.append(f"  {k:<20}", style="bold")
        style = ""
        if k == "max-num-seqs" and p.suggested_max_num_seqs and p.current_max_num_seqs:
            style = _style(pal, "error" if p.current_max_num_seqs > p.suggested_max_num_seqs else "success", "bold")
        t.append(clean(v) + "\n", style=style)
    t.append("\nThe arithmetic\n", style="bold")
    if p.lines:
        for line in p.lines:
            t.append("  " + clean(line) + "\n")
    else:
        t.append("  nothing to compute with yet\n", style="dim")
    if p.notes:
        t.append("\nNotes\n", style="bold")
        for note in p.notes:
            t.append("  ! " + clean(note) + "\n", style=_style(pal, "warning"))
    if p.suggest and keyinfo is not None:
        t.append("\n")
        _key_text(t, "edit_args", "edit engine args", keyinfo, pal, False, p.suggest)
    return _finish(t, ascii)

"""The handler of `kvwatch drain | scale | edit-args | rollout` (see `actions`): plan through the
cluster adapter the keys use, show the plan, confirm, apply through the same gate (read-only,
production typed name, audit log), print the result."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

KINDS = {
    "deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
    "statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
    "daemonset": "DaemonSet", "daemonsets": "DaemonSet", "ds": "DaemonSet",
}


class Usage(Exception):
    """A usage error: exit 2."""


def parse_target(text: str, allow: tuple[str, ...] = ("Deployment", "StatefulSet")) -> tuple[str, str]:
    kind, sep, name = text.partition("/")
    if not sep:
        kind, name = "deployment", text
    k = KINDS.get(kind.lower())
    if k is None or k not in allow or not name:
        raise Usage(f"{text!r}: expected {' or '.join(a.lower() + '/NAME' for a in allow)}")
    return k, name


def parse_sets(sets: list[str]) -> dict[str, str]:
    out = {}
    for s in sets:
        key, eq, val = s.partition("=")
        key = key.strip().lstrip("-")
        if not eq or not key:
            raise Usage(f"--set {s!r}: expected KEY=VALUE, e.g. max-num-seqs=32")
        out[key] = val.strip()
    return out


def _plain(obj: Any) -> Any:
    """Dataclasses and tuples as JSON-ready values."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    return obj


class Output:
    """Human lines on stderr/stdout, or one JSON object on stdout with --json."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.json = bool(args.json)
        self.doc: dict[str, Any] = {"action": None, "target": None, "requests": [], "warnings": [], "refused": None, "result": None}

    def say(self, text: str) -> None:
        from tui.core.textsafe import clean

        print(clean(text, keep_newlines=True), file=sys.stderr if self.json else sys.stdout, flush=True)

    def finish(self, code: int) -> int:
        if self.json:
            print(json.dumps(_plain(self.doc), default=str), flush=True)
        return code


def _ask(prompt: str) -> str:
    """One answer from the terminal; the prompt goes to stderr, never into stdout (with --json,
    stdout is one JSON document)."""
    print(prompt, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip()  # "" at end of input: not confirmed


def _confirm(out: Output, cluster: Any, plan: Any, args: argparse.Namespace) -> str | None:
    """The typed name to apply with, or None when not confirmed (the reason is in out.doc)."""
    name = plan.target.name
    if cluster.needs_typed_name(plan):
        if args.yes:
            if args.confirm != name:
                out.doc["refused"] = f"production context {cluster.context!r}: --yes needs --confirm {name}"
                return None
            return name
        if not sys.stdin.isatty():
            out.doc["refused"] = f"production context {cluster.context!r}: not confirmed (give --yes --confirm {name})"
            return None
        typed = _ask(f"production context {cluster.context}: type {name} to confirm: ")
        if typed != name:
            out.doc["refused"] = "not confirmed"
            return None
        return name
    if args.yes:
        return ""
    if not sys.stdin.isatty():
        out.doc["refused"] = "not confirmed: give --yes to apply without a terminal"
        return None
    if _ask("apply? [y/N] ").lower() not in ("y", "yes"):
        out.doc["refused"] = "not confirmed"
        return None
    return ""


def _show_plan(out: Output, plan: Any) -> None:
    out.say(f"{plan.summary}  (context {plan.context or '-'})")
    if plan.diff:
        out.say(plan.diff)
    for w in plan.warnings:
        out.say(f"warning: {w}")
    for e in plan.errors:
        out.say(f"refused: {e}")


async def _load_of(cluster: Any, namespace: str, pod: str):
    """The drain's load: the pod's running + waiting from a fresh scrape through the cluster."""
    from tui.core.engines import parse_page

    async def load() -> tuple[float, float, float] | None:
        infos = [p for p in await cluster.list_pods(namespace) if p.name == pod]
        if not infos:
            return None
        text = await cluster.fetch_metrics(infos[0])
        at = time.time()
        s = parse_page(text)
        running, waiting = s.value("running"), s.value("waiting")
        if running is None or waiting is None:
            return None
        return (running, waiting, at)

    return load


async def _run_async(args: argparse.Namespace, cluster: Any, out: Output) -> int:
    from tui.core.cluster.base import ClusterError, EditArgsRequest
    from tui.core.cluster.kube.requests import drain_requests, plan_request, record_requests

    ns = cluster.namespace or "default"
    action = args.action
    if action == "rollout" and args.verb == "status":
        kind, name = parse_target(args.target, ("Deployment", "StatefulSet", "DaemonSet"))
        out.doc.update(action="rollout-status", target=f"{kind.lower()}/{name}")
        from tui.core.cluster.rollout import kubectl_verdict

        # kubectl's exit semantics: once (--watch=false) exits 0 unless it is an error; with
        # --timeout it waits for done, and a rollout still going when the time is up exits 1
        deadline = time.monotonic() + max(0.0, args.timeout)
        while True:
            st = await cluster.rollout_status(ns, name, kind)
            verdict = kubectl_verdict(st)
            if verdict != "waiting" or not args.timeout or time.monotonic() >= deadline:
                break
            await asyncio.sleep(min(2.0, max(0.1, deadline - time.monotonic())))
        state, reason = st.state, st.reason
        if verdict == "waiting" and state == "stuck":
            state = "progressing"  # still Progressing for the controller; the reason keeps the hint
        if verdict == "waiting" and args.timeout:
            state, reason = "timeout", f"timed out after {args.timeout:g}s waiting for the rollout: {reason}"
        out.doc["result"] = {"state": state, "reason": reason, "desired": st.desired, "updated": st.updated,
                             "ready": st.ready, "available": st.available}
        out.say(f"{kind.lower()}/{name}: {state}: {reason}")
        return 0 if verdict == "done" or (verdict == "waiting" and not args.timeout) else 1

    if action == "drain":
        plan = await cluster.plan_drain(ns, args.pod, label=args.label, grace_s=args.grace_period)
    elif action == "scale":
        kind, name = parse_target(args.target)
        plan = await cluster.plan_scale(ns, name, args.replicas, kind)
    elif action == "edit":
        kind, name = parse_target(args.target)
        plan = await cluster.plan_edit_args(EditArgsRequest(ns, name, parse_sets(args.sets), kind=kind, container=args.container))
    elif args.verb == "restart":
        kind, name = parse_target(args.target)
        plan = await cluster.plan_restart(ns, name, kind)
    else:
        kind, name = parse_target(args.target)
        plan = await cluster.plan_rollback(ns, name, kind)
    t = plan.target
    out.doc.update(action=plan.action, target=f"{t.kind.lower()}/{t.name}", warnings=list(plan.warnings))
    out.doc["plan"] = {"summary": plan.summary, "diff": plan.diff, "errors": list(plan.errors), "data": dict(plan.data)}
    _show_plan(out, plan)
    if plan.errors or cluster.readonly:
        # the same gate as the keys: it refuses, sends nothing and writes the refusal to the audit log
        if plan.action == "drain":
            msg = "refused"
            async for st in cluster.drain(plan, lambda: None):
                msg = st.message if st.status == "failed" else msg
        else:
            msg = (await cluster.apply(plan)).message
        out.doc["refused"] = msg.removeprefix("refused: ")
        if not plan.errors:  # the plan's own refusals were just shown
            out.say(msg)
        return 1
    may = getattr(cluster, "may", None)
    if may is not None:
        # RBAC first (SelfSubjectAccessReview): a user who may not do it sends no write at all
        perm = await may(ns, plan.action, t.kind if t.kind != "Pod" else None)
        if not perm.allowed:
            out.doc["refused"] = perm.reason
            cluster.record(plan, _refused_result(perm.reason, "forbidden"))
            out.say(f"refused: {perm.reason}")
            return 1
    if args.dry_run:
        try:
            out.doc["requests"] = await drain_requests(cluster, plan) if plan.action == "drain" else [plan_request(plan)]
        except ClusterError as e:
            out.doc["warnings"].append(f"cannot list the requests: {e.message}")
        out.doc["result"] = {"ok": True, "message": "planned (dry run): nothing was sent"}
        out.say("dry run: nothing was sent")
        return 0
    typed = _confirm(out, cluster, plan, args)
    if typed is None:
        cluster.record(plan, _refused_result(out.doc["refused"], "unconfirmed"))
        out.say(f"refused: {out.doc['refused']}")
        return 1
    log: list[dict[str, Any]] = []
    stop = record_requests(cluster.api, log)
    try:
        if plan.action == "drain":
            load = await _load_of(cluster, ns, t.name)
            last = None
            steps = []
            async for st in cluster.drain(plan, load, typed_name=typed or None, poll_s=args.poll,
                                          spare_timeout_s=args.spare_timeout, idle_timeout_s=args.idle_timeout,
                                          force=args.force):
                last = st
                steps.append({"step": st.step, "status": st.status, "message": st.message, "data": dict(st.data)})
                out.say(f"{st.step:<10} {st.status:<9} {st.message}")
            ok = last is not None and (last.step, last.status) == ("done", "ok")
            out.doc["result"] = {"ok": ok, "message": last.message if last else "", "steps": steps,
                                 "pods": {k: last.data.get(k) for k in ("removed", "created", "detached", "replicas")} if ok and last else None}
            if last is not None and last.step == "check" and last.status == "failed":
                out.doc["refused"] = last.message
        else:
            res = await cluster.apply(plan, typed_name=typed or None)
            out.doc["result"] = {"ok": res.ok, "message": res.message, "status": res.status_code}
            out.say(res.message)
            ok = res.ok
            if not ok and str(res.message).startswith("refused"):
                out.doc["refused"] = res.message
    finally:
        stop()
    out.doc["requests"] = log
    return 0 if ok else 1


def _refused_result(message: str, kind: str) -> Any:
    from tui.core.cluster.base import ActionResult

    return ActionResult(False, f"refused: {message}", None, {"kind": kind})


def run(args: argparse.Namespace) -> int:
    from tui.core.cluster.base import ClusterError
    from tui.kube_launch import _connect_or_report

    out = Output(args)
    try:
        if args.action in ("scale", "edit") or (args.action == "rollout"):
            parse_target(args.target, ("Deployment", "StatefulSet", "DaemonSet") if getattr(args, "verb", "") == "status" else ("Deployment", "StatefulSet"))
        if args.action == "edit":
            parse_sets(args.sets)
    except Usage as e:
        print(f"kvwatch: {e}", file=sys.stderr)
        return 2
    cluster = _connect_or_report(args)
    if cluster is None:
        return 2
    try:
        code = asyncio.run(_run_async(args, cluster, out))
    except Usage as e:
        print(f"kvwatch: {e}", file=sys.stderr)
        return 2
    except ClusterError as e:
        out.doc["result"] = {"ok": False, "message": e.message, "status": e.status}
        out.say(f"kvwatch: {e.message}")
        code = 1
    return out.finish(code)

"""The drain (runbook preemption-thrash step 2): spare up, out of rotation, wait idle, remove.

The plan's `mechanism` says how the pod leaves (see `plans.build_drain_plan`): on Kubernetes it
waits until no EndpointSlice lists the pod and judges in-flight only from scrapes taken after
that, then the ReplicaSet removes exactly the target (pod-deletion-cost + scale-down) or it is
evicted (PodDisruptionBudgets honoured; kubectl/pkg/drain evicts too); the simulator deletes.

One orchestration for every cluster: it works only through the `Cluster` interface (reads for
the spare's readiness, plans for each sub-action, `apply_confirmed` because the sub-actions were
confirmed with the drain itself, `record` for the audit log), so the real and the simulated
cluster drain the same way and a future executor can run it unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import TYPE_CHECKING, Any, AsyncGenerator, Awaitable, Callable

from .values import ActionPlan, ActionResult, ClusterError, DrainStep, LoadFn

if TYPE_CHECKING:
    from .base import Cluster

SETTLE_S = 30.0  # how long the accounting waits for the ReplicaSet to act on a scale-back
UNKNOWN_LOAD_S = 30.0  # how long the idle wait goes on without knowing the load before it stops


async def drain(
    cluster: Cluster,
    plan: ActionPlan,
    load: LoadFn,
    *,
    typed_name: str | None = None,
    cancel: asyncio.Event | None = None,
    spare_timeout_s: float = 900.0,
    idle_timeout_s: float = 300.0,
    poll_s: float = 2.0,
    force: bool = False,
) -> AsyncGenerator[DrainStep, None]:
    """Spare up, take the target out of rotation, wait for it to go idle, delete it.

    Yields a DrainStep as each step starts and ends. `load()` returns the target's live
    (running, waiting[, scraped-at unix time]) from its metrics, or None when unknown. Setting
    `cancel` stops at the next poll and puts the target back in rotation if it was taken out;
    on Kubernetes the spare goes too, in the simulator it stays until `plan_restore` is applied
    (the summary step says so). The last step's data lists every pod removed, created or detached.
    """
    t0 = cluster.now()

    def step(name: str, status: str, msg: str, **data: Any) -> DrainStep:
        return DrainStep(name, status, msg, round(cluster.now() - t0, 3), data)

    if cluster.readonly:
        res = ActionResult(False, "refused: read-only; nothing was sent", None, {"kind": "readonly"})
        cluster.record(plan, res)
        yield step("check", "failed", res.message)
        return
    if plan.action != "drain" or plan.errors:
        msg = "refused: " + ("; ".join(plan.errors) if plan.errors else "not a drain plan")
        cluster.record(plan, ActionResult(False, msg))
        yield step("check", "failed", msg)
        return
    if cluster.needs_typed_name(plan) and typed_name != plan.target.name:
        msg = f"refused: production context; type {plan.target.name!r} to confirm"
        cluster.record(plan, ActionResult(False, msg))
        yield step("check", "failed", msg)
        return
    cluster.record(plan, ActionResult(True, "drain started"))
    for w in plan.warnings:
        yield step("check", "warn", w)
    inner = _run(cluster, plan, load, step, cancel, spare_timeout_s, idle_timeout_s, poll_s, force)
    last: DrainStep | None = None
    try:
        async for st in inner:
            last = st
            yield st
    finally:
        await inner.aclose()  # runs its clean-up now, not when garbage-collected
        if last is not None:
            ok = (last.step, last.status) == ("done", "ok")
            cluster.record(plan, ActionResult(ok, f"drain {last.step} {last.status}: {last.message}"))


async def _run(
    cluster: Cluster,
    plan: ActionPlan,
    load: LoadFn,
    step: Callable[..., DrainStep],
    cancel: asyncio.Event | None,
    spare_timeout_s: float,
    idle_timeout_s: float,
    poll_s: float,
    force: bool = False,
) -> AsyncGenerator[DrainStep, None]:
    ns, pod = plan.target.namespace, plan.target.name
    owner: Any = plan.data.get("owner")  # plan data as the planner wrote it (used when `spare`)
    original: Any = plan.data.get("replicas")
    mech = plan.data.get("mechanism", "delete")
    spare = bool(plan.data.get("spare", bool(owner) and isinstance(original, int))) and bool(owner) and isinstance(original, int)
    grace: Any = plan.data.get("grace_s")
    st = {"cordoned": False, "removed": False, "scaled": False}
    selector = ""
    before: set[str] = set()

    def cancelled() -> bool:
        return cancel is not None and cancel.is_set()

    async def spares_go_first() -> None:
        """While the target stays, the pods this drain added get the lowest pod-deletion-cost, so
        the ReplicaSet's next scale-down removes one of them: it ranks pods by age only in log2
        buckets (LogarithmicScaleDown), so between young pods it could pick the target."""
        if st["removed"] or not selector or mech == "delete":
            return
        try:
            spares = [p.name for p in await cluster.list_pods(ns, selector) if p.name not in before and p.name != pod
                      and p.phase != "Terminating"]
        except ClusterError:
            return
        for name in spares:  # without pod-deletion-cost (the simulator) the ReplicaSet's own choice stands
            await _sub_action(cluster, cluster.plan_deletion_cost(ns, name))

    async def uncordon_after_cancel() -> DrainStep:
        if mech == "quarantine":
            await spares_go_first()  # adopted back, the target makes one pod too many
        _, r = await _sub_action(cluster, cluster.plan_cordon(ns, pod, undo=True, label=plan.data.get("label")))
        status = "ok" if r.ok else "failed"
        if r.ok:
            st["cordoned"] = False
        again = " (the ReplicaSet adopts it back and removes one pod to keep its count)" if mech == "quarantine" else ""
        return step("uncordon", status, f"put {pod} back in rotation{again}: {r.message}")

    async def scale_back(why: str) -> DrainStep:
        """The spare was temporary: back to the original count (the spare removed first)."""
        await spares_go_first()
        _, r = await _sub_action(cluster, cluster.plan_scale(ns, owner, original))
        if r.ok:
            st["scaled"] = False
        return step("scale-down", "ok" if r.ok else "failed", f"{why}: deployment/{owner} back to {original} replicas: {r.message}", restore_replicas=None if r.ok else original)

    async def accounting() -> dict[str, Any]:
        """Every pod this drain created or detached, so none is left behind unnoticed."""
        out: dict[str, Any] = {"removed": [pod], "detached": [pod] if mech == "quarantine" else []}
        if selector:
            try:
                # a scale-back's victim is not "created": wait (bounded) until the ReplicaSet has
                # marked it, and count only pods not being deleted
                deadline = cluster.now() + min(idle_timeout_s, SETTLE_S)
                while True:
                    d = await cluster.get_deployment(ns, owner)
                    after = {p.name for p in await cluster.list_pods(ns, selector) if p.phase != "Terminating"}
                    if len(after - {pod}) <= d.replicas or cluster.now() >= deadline:
                        break
                    await cluster.sleep(min(poll_s, 0.5))
                out["created"] = sorted(after - before)
                out["replicas"] = d.replicas
            except ClusterError:
                pass
        return out

    try:
        if owner and mech != "delete":
            try:
                d0 = await cluster.get_deployment(ns, owner)
                selector = ",".join(f"{k}={v}" for k, v in sorted(d0.selector.items()))
                before = {p.name for p in await cluster.list_pods(ns, selector)} if selector else set()
            except ClusterError as e:
                yield step("check", "warn", f"cannot list {owner}'s pods: {e.message}")
        # 1. spare
        if spare:
            try:
                ready_before = (await cluster.get_deployment(ns, owner)).ready
                sp = await cluster.plan_scale(ns, owner, original + 1)
            except ClusterError as e:
                yield step("scale-up", "failed", e.message)
                return
            yield step("scale-up", "running", f"scaling {owner} {original} -> {original + 1} (spare first)")
            r = await cluster.apply_confirmed(sp)
            if not r.ok:
                yield step("scale-up", "failed", r.message, result=r)
                return
            st["scaled"] = True
            legacy = {"restore_replicas": original} if mech == "delete" else {}
            yield step("scale-up", "ok", r.message, **legacy)
            warned_pending = False
            deadline = cluster.now() + spare_timeout_s
            while True:
                if cancelled():
                    if mech == "delete":
                        yield step("cancel", "cancelled", f"cancelled while waiting for the spare; {owner} stays at {original + 1} replicas until restored", restore_replicas=original)
                    else:
                        yield step("cancel", "cancelled", "cancelled while waiting for the spare")
                        yield await scale_back("cancelled")
                    return
                try:
                    d = await cluster.get_deployment(ns, owner)
                except ClusterError as e:
                    yield step("wait-spare", "warn", e.message)
                    d = None
                # one more ready pod than before the scale-up: an unready replica elsewhere must not block it
                if d is not None and d.ready >= ready_before + 1:
                    yield step("wait-spare", "ok", f"spare ready: {d.ready}/{d.replicas} ready")
                    break
                if not warned_pending:
                    why = await cluster.spare_pending(ns, owner)
                    if why:
                        warned_pending = True
                        yield step("wait-spare", "warn", f"spare cannot be scheduled: {why}", pending=why)
                if cluster.now() >= deadline:
                    if mech == "delete":
                        yield step("wait-spare", "failed", f"spare not ready after {spare_timeout_s:.0f}s; target left in rotation", restore_replicas=original)
                    else:
                        yield await scale_back("spare not ready")
                        yield step("wait-spare", "failed", f"spare not ready after {spare_timeout_s:.0f}s; target left in rotation, {owner} back to {original}")
                    return
                yield step("wait-spare", "running", f"waiting for the spare ({d.ready if d else '?'}/{ready_before + 1} ready)")
                await cluster.sleep(poll_s)
        elif mech == "delete":
            yield step("scale-up", "warn", "no owning Deployment: no spare replica is started")

        # 2. out of rotation
        cp, r = await _sub_action(cluster, cluster.plan_cordon(ns, pod, label=plan.data.get("label")))
        if not r.ok:
            if st["scaled"]:
                yield await scale_back("not taken out of rotation")
            yield step("cordon", "failed", r.message)
            return
        st["cordoned"] = True
        yield step("cordon", "ok", f"{pod} out of rotation: {cp.summary if cp else plan.summary}")

        # 3. wait until no EndpointSlice lists it; only scrapes after that moment count
        since: float | None = None
        if mech != "delete":
            deadline = cluster.now() + idle_timeout_s
            while True:
                try:
                    listing = await cluster.route_listing(ns, pod)
                except ClusterError as e:
                    listing = [f"(unreadable: {e.message})"]
                if not listing:
                    since = time.time()  # scrapes carry wall-clock times
                    yield step("endpoints", "ok", f"no EndpointSlice lists {pod} any more")
                    break
                if cancelled() or cluster.now() >= deadline:
                    why = "cancelled" if cancelled() else f"still listed by {', '.join(listing)} after {idle_timeout_s:.0f}s"
                    yield await uncordon_after_cancel()
                    if st["scaled"]:
                        yield await scale_back(why)
                    yield step("endpoints", "cancelled" if cancelled() else "failed", f"{why}; not removed")
                    return
                yield step("endpoints", "running", f"still listed by {', '.join(listing)}")
                await cluster.sleep(poll_s)

        # 4. wait for in-flight requests to finish
        deadline = cluster.now() + idle_timeout_s
        # unknown load for this long (every read failing, or only stale scrapes) ends the wait:
        # an unreadable pod is not an idle one
        unknown_limit = min(idle_timeout_s, UNKNOWN_LOAD_S)
        unknown_since: float | None = None
        why_unknown = "no fresh scrape"
        last: object = None
        while True:
            if cancelled():
                yield step("cancel", "cancelled", "cancelled while waiting for the target to go idle")
                yield await uncordon_after_cancel()
                if st["scaled"] and mech != "delete":
                    yield await scale_back("cancelled")
                return
            try:
                cur = load()
                if inspect.isawaitable(cur):
                    cur = await cur
            except Exception as e:  # noqa: BLE001 - an unreadable metric is "unknown", not a crash
                why_unknown = f"{type(e).__name__}: {e}"
                if last != "error":
                    yield step("wait-idle", "warn", f"cannot read {pod}'s load: {why_unknown}")
                cur, last = None, "error"
            if cur is not None and since is not None and len(cur) > 2 and cur[2] is not None and cur[2] < since:
                cur = None  # a scrape from before the pod left every EndpointSlice says nothing about now
            if cur is None:
                unknown_since = cluster.now() if unknown_since is None else unknown_since
                if cluster.now() - unknown_since >= unknown_limit or cluster.now() >= deadline:
                    if force:
                        yield step("wait-idle", "warn", f"cannot read {pod}'s load ({why_unknown}); forced: removing it with the grace period")
                        break
                    yield await uncordon_after_cancel()
                    if st["scaled"] and mech != "delete":
                        yield await scale_back("load unknown")
                    yield step("wait-idle", "failed", f"cannot read {pod}'s load for {cluster.now() - unknown_since:.0f}s "
                                                      f"({why_unknown}); not removed (force to remove it anyway)")
                    return
            else:
                unknown_since = None
            if cur is not None:
                running, waiting = cur[0], cur[1]
                if running + waiting <= 0:
                    yield step("wait-idle", "ok", f"{pod} is idle (running 0, waiting 0)")
                    break
                if cur != last:
                    yield step("wait-idle", "running", f"{pod}: running {running:g}, waiting {waiting:g}", running=running, waiting=waiting)
                last = cur
            if cluster.now() >= deadline:
                yield step("wait-idle", "warn", f"not idle after {idle_timeout_s:.0f}s; removing it anyway with the grace period")
                break
            await cluster.sleep(poll_s)

        # 5. remove it
        if mech == "delete":
            g = int(grace if grace is not None else 60)
            dp, r = await _sub_action(cluster, cluster.plan_delete_pod(ns, pod, g))
            if not r.ok:
                yield step("delete", "failed", r.message)
                if dp is None:
                    return  # not planned: the clean-up below puts the target back
                yield await uncordon_after_cancel()
                return
            st["removed"] = True
            yield step("delete", "ok", f"deleted {pod} (grace period {g}s)")
            restore = f"; restore {owner} to {original} replicas with the restore key" if owner else ""
            yield step("done", "ok", f"drained {pod}{restore}", restore_replicas=original, owner=owner)
            return
        if mech == "scale-down":
            present = before
            if selector:
                try:
                    present = {p.name for p in await cluster.list_pods(ns, selector) if p.phase != "Terminating"}
                except ClusterError:
                    pass
            _, r = await _sub_action(cluster, cluster.plan_deletion_cost(ns, pod))
            if r.ok:
                # kubectl scale's equivalent; the ReplicaSet deletes the lowest pod-deletion-cost first
                # (pkg/controller/controller_utils.go ActivePodsWithRanks), with the pod's own grace period
                _, r = await _sub_action(cluster, cluster.plan_scale(ns, owner, original))
            if not r.ok:
                yield step("remove", "failed", r.message)
                yield await uncordon_after_cancel()
                if st["scaled"]:
                    yield await scale_back("not removed")
                return
            st["removed"], st["scaled"] = True, False
            which = await _removed_by_scale_down(cluster, ns, pod, selector, present, poll_s, idle_timeout_s)
            if which == pod:
                yield step("remove", "ok", f"deployment/{owner} back to {original}: the ReplicaSet removes {pod} (pod-deletion-cost), with its own grace period")
            elif which is None:
                yield step("remove", "warn", f"deployment/{owner} back to {original}; {pod} is not terminating yet: check which pod the ReplicaSet removes")
            else:
                # pod-deletion-cost ignored (Kubernetes < 1.22, or the PodDeletionCost feature gate off): the target is
                # still there, idle and out of rotation; evicting it lets the ReplicaSet replace it at the same count
                yield step("remove", "warn", f"the ReplicaSet removed {which}, not {pod} (pod-deletion-cost ignored); evicting {pod}")
                _, r = await _sub_action(cluster, cluster.plan_evict(ns, pod, grace))
                if not r.ok:
                    st["removed"] = False
                    yield await uncordon_after_cancel()
                    yield step("evict", "failed", r.message + "; put back in rotation")
                    return
                yield step("evict", "ok", r.message)
        else:
            _, r = await _sub_action(cluster, cluster.plan_evict(ns, pod, grace))
            if not r.ok:
                undo = [await uncordon_after_cancel()]
                if st["scaled"]:
                    undo.append(await scale_back("not evicted"))
                for u in undo:
                    yield u
                put_back = "; put back in rotation" + (f", {owner} back to {original}" if spare else "")
                yield step("evict", "failed", r.message + put_back, pdb_blocked=r.status_code == 429)
                return
            st["removed"] = True
            yield step("evict", "ok", r.message)
            if st["scaled"]:
                yield await scale_back("the spare took its place")
        acct = await accounting()
        created = acct.get("created")
        tail = f"; created {', '.join(created)}" if created else ""
        detached = f"; detached {pod} from its ReplicaSet (its replacement starts)" if mech == "quarantine" else ""
        yield step("done", "ok", f"drained {pod} ({mech}){detached}{tail}", owner=owner, **acct)
    finally:
        if st["cordoned"] and not st["removed"]:
            # closed from outside mid-drain: do not leave a live replica out of rotation
            try:
                await uncordon_after_cancel()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass


async def _removed_by_scale_down(cluster: Cluster, ns: str, pod: str, selector: str, present: set[str], poll_s: float, timeout_s: float) -> str | None:
    """Which pod the ReplicaSet took away after the scale-down: `pod` when it did as asked,
    another name when it ignored pod-deletion-cost, None when nothing is terminating yet."""
    if not selector:
        return pod
    deadline = cluster.now() + min(timeout_s, 60.0)
    while True:
        try:
            pods = {p.name: p for p in await cluster.list_pods(ns, selector)}
        except ClusterError:
            return None
        if pod not in pods or pods[pod].phase == "Terminating":
            return pod
        other = sorted(n for n in present if n != pod and (n not in pods or pods[n].phase == "Terminating"))
        if other:
            return other[0]
        if cluster.now() >= deadline:
            return None
        await cluster.sleep(poll_s)


async def _sub_action(cluster: Cluster, planned: Awaitable[ActionPlan]) -> tuple[ActionPlan | None, ActionResult]:
    """Plan one of the drain's steps and apply it through the gate (it was confirmed with the
    drain itself). The plan is None when planning failed; the result says why."""
    try:
        sub = await planned
    except ClusterError as e:
        return None, e.result()
    return sub, await cluster.apply_confirmed(sub)

"""kmock's KubernetesEmulator, extended with the API-server and controller semantics kvwatch relies on.

kmock 0.8 serves objects from memory but ignores selectors, merges strategic patches as plain
dicts, answers a failed JSON Patch `test` with 500, has no resourceVersion / uid / generation,
accepts stale writes, returns the Deployment from `/scale`, ignores grace periods, runs no
controllers, gives access reviews no status and answers pods/log with the pod JSON. This subclass
keeps kmock's server, object store (`emu.objects`, with history) and DSL, and adds:

- label and field selectors on list and watch; watch from a resourceVersion, 410 when too old,
  DELETED/ADDED when an object stops/starts matching, and `timeoutSeconds`; BOOKMARK events
  (`allowWatchBookmarks`, `emu.bookmark()`), a forced expiry (`emu.expire_watches()`), list paging
  (`limit` / `continue`, 410 for a compacted token);
- resourceVersion on every write, 409 on a stale one (PUT, merge patch, delete preconditions),
  uid, generation (spec changes only) and observedGeneration;
- JSON Patch with 422 on a failed `test`, RFC 7386 merge patch, strategic merge by `name`;
- `/scale` (replicas omitted when 0) and `/status` subresources, server-side dry run, PUT;
- graceful pod deletion (deletionTimestamp, the pod's own grace period, finalizers; the kubelet
  removes it after `shutdown_s` or the grace period, driven by `advance()`);
- the Eviction subresource with PodDisruptionBudgets (policy.py), EndpointSlices (endpoints.py),
  a StatefulSet controller and release/adopt of pods (statefulset.py), an HPA, LeaderWorkerSet and
  KServe InferenceService owners and CRDs served only once installed (owners.py);
- a minimal Deployment + ReplicaSet controller: hashed ReplicaSets with revision annotations,
  RollingUpdate (maxSurge / maxUnavailable) and Recreate, pods whose readiness tests control,
  Pending pods for "no free GPU", conditions including ProgressDeadlineExceeded;
- SelfSubjectAccessReview with configurable denials, pods/log text (current and previous), the
  pod proxy for /metrics, events, namespaces;
- a request log (`emu.calls`) so tests assert the exact requests sent, and injected faults.
Each real behaviour carries a one-line comment naming the Kubernetes source that defines it.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as _dt
import hashlib
import json
import re
import time
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
from kmock._internal import rendering

from .common import (
    CRDS,
    GPU_PENDING,
    HASH,
    KINDS,
    PLURAL,
    REVISION,
    WORKLOADS,
    Call,
    Fault,
    _resolve_int_or_percent,
    err,
    field_match,
    label_match,
    merge_patch,
    res,
    strategic_merge,
    is_active,
)
from .endpoints import EndpointSliceMixin
from .owners import OwnersMixin
from .policy import PolicyMixin
from .statefulset import StatefulSetMixin

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
# k8s.io/apiserver pkg/storage/etcd3 (errors for a compacted continue token), reason Expired, code 410
CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the "
    "continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with "
    "the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)
BOOKMARK_BEFORE_TIMEOUT_S = 2.0  # k8s.io/apiserver pkg/storage/cacher cacheWatcher.nextBookmarkTime: deadline - 2s


def _expired(rv: Any) -> dict:
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "code": 410, "reason": "Expired", "message": f"too old resource version: {rv}"}}


# ---------------------------------------------------------------------------------------------


@attrs.define(kw_only=True)
class KubeEmulator(PolicyMixin, EndpointSliceMixin, StatefulSetMixin, OwnersMixin, kmock.KubernetesEmulator):
    """See the module docstring. Tests drive it through the official client over real HTTP."""

    now: float = attrs.field(factory=lambda: 1_750_000_000.0)  # emulated wall clock (unix s)
    pod_start: str = "ready"  # new pods: "ready", "loading" (Running, not Ready), "unschedulable"
    controllers: bool = True  # run the Deployment/ReplicaSet controller after each write
    watch_default_timeout: float = 5.0
    default_allow: bool = True
    denied: set = attrs.field(factory=set)  # {(verb, group, resource, subresource)}
    pod_logs: dict = attrs.field(factory=dict)  # (ns, pod, container|None, previous) -> text
    pod_metrics: dict = attrs.field(factory=dict)  # (ns, pod) -> text or callable() -> text
    faults: list = attrs.field(factory=list)
    calls: list = attrs.field(factory=list)
    deleted: list = attrs.field(factory=list)  # (ns, pod, grace seconds) of every pod deletion
    _rv: int = attrs.field(default=100, init=False)
    _seq: int = attrs.field(default=0, init=False)
    _log: list = attrs.field(factory=list, init=False)  # (rv, plural, type, obj) for watch replay
    _log_floor: int = attrs.field(default=100, init=False)  # watches older than this get 410
    _watchers: list = attrs.field(factory=list, init=False)
    _progress: dict = attrs.field(factory=dict, init=False)
    # seconds a pod's containers take to exit after SIGTERM; None: they ignore it and are killed when the grace period ends
    shutdown_s: float | None = 0.0
    # run the StatefulSet controller (off: StatefulSets keep the status a test writes, as with no controller running)
    statefulset_controller: bool = False
    proxy_delay: float = 0.0  # seconds each pod-proxy request takes (a slow /metrics page)
    proxy_inflight: int = 0
    proxy_inflight_max: int = 0  # the most pod-proxy requests open at once
    identity: str = "oidc:alice@example.com"  # the user SelfSubjectReview reports (not the kubeconfig entry's name)
    crds: set = attrs.field(factory=set)  # installed custom resources (plurals); others answer 404
    bearer: str | None = None  # when set, only "Authorization: Bearer <bearer>" is authenticated; anything else gets 401
    _sts_templates: dict = attrs.field(factory=dict, init=False)  # (ns, set, revision) -> pod template
    _hpa_synced: dict = attrs.field(factory=dict, init=False)  # HPA uid -> last sync (emulated clock)
    _stop_at: dict = attrs.field(factory=dict, init=False)  # (ns, pod) -> when the kubelet removes it

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        # Our semantics run before kmock's own fallbacks, after any reaction a test declares.
        (self.fallback ** 1) << self._emulate

    # ---- plumbing: request log, faults, and paths kmock cannot parse ----

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body_bytes = await raw_request.read()
        try:
            body = json.loads(body_bytes) if body_bytes else None
        except ValueError:
            body = body_bytes.decode("utf-8", "replace")
        self.calls.append(Call(raw_request.method, raw_request.path, dict(raw_request.query), raw_request.headers.get("Content-Type"), body))
        if self.bearer is not None and raw_request.headers.get("Authorization") != f"Bearer {self.bearer}":
            # k8s.io/apiserver pkg/endpoints/filters/authentication.go: no authenticator accepts the credentials -> 401 Unauthorized
            return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"}, status=401)
        for f in self.faults:
            if (f.method is None or f.method == raw_request.method) and f.path.search(raw_request.path):
                if f.times is not None and f.hits >= f.times:
                    continue
                f.hits += 1
                if f.delay:
                    await asyncio.sleep(f.delay)
                return aiohttp.web.json_response(
                    {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": f.status, "reason": "Injected", "message": f.message},
                    status=f.status,
                )
        if raw_request.method == "GET" and raw_request.path.rstrip("/") == "/api/v1/namespaces":
            return aiohttp.web.json_response(self._list_namespaces())  # kmock's path parser fails here
        if "/proxy" not in raw_request.path:
            return await super().__call__(raw_request)
        self.proxy_inflight += 1
        self.proxy_inflight_max = max(self.proxy_inflight_max, self.proxy_inflight)
        try:
            if self.proxy_delay:
                await asyncio.sleep(self.proxy_delay)
            return await super().__call__(raw_request)
        finally:
            self.proxy_inflight -= 1

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        # Skip KubernetesEmulator._handle: it mutates objects before any reaction runs.
        return await kmock.RawHandler._handle(self, request)

    def fail(self, method: str | None, path: str, status: int = 500, message: str = "injected failure", *, delay: float = 0.0, times: int | None = None) -> Fault:
        f = Fault(method, re.compile(path), status, message, delay, times)
        self.faults.append(f)
        return f

    def mutating_calls(self) -> list[Call]:
        return [c for c in self.calls if c.mutating]

    # ---- store ----

    def _key(self, plural: str, ns: str | None, name: str) -> tuple:
        return (res(plural), ns if KINDS[plural][3] else None, name)

    def get(self, plural: str, ns: str | None, name: str) -> dict | None:
        key = self._key(plural, ns, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return copy.deepcopy(self.objects[key].raw)

    def items(self, plural: str, ns: str | None = None) -> list[dict]:
        out = []
        for (r, ons, _), obj in list(self.objects.items()):
            if r == res(plural) and not obj.deleted and (ns is None or ons == ns):
                out.append(copy.deepcopy(obj.raw))
        return out

    def _stamp(self) -> str:
        return _dt.datetime.fromtimestamp(self.now, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _write(self, plural: str, obj: dict, typ: str, *, notify: bool = True) -> dict:
        meta = obj.setdefault("metadata", {})
        ns, name = meta.get("namespace"), meta["name"]
        key = self._key(plural, ns, name)
        old = self.get(plural, ns, name)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        g, v, kind, _ = KINDS[plural]
        obj.setdefault("apiVersion", f"{g}/{v}" if g else v)
        obj.setdefault("kind", kind)
        if typ == "DELETED":
            self.objects[key].delete()
        elif key in self.objects:
            self.objects[key].history.append(copy.deepcopy(obj))
        else:
            self.objects[key] = copy.deepcopy(obj)
        snapshot = copy.deepcopy(obj)
        self._log.append((self._rv, plural, typ, snapshot))
        if len(self._log) > 5000:
            self._log_floor = self._log[1000][0]
            del self._log[:1000]
        if notify:
            for w in list(self._watchers):
                w.offer(plural, typ, old, snapshot)
        return snapshot

    def add(self, obj: dict) -> dict:
        """Create an object as a client would (metadata filled in), without a request."""
        plural = PLURAL[obj["kind"]]
        return self._create(plural, obj.get("metadata", {}).get("namespace"), copy.deepcopy(obj), reconcile=True)

    def _create(self, plural: str, ns: str | None, obj: dict, reconcile: bool = True, dry: bool = False) -> dict:
        meta = obj.setdefault("metadata", {})
        if KINDS[plural][3]:
            meta["namespace"] = ns or meta.get("namespace") or "default"
        if not meta.get("name"):
            if meta.get("generateName"):
                self._seq += 1
                meta["name"] = f"{meta['generateName']}{self._seq:05x}"
            else:
                raise err(422, "Invalid", f"{KINDS[plural][2]} is invalid: metadata.name: Required value")
        if self.get(plural, meta.get("namespace"), meta["name"]) is not None:
            raise err(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        self._seq += 1
        meta.setdefault("uid", f"uid-{self._seq:06d}")
        meta.setdefault("creationTimestamp", self._stamp())
        if plural in WORKLOADS:
            meta["generation"] = 1
            obj.setdefault("status", {})
        if dry:
            meta["resourceVersion"] = str(self._rv)
            return obj
        out = self._write(plural, obj, "ADDED")
        if reconcile:
            self.reconcile()
            out = self.get(plural, meta.get("namespace"), meta["name"]) or out
        return out

    def _update(self, plural: str, old: dict, new: dict, *, status_only: bool = False, dry: bool = False) -> dict:
        om, nm = old["metadata"], new.setdefault("metadata", {})
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if nm.get(k) != om.get(k):
                if k in ("uid", "creationTimestamp") and k not in nm:
                    nm[k] = om.get(k)
                    continue
                raise err(422, "Invalid", f"{KINDS[plural][2]} {om['name']!r} is invalid: metadata.{k}: field is immutable")
        if status_only:
            keep = copy.deepcopy(old)
            keep["status"] = new.get("status", {})
            new = keep
        elif "status" in old and plural in WORKLOADS + ("pods",):
            new["status"] = copy.deepcopy(old["status"])  # the main resource ignores status
        if plural in WORKLOADS:
            nm["generation"] = om.get("generation", 1) + (1 if new.get("spec") != old.get("spec") else 0)
        if dry:
            nm["resourceVersion"] = om.get("resourceVersion")
            return new
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds"):  # set only by DELETE
            if k in om:
                nm[k] = om[k]
            else:
                nm.pop(k, None)
        # registry/store.go shouldDeleteDuringUpdate: the last finalizer removed after the grace period ends -> gone
        if om.get("deletionTimestamp") and not nm.get("finalizers") and om.get("deletionGracePeriodSeconds", 0) == 0:
            out = self._write(plural, new, "DELETED")
            self.reconcile()
            return out
        out = self._write(plural, new, "MODIFIED")
        self.reconcile()
        return self.get(plural, nm.get("namespace"), nm["name"]) or out

    def _pod_grace(self, pod: dict, grace: int | None) -> int:
        # k8s.io/kubernetes pkg/registry/core/pod/strategy.go CheckGracefulDelete: default = spec.terminationGracePeriodSeconds
        # (defaulted to 30 on create); unscheduled or finished pods go at once
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        if not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            grace = 0
        return 1 if grace < 0 else grace

    def _delete(self, plural: str, obj: dict, grace: int | None, dry: bool = False) -> dict:
        meta = obj["metadata"]
        out = copy.deepcopy(obj)
        if plural == "pods":
            grace = self._pod_grace(obj, grace)
            old = meta.get("deletionGracePeriodSeconds")
            if old is not None and grace >= old:  # a second DELETE may only shorten the grace period
                return out
        # k8s.io/apiserver pkg/registry/rest/delete.go BeforeDelete: deletionTimestamp = now + grace period
        out["metadata"]["deletionTimestamp"] = _dt.datetime.fromtimestamp(self.now + (grace or 0), _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if grace is not None:
            out["metadata"]["deletionGracePeriodSeconds"] = grace
        if dry:
            return out
        if plural == "pods":
            self.deleted.append((meta.get("namespace"), meta["name"], grace))
        # k8s.io/apiserver pkg/registry/generic/registry/store.go: finalizers or a grace period keep the object (Terminating)
        if meta.get("finalizers") or (plural == "pods" and grace):
            self._write(plural, out, "MODIFIED")
            if plural == "pods":
                stop = grace if self.shutdown_s is None else min(grace or 0, self.shutdown_s)
                self._stop_at[(meta.get("namespace"), meta["name"])] = self.now + stop
            self.reconcile()
            return out
        self._write(plural, out, "DELETED")
        if plural == "deployments":  # garbage-collect owned ReplicaSets and pods
            for rs in self._owned("replicasets", meta.get("namespace"), meta["uid"]):
                self._delete("replicasets", rs, 0)
        if plural == "replicasets":
            for p in self._owned("pods", meta.get("namespace"), meta["uid"]):
                self._delete("pods", p, 0)
        self.reconcile()
        return out

    # ---- request dispatch ----

    async def _emulate(self, request: rendering.Request) -> Any:
        r = request.resource
        if r is None or r.plural is None:
            raise NotImplementedError  # discovery etc.: kmock's own fallbacks
        plural, ns, name, sub = r.plural, request.namespace, request.name, request.subresource
        method = request.method.value
        params = request.params
        dry = params.get("dryRun") == "All"
        if plural == "selfsubjectreviews" and method == "POST":
            # authentication.k8s.io/v1 SelfSubjectReview: the authenticated user, as the API server saw the credentials
            return rendering.Response(status=201, payload={**(request.data or {}), "status": {"userInfo": {"username": self.identity, "groups": ["system:authenticated"]}}})
        if plural == "selfsubjectaccessreviews" and method == "POST":
            return rendering.Response(status=201, payload=self._access_review(request.data or {}))
        if plural not in KINDS or (plural in CRDS and plural not in self.crds):
            raise kmock.KubernetesResourceNotFoundError()
        kind = KINDS[plural][2]
        if plural == "pods" and sub == "log" and method == "GET":
            return self._pod_log(ns, name, params)
        if plural == "pods" and name and sub and sub.startswith("proxy"):
            return self._proxy(ns, name, sub)
        if plural == "pods" and sub == "eviction" and method == "POST":
            return self._evict(ns, name, request.data, dry)
        if method == "GET" and params.get("watch") in ("true", "True", "1"):
            return self._watch(plural, ns, name, params)
        if method == "GET" and name is None:
            return self._list(plural, ns, params)
        if method == "POST" and name is None:
            return rendering.Response(status=201, payload=self._create(plural, ns, copy.deepcopy(request.data or {}), dry=dry))
        obj = self.get(plural, ns, name) if name else None
        if obj is None:
            raise err(404, "NotFound", f'{plural}{"." + KINDS[plural][0] if KINDS[plural][0] else ""} "{name}" not found', name=name, kind=plural)
        if method == "GET":
            return self._to_scale(obj) if sub == "scale" else obj
        if method == "DELETE":
            return self._serve_delete_req(plural, obj, request, dry)
        if method in ("PATCH", "PUT"):
            return self._serve_write(plural, kind, obj, request, sub, dry)
        raise err(405, "MethodNotAllowed", f"{method} is not supported here")

    def _list(self, plural: str, ns: str | None, params: dict) -> dict:
        items = [
            o
            for o in self.items(plural, ns)
            if label_match(params.get("labelSelector"), o["metadata"].get("labels") or {})
            and field_match(params.get("fieldSelector"), o)
        ]
        g, v, kind, _ = KINDS[plural]
        meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
        # k8s.io/apimachinery meta/v1 ListOptions Limit/Continue: chunks in key order, an opaque token with the list's resourceVersion
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        if params.get("continue"):
            try:
                tok = json.loads(base64.urlsafe_b64decode(params["continue"]))
            except ValueError:
                raise err(400, "BadRequest", "continue key is not valid: illegal base64 data") from None
            if tok["rv"] < self._log_floor:  # the revision was compacted away
                raise err(410, "Expired", CONTINUE_EXPIRED)
            meta["resourceVersion"] = str(tok["rv"])
            items = [o for o in items if ((o["metadata"].get("namespace") or ""), o["metadata"]["name"]) > tuple(tok["start"])]
        limit = int(params.get("limit") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            tok = {"v": "meta.k8s.io/v1", "rv": int(meta["resourceVersion"]), "start": [last.get("namespace") or "", last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(tok).encode()).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return {"apiVersion": f"{g}/{v}" if g else v, "kind": f"{kind}List", "metadata": meta, "items": items}

    def _list_namespaces(self) -> dict:
        names = {o["metadata"]["name"] for o in self.items("namespaces")}
        for (_r, ns, _), obj in list(self.objects.items()):
            if ns and not obj.deleted:
                names.add(ns)
        items = [{"metadata": {"name": n}, "status": {"phase": "Active"}} for n in sorted(names)]
        return {"apiVersion": "v1", "kind": "NamespaceList", "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _serve_delete_req(self, plural: str, obj: dict, request: rendering.Request, dry: bool) -> dict:
        body = request.data if isinstance(request.data, dict) else {}
        pre = body.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"].get("uid"):
            raise err(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {obj['metadata'].get('uid')}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"].get("resourceVersion"):
            raise err(409, "Conflict", "Precondition failed: resourceVersion mismatch")
        grace = request.params.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
        return self._delete(plural, obj, int(grace) if grace is not None else None, dry)

    def _serve_write(self, plural: str, kind: str, obj: dict, request: rendering.Request, sub: str | None, dry: bool) -> dict:
        ctype = (request.headers.get("Content-Type") or "").split(";")[0].strip()
        data = request.data
        base = self._to_scale(obj) if sub == "scale" else obj
        if request.method.value == "PUT":
            if not isinstance(data, dict):
                raise err(400, "BadRequest", "the body of the request was in an unknown format")
            rv = (data.get("metadata") or {}).get("resourceVersion")
            if rv and rv != obj["metadata"]["resourceVersion"]:
                raise self._conflict(plural, obj)
            new = copy.deepcopy(data)
        elif ctype == "application/json-patch+json":
            if not isinstance(data, list):
                raise err(400, "BadRequest", "json patch must be a list of operations")
            self._json_patch_tests(base, data)
            try:
                new = jsonpatch.apply_patch(copy.deepcopy(base), data)
            except jsonpatch.JsonPatchTestFailed as e:
                raise err(422, "Invalid", f"the server rejected our request due to an error in our request: {e}") from None
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
                raise err(422, "Invalid", f"the server rejected our request due to an error in our request: {e}") from None
        elif ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(data, dict):
                raise err(400, "BadRequest", "merge patch must be an object")
            rv = (data.get("metadata") or {}).get("resourceVersion")
            if rv and rv != obj["metadata"]["resourceVersion"]:
                raise self._conflict(plural, obj)
            fn = merge_patch if ctype == "application/merge-patch+json" else strategic_merge
            new = fn(base, data)
        else:
            raise err(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {ctype!r})")
        if sub == "scale":
            replicas = (new.get("spec") or {}).get("replicas", 0)  # omitted means 0 (omitempty)
            if not isinstance(replicas, int) or replicas < 0:
                raise err(422, "Invalid", f"Scale.autoscaling \"{obj['metadata']['name']}\" is invalid: spec.replicas: Invalid value: {replicas!r}")
            upd = copy.deepcopy(obj)
            upd["spec"]["replicas"] = replicas
            out = self._update(plural, obj, upd, dry=dry)
            return self._to_scale(out)
        if plural in ("deployments", "statefulsets") and sub != "status":
            r = (new.get("spec") or {}).get("replicas")
            if r is not None and (not isinstance(r, int) or r < 0):
                raise err(422, "Invalid", f"{kind} is invalid: spec.replicas: Invalid value")
        return self._update(plural, obj, new, status_only=sub == "status", dry=dry)

    @staticmethod
    def _json_patch_tests(doc: dict, ops: list) -> None:
        """`test` operations fail as the API server's JSON Patch library words it (a missing member included)."""
        # gopkg.in/evanphx/json-patch.v4 patch.go test(): errors.Wrapf(ErrTestFailed, "testing value %s failed", path)
        for op in ops:
            if not isinstance(op, dict) or op.get("op") != "test":
                continue
            path = op.get("path", "")
            parent, _, _ = path.rpartition("/")
            try:
                jsonpointer.resolve_pointer(doc, parent)
            except jsonpointer.JsonPointerException:
                raise err(422, "Invalid", f"the server rejected our request due to an error in our request: test operation does not apply: is missing path: {path}") from None
            if jsonpointer.resolve_pointer(doc, path, None) != op.get("value"):
                raise err(422, "Invalid", f"the server rejected our request due to an error in our request: testing value {path} failed: test failed")

    def _conflict(self, plural: str, obj: dict) -> kmock.KubernetesError:
        g = KINDS[plural][0]
        return err(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {plural}{"." + g if g else ""} "{obj["metadata"]["name"]}": '
            "the object has been modified; please apply your changes to the latest version and try again",
        )

    def _to_scale(self, obj: dict) -> dict:
        meta = obj["metadata"]
        sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")},
            # k8s.io/api autoscaling/v1 ScaleSpec: Replicas int32 `json:"replicas,omitempty"` - 0 is left out
            "spec": {"replicas": n} if (n := (obj.get("spec") or {}).get("replicas", 1)) else {},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0), "selector": ",".join(f"{k}={v}" for k, v in sorted(sel.items()))},
        }

    # ---- watch ----

    def _watch(self, plural: str, ns: str | None, name: str | None, params: dict) -> Any:
        emu = self
        sel, fsel = params.get("labelSelector"), params.get("fieldSelector")
        if name:
            fsel = f"metadata.name={name}" + (f",{fsel}" if fsel else "")
        timeout = float(params.get("timeoutSeconds") or self.watch_default_timeout)
        rv = params.get("resourceVersion")
        bookmarks = params.get("allowWatchBookmarks") in ("true", "True", "1")
        g, v, kind, _ = KINDS[plural]

        def bookmark() -> dict:
            # meta/v1 WatchEvent BOOKMARK: an object of the watched kind carrying only metadata.resourceVersion
            return {"type": "BOOKMARK", "object": {"apiVersion": f"{g}/{v}" if g else v, "kind": kind, "metadata": {"resourceVersion": str(emu._rv)}}}

        def matches(o: dict | None) -> bool:
            return (
                o is not None
                and (ns is None or o["metadata"].get("namespace") == ns)
                and label_match(sel, o["metadata"].get("labels") or {})
                and field_match(fsel, o)
            )

        class Watcher:
            def __init__(self) -> None:
                self.q: asyncio.Queue = asyncio.Queue()
                self.bookmarks = bookmarks
                self.bookmark = bookmark

            def offer(self, p: str, typ: str, old: dict | None, new: dict) -> None:
                if p != plural:
                    return
                was, now = matches(old), matches(new)
                if typ == "DELETED":
                    if was or matches(new):
                        self.q.put_nowait({"type": "DELETED", "object": new})
                elif now:
                    self.q.put_nowait({"type": "MODIFIED" if was and typ != "ADDED" else "ADDED", "object": new})
                elif was:
                    self.q.put_nowait({"type": "DELETED", "object": new})

        async def stream():
            yield b""  # send the headers now, as an API server does
            w = Watcher()
            if rv and rv != "0":
                if int(rv) < emu._log_floor:
                    yield _expired(rv)
                    return
                for erv, p, typ, obj in emu._log:
                    if erv > int(rv) and p == plural and matches(obj):
                        w.q.put_nowait({"type": typ, "object": obj})
            else:
                for o in emu.items(plural, ns):
                    if matches(o):
                        w.q.put_nowait({"type": "ADDED", "object": o})
            emu._watchers.append(w)
            deadline = time.monotonic() + timeout
            pre_timeout = deadline - BOOKMARK_BEFORE_TIMEOUT_S if bookmarks else None
            try:
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    if pre_timeout is not None and time.monotonic() >= pre_timeout:
                        pre_timeout = None
                        yield bookmark()
                        continue
                    try:
                        wait = left if pre_timeout is None else max(0.0, pre_timeout - time.monotonic())
                        ev = await asyncio.wait_for(w.q.get(), wait)
                    except asyncio.TimeoutError:
                        continue
                    if ev is None:  # closed by expire_watches()
                        return
                    yield ev
            finally:
                if w in emu._watchers:
                    emu._watchers.remove(w)

        return stream()

    # ---- access reviews, logs, proxy, events ----

    def deny(self, verb: str, resource: str, subresource: str = "", group: str | None = None) -> None:
        g = group if group is not None else KINDS.get(resource, ("",))[0]
        self.denied.add((verb, g, resource, subresource))

    def _access_review(self, body: dict) -> dict:
        attrs_ = ((body.get("spec") or {}).get("resourceAttributes")) or {}
        key = (attrs_.get("verb"), attrs_.get("group") or "", attrs_.get("resource"), attrs_.get("subresource") or "")
        allowed = self.default_allow and key not in self.denied
        reason = "" if allowed else f"user cannot {key[0]} {key[2]}{'/' + key[3] if key[3] else ''} (emulated RBAC)"
        out = copy.deepcopy(body)
        out["status"] = {"allowed": allowed, "reason": reason} | ({} if allowed else {"denied": True})
        return out

    def _pod_log(self, ns: str, name: str, params: dict) -> bytes:
        pod = self.get("pods", ns, name)
        if pod is None:
            raise err(404, "NotFound", f'pods "{name}" not found')
        container = params.get("container")
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        if container is None and len(names) > 1:
            raise err(400, "BadRequest", f"a container name must be specified for pod {name}, choose one of: {names}")
        container = container or (names[0] if names else None)
        previous = params.get("previous") in ("true", "True", "1")
        text = self.pod_logs.get((ns, name, container, previous))
        if text is None and previous:
            raise err(400, "BadRequest", f'previous terminated container "{container}" in pod "{name}" not found')
        lines = (text or "").splitlines(keepends=True)
        if params.get("tailLines"):
            lines = lines[-int(params["tailLines"]) :]
        return "".join(lines).encode()

    def _proxy(self, ns: str, name: str, sub: str) -> bytes:
        pod_name, _, port = name.partition(":")
        if self.get("pods", ns, pod_name) is None:
            raise err(404, "NotFound", f'pods "{pod_name}" not found')
        page = self.pod_metrics.get((ns, pod_name))
        if page is None:
            raise err(503, "ServiceUnavailable", f"error trying to reach service: dial tcp 10.0.0.1:{port or 80}: connect: connection refused")
        return (page() if callable(page) else page).encode()

    def bookmark(self) -> None:
        """Send a BOOKMARK now to every watch that allowed them (the real server does every ~minute)."""
        for w in list(self._watchers):
            if w.bookmarks:
                w.q.put_nowait(w.bookmark())

    def expire_watches(self) -> None:
        """Compact history: open watches end with 410 Gone; resuming from or continuing at any older revision gets 410."""
        self._rv += 1  # history moves on, then is compacted up to now: a list taken after this can be watched from
        self._log_floor = self._rv
        self._log.clear()
        for w in list(self._watchers):
            w.q.put_nowait(_expired(self._rv))
            w.q.put_nowait(None)

    def install_crd(self, *plurals: str) -> None:
        """Install custom resources: served and listed in discovery from now on."""
        self.crds.update(plurals)

    def _get_resources(self) -> list:
        # discovery (/apis): a custom resource's group appears only once its CRD is installed
        out = [r for r in super()._get_resources() if r.plural not in CRDS or r.plural in self.crds]
        return out + [res(p) for p in self.crds if res(p) not in out]

    def add_event(self, ns: str, reason: str, message: str, *, kind: str = "Pod", name: str = "x", type: str = "Normal", ts: float | None = None, count: int = 1) -> dict:
        self._seq += 1
        stamp = _dt.datetime.fromtimestamp(ts if ts is not None else self.now, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._create(
            "events",
            ns,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{self._seq:x}", "namespace": ns},
                "involvedObject": {"kind": kind, "name": name, "namespace": ns},
                "reason": reason,
                "message": message,
                "type": type,
                "count": count,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
            },
            reconcile=False,
        )

    # ---- pods under test control ----

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.reconcile()

    def _pod_status(self, pod: dict, mode: str) -> dict:
        containers = pod["spec"].get("containers") or []
        stamp = self._stamp()
        if mode == "unschedulable":
            return {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": GPU_PENDING, "lastTransitionTime": stamp}],
            }
        ready = mode == "ready"
        self._seq += 1
        return {
            "phase": "Running",
            "podIP": f"10.0.{self._seq // 250}.{self._seq % 250 + 1}",
            "startTime": stamp,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
                {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
                {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": stamp},
                {"type": "Ready", "status": str(ready), "lastTransitionTime": stamp},
            ],
            "containerStatuses": [
                {"name": c["name"], "ready": ready, "restartCount": 0, "image": c.get("image", ""), "state": {"running": {"startedAt": stamp}}}
                for c in containers
            ],
        }

    def set_ready(self, ns: str, name: str, ready: bool = True) -> None:
        pod = self.get("pods", ns, name)
        assert pod is not None, name
        mode = "ready" if ready else "loading"
        if pod["status"].get("phase") == "Pending" or not pod["status"].get("containerStatuses"):
            pod["status"] = self._pod_status(pod, mode)
            pod["spec"].setdefault("nodeName", "gpu-node-1")
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["status"] = str(ready)
        for cs in pod["status"].get("containerStatuses") or []:
            cs["ready"] = ready
        self._write("pods", pod, "MODIFIED")
        self.reconcile()

    def ready_all(self, ns: str) -> list[str]:
        names = []
        for p in self.items("pods", ns):
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []):
                self.set_ready(ns, p["metadata"]["name"])
                names.append(p["metadata"]["name"])
        return names

    def crash(self, ns: str, name: str, reason: str = "OOMKilled", exit_code: int = 137) -> None:
        pod = self.get("pods", ns, name)
        assert pod is not None, name
        for cs in pod["status"].get("containerStatuses") or []:
            cs["restartCount"] = cs.get("restartCount", 0) + 1
            cs["lastState"] = {"terminated": {"reason": reason, "exitCode": exit_code, "finishedAt": self._stamp()}}
            cs["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
            cs["ready"] = False
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["status"] = "False"
        self._write("pods", pod, "MODIFIED")
        self.reconcile()

    # ---- controller ----

    def _owned(self, plural: str, ns: str | None, uid: str) -> list[dict]:
        return [o for o in self.items(plural, ns) if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])]

    @staticmethod
    def _is_ready(p: dict) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or [])

    def _kubelet(self) -> None:
        """Pods whose grace period has ended: the kubelet's final DELETE (grace 0); finalizers keep them."""
        for pod in self.items("pods"):
            meta = pod["metadata"]
            if not meta.get("deletionTimestamp") or meta.get("deletionGracePeriodSeconds", 0) == 0:
                continue
            if self._stop_at.get((meta["namespace"], meta["name"]), 0) > self.now:
                continue
            meta["deletionGracePeriodSeconds"] = 0
            for cs in pod["status"].get("containerStatuses") or []:
                cs["ready"], cs["state"] = False, {"terminated": {"reason": "Completed", "exitCode": 0}}
            for cond in pod["status"].get("conditions") or []:
                if cond["type"] in ("Ready", "ContainersReady"):
                    cond["status"] = "False"
            self._write("pods", pod, "DELETED" if not meta.get("finalizers") else "MODIFIED")

    def reconcile(self) -> None:
        if not self.controllers:
            return
        self._kubelet()
        self._reconcile_hpas()
        for _ in range(20):  # converge: each pass may create what the next one scales
            changed = self._reconcile_owners()
            for d in self.items("deployments"):
                changed |= self._reconcile_deployment(d)
            for rs in self.items("replicasets"):
                changed |= self._reconcile_rs(rs)
            for sts in self.items("statefulsets") if self.statefulset_controller else []:
                changed |= self._reconcile_sts(sts)
            if not changed:
                break
        self._reconcile_endpointslices()
        self._reconcile_pdbs()
        for d in self.items("deployments"):
            self._deployment_status(d)

    def _template_hash(self, template: dict) -> str:
        return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]

    def _reconcile_deployment(self, d: dict) -> bool:
        meta, spec = d["metadata"], d["spec"]
        ns = meta["namespace"]
        if spec.get("paused"):
            return False
        template = spec["template"]
        h = self._template_hash(template)
        rss = self._owned("replicasets", ns, meta["uid"])
        rev = lambda r: int((r["metadata"].get("annotations") or {}).get(REVISION, 0))  # noqa: E731
        new = next((r for r in rss if (r["metadata"].get("labels") or {}).get(HASH) == h), None)
        max_rev = max((rev(r) for r in rss), default=0)
        changed = False
        if new is None:
            t = copy.deepcopy(template)
            t.setdefault("metadata", {}).setdefault("labels", {})[HASH] = h
            ann = {REVISION: str(max_rev + 1)}
            cause = (meta.get("annotations") or {}).get("kubernetes.io/change-cause")
            if cause:
                ann["kubernetes.io/change-cause"] = cause
            new = self._create(
                "replicasets",
                ns,
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": f"{meta['name']}-{h}",
                        "namespace": ns,
                        "labels": dict(t["metadata"]["labels"]),
                        "annotations": ann,
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"], "uid": meta["uid"], "controller": True}],
                    },
                    "spec": {"replicas": 0, "selector": {"matchLabels": {**spec["selector"]["matchLabels"], HASH: h}}, "template": t},
                },
                reconcile=False,
            )
            self.add_event(ns, "ScalingReplicaSet", f"Created new replica set {new['metadata']['name']}", kind="Deployment", name=meta["name"])
            changed = True
            rss = self._owned("replicasets", ns, meta["uid"])
            new = next(r for r in rss if r["metadata"]["name"] == new["metadata"]["name"])
        elif rev(new) < max_rev:  # roll back reuses the old ReplicaSet under a new revision
            new["metadata"]["annotations"][REVISION] = str(max_rev + 1)
            new = self._write("replicasets", new, "MODIFIED")
            changed = True
        if (meta.get("annotations") or {}).get(REVISION) != new["metadata"]["annotations"][REVISION]:
            d2 = self.get("deployments", ns, meta["name"])
            d2["metadata"].setdefault("annotations", {})[REVISION] = new["metadata"]["annotations"][REVISION]
            self._write("deployments", d2, "MODIFIED")
            changed = True
        desired = spec.get("replicas", 1)
        olds = [r for r in rss if r["metadata"]["name"] != new["metadata"]["name"] and r["spec"]["replicas"] > 0]
        want: dict[str, int] = {r["metadata"]["name"]: r["spec"]["replicas"] for r in rss}
        pods = self.items("pods", ns)

        def ready_of(rs: dict) -> int:
            return sum(1 for p in pods if any(o.get("uid") == rs["metadata"]["uid"] for o in p["metadata"].get("ownerReferences") or []) and self._is_ready(p))

        strategy = spec.get("strategy") or {}
        if not olds:
            want[new["metadata"]["name"]] = desired
        elif strategy.get("type") == "Recreate":
            for r in olds:
                want[r["metadata"]["name"]] = 0
        else:
            ru = strategy.get("rollingUpdate") or {}
            surge = _resolve_int_or_percent(ru.get("maxSurge"), desired, True)
            unavail = _resolve_int_or_percent(ru.get("maxUnavailable"), desired, False)
            if surge == 0 and unavail == 0:
                unavail = 1
            total = sum(want.values())
            n = want[new["metadata"]["name"]]
            if n < desired:
                room = desired + surge - total
                if room > 0:
                    want[new["metadata"]["name"]] = n + min(room, desired - n)
            available = ready_of(new) + sum(ready_of(r) for r in olds)
            can_remove = available - (desired - unavail)
            for r in olds:
                nm = r["metadata"]["name"]
                unready = want[nm] - ready_of(r)
                drop = max(0, unready)
                ready_drop = min(max(0, can_remove), want[nm] - drop)
                can_remove -= ready_drop
                want[nm] = max(0, want[nm] - drop - ready_drop)
        for r in rss:
            nm = r["metadata"]["name"]
            if want[nm] != r["spec"]["replicas"]:
                r2 = self.get("replicasets", ns, nm)
                r2["spec"]["replicas"] = want[nm]
                self._write("replicasets", r2, "MODIFIED")
                verb = "up" if want[nm] > r["spec"]["replicas"] else "down"
                self.add_event(ns, "ScalingReplicaSet", f"Scaled {verb} replica set {nm} from {r['spec']['replicas']} to {want[nm]}", kind="Deployment", name=meta["name"])
                changed = True
        return changed

    def _reconcile_rs(self, rs: dict) -> bool:
        meta = rs["metadata"]
        ns = meta["namespace"]
        pods = self._claim_pods(rs)
        want = rs["spec"]["replicas"]
        changed = False
        while len(pods) < want:
            self._seq += 1
            t = copy.deepcopy(rs["spec"]["template"])
            name = f"{meta['name']}-{self._seq:05x}"[-63:]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": dict((t.get("metadata") or {}).get("labels") or {}),
                    "annotations": dict((t.get("metadata") or {}).get("annotations") or {}),
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"], "uid": meta["uid"], "controller": True}],
                },
                "spec": copy.deepcopy(t.get("spec") or {}),
            }
            if self.pod_start != "unschedulable":
                pod["spec"]["nodeName"] = "gpu-node-1"
            pod["status"] = self._pod_status(pod, self.pod_start)
            pods.append(self._create("pods", ns, pod, reconcile=False))
            changed = True
        if len(pods) > want:
            # k8s.io/kubernetes pkg/controller/controller_utils.go ActivePodsWithRanks.Less: unscheduled, pending, not ready,
            # lower controller.kubernetes.io/pod-deletion-cost first, then the newest (ready time, restarts not modelled)
            def rank(p: dict) -> tuple:
                cost = int(((p["metadata"].get("annotations") or {}).get(DELETION_COST)) or 0)
                newest = -int(re.sub(r"\D", "", p["metadata"]["uid"]) or 0)  # the emulator's uids count up with creation
                return (bool(p["spec"].get("nodeName")), p["status"].get("phase") == "Running", self._is_ready(p), cost, newest)

            pods.sort(key=rank)
            for p in pods[: len(pods) - want]:
                self._delete("pods", p, None)  # the pod's own terminationGracePeriodSeconds
            pods = pods[len(pods) - want :]
            changed = True
        ready = sum(1 for p in pods if self._is_ready(p))
        status = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready, "fullyLabeledReplicas": len(pods), "observedGeneration": meta.get("generation", 1)}
        cur = self.get("replicasets", ns, meta["name"])
        if cur is not None and cur.get("status") != status:
            cur["status"] = status
            self._write("replicasets", cur, "MODIFIED")
        return changed

    def _deployment_status(self, d: dict) -> None:
        meta, spec = d["metadata"], d["spec"]
        ns = meta["namespace"]
        desired = spec.get("replicas", 1)
        h = self._template_hash(spec["template"])
        rss = self._owned("replicasets", ns, meta["uid"])
        pods = [p for r in rss for p in self._owned("pods", ns, r["metadata"]["uid"]) if is_active(p)]
        updated = [p for p in pods if (p["metadata"].get("labels") or {}).get(HASH) == h]
        ready = sum(1 for p in pods if self._is_ready(p))
        ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        unavail = _resolve_int_or_percent(ru.get("maxUnavailable"), desired, False)
        complete = len(updated) == desired and len(pods) == desired and ready == desired
        sig = (h, len(updated), ready, len(pods), desired)
        key = (ns, meta["name"])
        last_sig, since = self._progress.get(key, (None, self.now))
        if sig != last_sig:
            since = self.now
            self._progress[key] = (sig, since)
        stamp = _dt.datetime.fromtimestamp(since, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        deadline = spec.get("progressDeadlineSeconds", 600)
        if complete:
            prog = {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": f'ReplicaSet "{meta["name"]}-{h}" has successfully progressed.'}
        elif self.now - since > deadline:
            prog = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": f'ReplicaSet "{meta["name"]}-{h}" has timed out progressing.'}
        else:
            prog = {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": f'ReplicaSet "{meta["name"]}-{h}" is progressing.'}
        prog["lastUpdateTime"] = prog["lastTransitionTime"] = stamp
        avail_ok = ready >= desired - unavail
        conds = [
            {"type": "Available", "status": str(avail_ok), "reason": "MinimumReplicasAvailable" if avail_ok else "MinimumReplicasUnavailable", "message": "Deployment has minimum availability." if avail_ok else "Deployment does not have minimum availability."},
            prog,
        ]
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(pods),
            "updatedReplicas": len(updated),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(0, len(pods) - ready),
            "conditions": conds,
        }
        cur = self.get("deployments", ns, meta["name"])
        if cur is not None and cur.get("status") != status:
            cur["status"] = status
            self._write("deployments", cur, "MODIFIED")



"""The cluster layer's value types: what reads return, what plans and actions carry.

Plain frozen data with no client and no I/O, shared by the interface (`base`), the adapters
(`kube`, `sim`), the pure plan builders (`plans`) and the drain orchestration (`drain`). Also the
one error type reads raise, the context policy, and the terminal-safe `sanitize` every adapter
applies to cluster-supplied text.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass, field
from fnmatch import fnmatch
from typing import Any, Awaitable, Callable, Mapping, TypedDict

from ..results import ActionResult, ClusterError  # noqa: F401 - re-exported: the cluster's API
from ..model import PodInfo
from ..textsafe import clean
from .args import Preflight

# --------------------------------------------------------------------------------------------
# Actions and the API verbs they need (for the RBAC check and for hiding keys)

MUTATING_ACTIONS = ("edit", "scale", "restart", "rollback", "drain", "delete-pod", "cordon", "evict", "deletion-cost")
READ_ACTIONS = ("watch", "logs", "events", "metrics", "describe")

# action -> (verb, group, resource, subresource) tuples, all of which must be allowed
ACTION_VERBS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "watch": (("list", "", "pods", ""), ("watch", "", "pods", "")),
    "logs": (("get", "", "pods", "log"),),
    "describe": (("get", "", "pods", ""),),  # the owner is read too; a denied owner read is said in the view
    "events": (("list", "", "events", ""),),
    "metrics": (("get", "", "pods", "proxy"),),
    "edit": (("patch", "apps", "deployments", ""),),
    "scale": (("patch", "apps", "deployments", "scale"),),
    "restart": (("patch", "apps", "deployments", ""),),
    "rollback": (("patch", "apps", "deployments", ""), ("list", "apps", "replicasets", "")),
    "cordon": (("patch", "", "pods", ""),),
    "delete-pod": (("delete", "", "pods", ""),),
    # the drain evicts (policy/v1 Eviction is a `create` on pods/eviction, which is what RBAC is asked about) and may
    # delete (a pod detached from its controller is not evicted through a PDB)
    "drain": (("patch", "apps", "deployments", "scale"), ("patch", "", "pods", ""), ("create", "", "pods", "eviction"), ("delete", "", "pods", "")),
    # the same keys on a StatefulSet: access reviews ask about the resource actually patched
    "edit/StatefulSet": (("patch", "apps", "statefulsets", ""),),
    "scale/StatefulSet": (("patch", "apps", "statefulsets", "scale"),),
    "restart/StatefulSet": (("patch", "apps", "statefulsets", ""),),
    "hpa": (("patch", "autoscaling", "horizontalpodautoscalers", ""),),  # a workload's scale lives in its HPA
    "gpu-exec": (("create", "", "pods", "exec"),),  # --gpu-exec: nvidia-smi in the pod
}
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

PREVIOUS_ARGS_ANNOTATION = "kvwatch.io/previous-args"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"

LOG_FILTER = re.compile(r"kv|cache|cuda|oom|alloc|out of memory|memory", re.IGNORECASE)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def sanitize(text: str) -> str:
    """Cluster-supplied text made safe for a terminal: colour codes dropped (vLLM logs use them),
    any other control character shown as a visible escape (`textsafe.clean`)."""
    return clean(_ANSI.sub("", text))


# --------------------------------------------------------------------------------------------
# Errors


def no_previous_logs(pod: str) -> ClusterError:
    return ClusterError("not-found", f"{pod}: no previous (restarted) container to read logs from", 400)


# --------------------------------------------------------------------------------------------
# Plain results


@dataclass(frozen=True, slots=True)
class Target:
    kind: str  # "Deployment", "StatefulSet", "Pod"
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.name} -n {self.namespace}"


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    image: str | None
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[tuple[str, str | None], ...] = ()  # (name, literal value or None when valueFrom)

    def as_dict(self) -> dict[str, Any]:
        """The k8s JSON shape, as `args.parse_container` reads it."""
        out: dict[str, Any] = {"name": self.name, "image": self.image}
        if self.command:
            out["command"] = list(self.command)
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = [{"name": n, "value": v} if v is not None else {"name": n, "valueFrom": {}} for n, v in self.env]
        return out


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_update: str | None = None


@dataclass(frozen=True, slots=True)
class DeploymentInfo:
    name: str
    namespace: str
    kind: str = "Deployment"
    replicas: int = 0  # desired (spec)
    ready: int = 0
    updated: int = 0
    available: int = 0
    current: int = 0  # pods that exist (status.replicas)
    generation: int = 0
    observed_generation: int = 0
    conditions: tuple[Condition, ...] = ()
    resource_version: str = ""
    containers: tuple[ContainerSpec, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    revision: str | None = None
    selector: Mapping[str, str] = field(default_factory=dict)
    uid: str = ""
    strategy: str = "RollingUpdate"
    progress_deadline_s: int | None = None


@dataclass(frozen=True, slots=True)
class EditArgsRequest:
    """What an engine-args edit asks for, as one value (built by the edit screen, a preset key,
    or a test): the workload, the flag changes, and the facts the KV preflight needs.

    `changes` maps flag names (no dashes) to new values; `preset` (`args.PRESETS`) adds more;
    `cache_config` is the engine's vllm:cache_config_info labels."""

    namespace: str
    name: str
    changes: Mapping[str, Any] = field(default_factory=dict)
    _: KW_ONLY
    kind: str = "Deployment"
    container: str | None = None
    preset: str | None = None
    cache_config: Mapping[str, Any] | None = None
    gpu_total_bytes: float | None = None
    kv_bytes_token: float | None = None
    generation: str = "v1"
    observed: Mapping[str, Any] | None = None
    # the replica's capacity plan (diagnosis.capacity, as the runbook and the planner read it):
    # the max-num-seqs that fits its traffic, and where that figure came from
    fits_max_num_seqs: int | None = None
    fits_why: str = ""


class PlanFlags(TypedDict):
    """The flags every plan builder passes through to its ActionPlan."""

    requires_typed_name: bool
    readonly: bool
    context: str


@dataclass(frozen=True)
class ActionPlan:
    """Exactly what `apply` would do. Built by reads only; nothing has changed yet."""

    action: str  # one of MUTATING_ACTIONS
    target: Target
    summary: str  # one line for the confirm dialog title
    diff: str = ""  # unified diff (args) or a before/after block
    patch: Any = None  # JSON Patch ops (list) or a merge patch (dict), as sent
    patch_type: str = ""  # "json", "merge", "" (delete / composite)
    subresource: str = ""  # "scale" for the scale subresource
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # non-empty: apply refuses
    requires_typed_name: bool = False  # production context: type the target's name to confirm
    readonly: bool = False  # the cluster would refuse it (the UI should not have offered it)
    context: str = ""
    preflight: Preflight | None = None
    data: Mapping[str, Any] = field(default_factory=dict)  # action-specific facts for apply

    @property
    def ok(self) -> bool:
        return not self.errors and not self.readonly

    @property
    def confirm_word(self) -> str:
        return self.target.name


@dataclass(frozen=True, slots=True)
class PodRef:
    name: str
    phase: str
    ready: bool
    node: str | None = None
    reason: str = ""  # why not ready / why pending, from the cluster
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaSetInfo:
    name: str
    revision: int
    replicas: int
    ready: int
    available: int
    pods: tuple[PodRef, ...] = ()
    args_line: str = ""  # the vLLM container's args, one line, for the rollout view
    created: float | None = None


@dataclass(frozen=True, slots=True)
class RolloutStatus:
    state: str  # "done", "progressing", "stuck", "failed", "unknown"
    reason: str  # one line: why
    desired: int = 0
    updated: int = 0
    ready: int = 0
    available: int = 0
    current: int = 0
    generation: int = 0
    observed_generation: int = 0
    new_rs: ReplicaSetInfo | None = None
    old_rs: tuple[ReplicaSetInfo, ...] = ()
    elapsed_s: float | None = None
    conditions: tuple[Condition, ...] = ()

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed")


@dataclass(frozen=True, slots=True)
class DrainStep:
    step: str  # check, scale-up, wait-spare, cordon, wait-idle, delete, done, cancel, uncordon
    status: str  # "running", "ok", "warn", "failed", "cancelled"
    message: str
    elapsed_s: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogLines:
    pod: str
    container: str | None
    previous: bool
    lines: tuple[str, ...]
    total: int  # lines read before filtering
    filtered: bool


@dataclass(frozen=True, slots=True)
class EventInfo:
    ts: float | None  # unix seconds of the latest occurrence
    type: str  # Normal / Warning
    reason: str
    object: str  # "Pod/name"
    message: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class Permission:
    allowed: bool
    reason: str = ""


@dataclass(frozen=True)
class Permissions:
    namespace: str
    actions: Mapping[str, Permission]

    def allowed(self, action: str, kind: str | None = None) -> bool:
        """`action` on a workload of `kind` (its own entry, e.g. "edit/StatefulSet", when there is one)."""
        p = self.actions.get(f"{action}/{kind}") if kind else None
        p = p if p is not None else self.actions.get(action)
        return bool(p and p.allowed)


@dataclass(frozen=True, slots=True)
class PodEvent:
    type: str  # ADDED, MODIFIED, DELETED, SYNC (full list in `pods`), ERROR (message)
    pod: PodInfo | None = None
    pods: tuple[PodInfo, ...] = ()
    message: str = ""


@dataclass(frozen=True, slots=True)
class ContextInfo:
    name: str
    cluster: str = ""
    user: str = ""
    namespace: str | None = None
    current: bool = False


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    readonly: bool = False
    production: bool = False


def policy_for(context: str, config: Any) -> ContextPolicy:
    """The policy of a kube context, from kvwatch's `Config` (its `profile_for`: exact name, then
    globs in file order) or from a mapping {"contexts": {"prod-*": {"readOnly": true, ...}}}, where
    the most specific (longest) matching glob wins."""
    if config is None:
        return ContextPolicy()
    if hasattr(config, "profile_for"):
        prof = config.profile_for(context)
        return ContextPolicy(bool(prof.readonly), bool(prof.production)) if prof is not None else ContextPolicy()
    if not config:
        return ContextPolicy()
    table = config.get("contexts", config)
    best: tuple[int, Mapping[str, Any]] | None = None
    for pattern, opts in table.items():
        if isinstance(opts, Mapping) and fnmatch(context, pattern):
            if best is None or len(pattern) > best[0]:
                best = (len(pattern), opts)
    if best is None:
        return ContextPolicy()
    opts = best[1]
    return ContextPolicy(
        readonly=bool(opts.get("readOnly", opts.get("readonly", False))),
        production=bool(opts.get("production", False)),
    )


# (running, waiting) or (running, waiting, scraped-at unix time); None when unknown
LoadFn = Callable[[], "tuple[float, ...] | None | Awaitable[tuple[float, ...] | None]"]

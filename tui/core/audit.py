"""Prevention audit (prevention.md) of vLLM workloads: are the KV limits explicit and sane?

Per Deployment / StatefulSet running vLLM (engine args read by cluster.args, whatever form the
container uses to start vLLM):
  max-num-seqs, max-num-batched-tokens, max-model-len explicitly set          fail when not
  gpu-memory-utilization <= 0.7 (<= 0.6 for long-context or bursty workloads)  fail when above
  concurrency consistent with the KV capacity (capacity planner)              fail / warn / skip
  prefix caching and chunked prefill state                                    info (warn: long
                                                                              context without
                                                                              chunked prefill)
  limits documented in annotations (token, concurrency, GPU memory targets)   warn
  ready for verification signals: metrics port declared, readiness probe      fail / warn
A check that fails makes the audit fail, so `kvwatch audit` can gate a rollout in CI.

Annotations kvwatch reads (any prefix, e.g. `kvwatch.io/` or your own domain): max-input-tokens,
max-output-tokens, concurrency-limit (or max-num-seqs), gpu-memory-target (or
gpu-memory-utilization), workload-class (long-context / bursty), kv-cache-tokens (the KV
capacity the engine reported, for the concurrency check), tokens-per-request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .cluster.args import ArgError, VllmCommand, find_vllm_container, parse_container
from .diagnosis import gmu_policy
from .diagnosis.capacity import GiB, ModelArch, plan
from .diagnosis.thresholds import Thresholds
from .textsafe import clean

PASS, FAIL, WARN, INFO, SKIP = "pass", "fail", "warn", "info", "skip"
WORKLOAD_KINDS = ("Deployment", "StatefulSet")
_DOC_KEYS = {
    "token limits": ("max-input-tokens", "max-output-tokens", "max-tokens", "token-limits"),
    "concurrency limit": ("concurrency-limit", "max-num-seqs", "max-concurrency"),
    "GPU memory target": ("gpu-memory-target", "gpu-memory-utilization"),
}


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    title: str
    status: str  # pass / fail / warn / info / skip
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class WorkloadAudit:
    kind: str
    namespace: str
    name: str
    container: str = ""
    checks: tuple[Check, ...] = ()
    error: str | None = None  # the workload could not be audited (no vLLM container, bad spec)

    @property
    def failed(self) -> bool:
        return self.error is not None or any(c.status == FAIL for c in self.checks)

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name, "container": self.container,
                "failed": self.failed, "error": self.error, "checks": [c.as_dict() for c in self.checks]}


@dataclass(frozen=True, slots=True)
class CapacityHints:
    """What the concurrency check can use when the manifests do not say (command-line options)."""

    kv_cache_tokens: int | None = None
    tokens_per_request: int | None = None
    model: ModelArch | None = None
    gpu_memory_bytes: float | None = None
    weights_bytes: float | None = None
    activation_bytes: float = 0.0


def _annotation(annotations: Mapping[str, str], names: Iterable[str]) -> tuple[str, str] | None:
    for key, value in annotations.items():
        base = key.rsplit("/", 1)[-1].lower()
        if base in names:
            return key, str(value)
    return None


def _int_ann(annotations: Mapping[str, str], *names: str) -> int | None:
    hit = _annotation(annotations, names)
    if hit is None:
        return None
    try:
        v = float(hit[1].replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return int(v) if math.isfinite(v) and v > 0 else None


def _explicit(cmd: VllmCommand, name: str, title: str) -> Check:
    v = cmd.values.get(name)
    if v is None or v.is_default:
        d = cmd.eng.default(name, cmd.generation)
        dtxt = f" (the engine default {d} applies)" if d is not None else " (derived from the model config)"
        return Check(f"{name}-set", title, FAIL, f"--{name} not set{dtxt}")
    where = f" via ${v.env_var}" if v.env_var else ""
    return Check(f"{name}-set", title, PASS, f"--{name} {v.display()}{where}")


def _mapping(v: Any) -> Mapping[str, Any]:
    """A manifest field that should be a mapping; anything else reads as empty."""
    return v if isinstance(v, Mapping) else {}


def audit_workload(obj: Mapping[str, Any], t: Thresholds | None = None, hints: CapacityHints | None = None,
                   container: str | None = None) -> WorkloadAudit:
    """Audit one Deployment / StatefulSet manifest (the Kubernetes JSON / YAML shape as a dict)."""
    t = t or Thresholds()
    hints = hints or CapacityHints()
    kind = str(obj.get("kind") or "Deployment")
    meta = _mapping(obj.get("metadata"))
    name, ns = clean(meta.get("name") or "?"), clean(meta.get("namespace") or "")
    spec = _mapping(obj.get("spec"))
    tmpl = _mapping(spec.get("template"))
    pod_spec = _mapping(tmpl.get("spec"))
    containers = [c for c in pod_spec.get("containers") or [] if isinstance(c, Mapping)]
    if not containers:
        return WorkloadAudit(kind, ns, name, error="no containers in the pod template")
    found = find_vllm_container(containers, container)
    if found is None:
        what = f"no container named {container!r}" if container else "no container runs vLLM"
        return WorkloadAudit(kind, ns, name, error=what)
    _, c = found
    try:
        cmd = parse_container(c)
    except ArgError as e:
        return WorkloadAudit(kind, ns, name, clean(c.get("name") or ""), error=f"cannot read the vLLM command: {e}")
    ann: dict[str, str] = {}
    for source in (meta.get("annotations"), (tmpl.get("metadata") or {}).get("annotations")):
        if isinstance(source, Mapping):
            ann.update({str(k): str(v) for k, v in source.items()})

    if cmd.engine == "sglang":
        # SGLang's bounds in its own flags; the memory-headroom and capacity checks below read
        # vLLM's flags and cache config, so they are skipped (said), never run on the wrong knobs
        checks = [
            _explicit(cmd, "max-running-requests", "concurrency cap explicit"),
            _explicit(cmd, "chunked-prefill-size", "batching bound explicit"),
            _explicit(cmd, "context-length", "context length explicit"),
            Check("engine", "engine", INFO, "SGLang: GPU-memory and KV-capacity checks are vLLM's, skipped"),
            _documented(ann),
        ]
        checks.extend(_verification(c, cmd, pod_spec))
        return WorkloadAudit(kind, ns, name, clean(c.get("name") or ""), tuple(checks))
    checks = [
        _explicit(cmd, "max-num-seqs", "concurrency cap explicit"),
        _explicit(cmd, "max-num-batched-tokens", "batching bound explicit"),
        _explicit(cmd, "max-model-len", "context length explicit"),
    ]
    mml = cmd.value("max-model-len")
    wclass = (_annotation(ann, ("workload-class", "workload")) or ("", ""))[1].lower()
    long_ctx = (isinstance(mml, int) and mml >= t.long_context_tokens) or wclass in ("long-context", "bursty")
    limit = gmu_policy.ceiling(t, long_ctx)
    gmu_v = cmd.values.get("gpu-memory-utilization")
    gmu = cmd.value("gpu-memory-utilization")
    why = ("long context" if isinstance(mml, int) and mml >= t.long_context_tokens else wclass) if long_ctx else ""
    if not isinstance(gmu, (int, float)):
        checks.append(Check("gpu-memory-utilization", "GPU memory headroom", FAIL, "gpu-memory-utilization unknown"))
    else:
        src = " (engine default)" if gmu_v is None or gmu_v.is_default else ""
        ok = gmu_policy.within(gmu, t, long_ctx)
        checks.append(Check("gpu-memory-utilization", "GPU memory headroom", PASS if ok else FAIL,
                            f"{gmu:g}{src} {'<=' if ok else '>'} {limit:g}" + (f" ({why})" if why else "")))
    checks.append(_concurrency(cmd, ann, hints, t))
    checks.append(_features(cmd, long_ctx))
    checks.append(_documented(ann))
    checks.extend(_verification(c, cmd, pod_spec))
    return WorkloadAudit(kind, ns, name, clean(c.get("name") or ""), tuple(checks))


def _concurrency(cmd: VllmCommand, ann: Mapping[str, str], hints: CapacityHints, t: Thresholds) -> Check:
    title = "concurrency fits the KV capacity"
    seqs = cmd.value("max-num-seqs")
    mml = cmd.value("max-model-len")
    cap = _int_ann(ann, "kv-cache-tokens", "kv-cache-size-tokens") or hints.kv_cache_tokens
    how = "annotated / given KV capacity"
    if cap is None and hints.model is not None and hints.gpu_memory_bytes and hints.weights_bytes is not None:
        gmu = cmd.value("gpu-memory-utilization")
        p = plan(arch=hints.model, kv_cache_dtype=str(cmd.value("kv-cache-dtype") or "auto"),
                 tp=int(cmd.value("tensor-parallel-size") or 1), gpu_total_bytes=hints.gpu_memory_bytes,
                 gpu_memory_utilization=float(gmu), weights_bytes=hints.weights_bytes,
                 activation_bytes=hints.activation_bytes, block_size=int(cmd.value("block-size") or 16))
        cap, how = p.capacity_tokens, f"computed: {p.lines[-1]}" if p.lines else "computed"
    if cap is None:
        return Check("concurrency-fits", title, SKIP,
                     "KV capacity unknown: annotate kv-cache-tokens (from the engine's start-up log or "
                     "vllm:cache_config_info) or pass --kv-cache-tokens / --model-config")
    if not isinstance(seqs, int):
        return Check("concurrency-fits", title, SKIP, "max-num-seqs unknown")
    inp = _int_ann(ann, "max-input-tokens")
    out = _int_ann(ann, "max-output-tokens", "max-tokens")
    per = _int_ann(ann, "tokens-per-request") or hints.tokens_per_request
    basis = "tokens-per-request"
    if per is None and inp and out:
        per, basis = inp + out, f"documented limits {inp:,} in + {out:,} out"
    worst = per is None
    if per is None:
        if not isinstance(mml, int):
            return Check("concurrency-fits", title, SKIP,
                         "request size unknown: document max-input/max-output tokens or set --max-model-len")
        per, basis = mml, f"max-model-len {mml:,} (worst case: no token limits documented)"
    fit = int(cap * (1 - t.capacity_headroom) // per)
    text = (f"max-num-seqs {seqs} vs {fit} that fit: {cap:,} KV tokens x (1 - {t.capacity_headroom:g}) / "
            f"{per:,} per request ({basis}; {how})")
    if seqs <= max(1, fit):
        return Check("concurrency-fits", title, PASS, text)
    return Check("concurrency-fits", title, WARN if worst else FAIL,
                 text + "; a full batch of such requests preempts" + (" (worst case)" if worst else ""))


def _features(cmd: VllmCommand, long_ctx: bool) -> Check:
    pc, cp = cmd.values.get("enable-prefix-caching"), cmd.values.get("enable-chunked-prefill")

    def show(v: Any, name: str) -> str:
        if v is None:
            return f"{name} unknown"
        state = "on" if v.value else "off"
        return f"{name} {state}" + (" (default)" if v.is_default else "")

    text = f"{show(pc, 'prefix caching')}, {show(cp, 'chunked prefill')}"
    if long_ctx and cp is not None and cp.value is False:
        return Check("prefill-features", "prefix caching / chunked prefill", WARN,
                     text + ": long prompts will monopolise steps; enable chunked prefill")
    return Check("prefill-features", "prefix caching / chunked prefill", INFO, text)


def _documented(ann: Mapping[str, str]) -> Check:
    have: list[str] = []
    lack: list[str] = []
    for what, keys in _DOC_KEYS.items():
        hit = _annotation(ann, keys)
        # what is missing says the keys looked for (any prefix: example.com/max-num-seqs)
        (have if hit else lack).append(f"{what} ({clean(hit[0])}={clean(hit[1])[:40]})" if hit else
                                       f"{what} (annotation <prefix>/{' or '.join(keys)})")
    if not lack:
        return Check("limits-documented", "limits documented", PASS, "; ".join(have))
    return Check("limits-documented", "limits documented", WARN,
                 f"no annotation documents: {'; '.join(lack)}" + (f"; found {'; '.join(have)}" if have else ""))


def _verification(c: Mapping[str, Any], cmd: VllmCommand, pod_spec: Mapping[str, Any]) -> list[Check]:
    from .cluster.plans import metrics_port

    port = metrics_port({"spec": {"containers": [c]}})  # --port in any form, default 8000
    ports = [p for p in c.get("ports") or [] if isinstance(p, Mapping)]
    declared = [p.get("containerPort") for p in ports]
    if port in declared:
        out = [Check("metrics-port", "metrics port exposed", PASS, f"containerPort {port} (/metrics) declared")]
    else:
        got = ", ".join(str(x) for x in declared) or "none"
        out = [Check("metrics-port", "metrics port exposed", FAIL,
                     f"the server listens on {port} but the container declares {got}: scrapers and "
                     "kvwatch discovery cannot find /metrics")]
    probe = c.get("readinessProbe")
    if isinstance(probe, Mapping):
        path = ((probe.get("httpGet") or {}).get("path")) if isinstance(probe.get("httpGet"), Mapping) else None
        out.append(Check("readiness-probe", "readiness probe", PASS,
                         f"readinessProbe {'on ' + clean(path) if path else 'set'}"))
    else:
        out.append(Check("readiness-probe", "readiness probe", WARN,
                         "no readinessProbe: a loading or wedged engine receives traffic (probe /health)"))
    return out


# -- input ------------------------------------------------------------------------------------------


class ManifestError(ValueError):
    pass


def workloads_from_docs(docs: Iterable[Any]) -> list[Mapping[str, Any]]:
    """Deployments / StatefulSets from parsed manifests (List kinds unwrapped, others skipped)."""
    out: list[Mapping[str, Any]] = []
    for d in docs:
        if not isinstance(d, Mapping):
            continue
        kind = d.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List")):
            out.extend(workloads_from_docs(d.get("items") or []))
        elif kind in WORKLOAD_KINDS:
            out.append(d)
    return out


def load_manifests(text: str, source: str = "<input>") -> list[Mapping[str, Any]]:
    """Workloads in a YAML (or JSON) text with one or more documents."""
    import yaml

    from .yamlsafe import YamlLimitError, safe_load_all_bounded

    try:
        docs = list(safe_load_all_bounded(text))
    except YamlLimitError as e:
        raise ManifestError(f"{source}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ManifestError(f"{source}{where}: not valid YAML ({problem})") from None
    return workloads_from_docs(docs)


def fetch_workloads(api_client: Any, namespace: str | None, selector: str | None = None) -> list[Mapping[str, Any]]:
    """Deployments and StatefulSets from the cluster (all namespaces when `namespace` is None),
    through the official client. Raises the client's exceptions; the caller maps them."""
    from kubernetes import client

    apps = client.AppsV1Api(api_client)
    kw: dict[str, Any] = {"label_selector": selector} if selector else {}
    out: list[Mapping[str, Any]] = []
    for kind, ns_fn, all_fn in (
        ("Deployment", apps.list_namespaced_deployment, apps.list_deployment_for_all_namespaces),
        ("StatefulSet", apps.list_namespaced_stateful_set, apps.list_stateful_set_for_all_namespaces),
    ):
        resp = ns_fn(namespace, **kw) if namespace else all_fn(**kw)
        for item in api_client.sanitize_for_serialization(resp).get("items") or []:
            item.setdefault("kind", kind)
            out.append(item)
    return out


def audit_all(objs: Iterable[Mapping[str, Any]], t: Thresholds | None = None, hints: CapacityHints | None = None,
              container: str | None = None, only_vllm: bool = False) -> list[WorkloadAudit]:
    """Audit every workload; with `only_vllm`, workloads without a vLLM container are left out
    (cluster-wide audits see every Deployment, most of them not vLLM)."""
    out = []
    for o in objs:
        a = audit_workload(o, t, hints, container)
        if only_vllm and a.error is not None and a.error.startswith("no container"):
            continue
        out.append(a)
    return out


def render_table(audits: list[WorkloadAudit], width: int = 0) -> str:
    """Plain-text table: one block per workload, one line per check (cut at `width` if > 0)."""
    marks = {PASS: "ok  ", FAIL: "FAIL", WARN: "warn", INFO: "info", SKIP: "skip"}
    lines = []
    for a in audits:
        head = f"{a.ref}" + (f"  (container {a.container})" if a.container else "")
        lines.append(head + ("  FAILED" if a.failed else "  passed"))
        if a.error:
            lines.append(f"  FAIL  {a.error}")
            continue
        for c in a.checks:
            text = f"  {marks.get(c.status, c.status):<4}  {c.title:<32} {c.detail}"
            lines.append(text if not width or len(text) <= width else text[: width - 1] + "~")
    failed = sum(a.failed for a in audits)
    lines.append(f"\n{len(audits)} workload(s) audited, {failed} failed")
    return "\n".join(lines)


def gib(value: float) -> float:
    return value * GiB

"""Plain data shared by every layer: one scrape of one replica, and what is derived from it.

Everything here is immutable and free of UI imports, so sources, diagnosis, recording and the
screens can pass it around without copying or locking.
"""

from __future__ import annotations

import math
import operator
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, Mapping, TypeVar

# The verdicts and their severity order live in the registry; re-exported for the screens.
from .verdicts import SEVERITY as SEVERITY, VERDICTS as VERDICTS  # re-exported

# Replica states as shown on screen. "stale": the last scrape failed but an earlier one
# succeeded recently; "down": nothing usable for longer than the stale window.
OK, STALE, DOWN = "ok", "stale", "down"


_C = TypeVar("_C")
_UNSET = object()  # an argument left out whose field has a default_factory


def slot_init(cls: type[_C]) -> type[_C]:
    """A frozen, slotted dataclass whose __init__ sets each slot through the slot's own
    descriptor: what the generated one does through object.__setattr__, field by field (a
    global lookup and a call each), at about half the cost. Same signature and defaults; the
    instances are the same (frozen, equal, hashed, printed and pickled as before). For the
    objects made several times per replica per refresh (Evidence, ReplicaMetrics, Finding,
    ReplicaView); a class with __post_init__ or fields left out of __init__ keeps its own."""
    fs = fields(cls)  # type: ignore[arg-type]
    assert all(f.init for f in fs) and not hasattr(cls, "__post_init__"), cls
    ns: dict[str, Any] = {"_UNSET": _UNSET}
    params, body = [], []
    for i, f in enumerate(fs):
        if f.default is not MISSING:
            ns[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
        elif f.default_factory is not MISSING:
            ns[f"_f{i}"] = f.default_factory
            params.append(f"{f.name}=_UNSET")
            body.append(f"if {f.name} is _UNSET: {f.name} = _f{i}()")
        else:
            params.append(f.name)
        ns[f"_s{i}"] = cls.__dict__[f.name].__set__
        body.append(f"_s{i}(self, {f.name})")
    exec(f"def __init__(self, {', '.join(params)}):\n    " + "\n    ".join(body or ["pass"]), ns)  # noqa: S102
    init: Callable[..., None] = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


class AtLeast(float):
    """A histogram quantile that fell in the +Inf bucket: at least this (the last finite bound),
    never an exact value. Arithmetic on it gives plain floats; displays say "> 640 s"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"AtLeast({float(self)!r})"


def counter_step(prev: float, v: float) -> tuple[float, float]:
    """(the increase from counter value `prev` to `v`, the value the next one compares with).
    A drop below half is a restart: everything since it counts (as Prometheus' rate). A smaller
    step back is not (a page read a moment late, two servers behind one address): it adds
    nothing and the higher value stays the base, so the step forward again adds nothing either."""
    if v >= prev:
        return v - prev, v
    if v >= 0.5 * prev:
        return 0.0, prev
    return v, v


def seconds_text(v: float) -> str:
    """A latency in seconds for text (3 significant digits); "> 640 s" for an AtLeast."""
    return f"> {float(v):.3g} s" if isinstance(v, AtLeast) else f"{v:.3g} s"


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram at one instant: cumulative counts per upper bound."""

    bounds: tuple[float, ...]  # ascending upper bounds, the last one is +Inf
    counts: tuple[float, ...]  # cumulative counts, same length as bounds
    sum: float
    count: float

    def __add__(self, other: "Histogram") -> "Histogram":
        if self.bounds != other.bounds:
            # Engines of one pod share bucket layouts; if not, keep the one with more data.
            return self if self.count >= other.count else other
        return Histogram(
            self.bounds,
            tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
            self.sum + other.sum,
            self.count + other.count,
        )

    def minus(self, older: "Histogram | None") -> "Histogram":
        """Observations since `older`; a counter reset (count went down) keeps self whole."""
        if older is None or older.bounds != self.bounds or older.count > self.count:
            return self
        return Histogram(
            self.bounds,
            tuple([d if d > 0.0 else 0.0 for d in map(operator.sub, self.counts, older.counts)]),  # max(0, a - b)
            self.sum - older.sum,
            self.count - older.count,
        )

    def quantile(self, q: float) -> float | None:
        """Prometheus' histogram_quantile: linear interpolation inside the bucket."""
        if not self.counts or self.count <= 0:
            return None
        rank = q * self.counts[-1]
        prev_bound, prev_count = 0.0, 0.0
        for bound, cum in zip(self.bounds, self.counts, strict=True):
            if cum >= rank:
                return in_bucket(prev_bound, prev_count, bound, cum, rank)
            prev_bound, prev_count = bound, cum
        return prev_bound

    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None


def in_bucket(prev_bound: float, prev_count: float, bound: float, count: float, rank: float) -> float:
    """Prometheus' histogram_quantile inside the bucket (prev_bound, bound] whose cumulative
    count first reaches `rank`: linear interpolation; in the +Inf bucket the highest finite
    bound, marked AtLeast (the true value is above it). Histogram.quantile and the history's
    window quantiles (pointlog.py) all place a quantile here."""
    if math.isinf(bound):
        return AtLeast(prev_bound)
    if count == prev_count:
        return bound
    return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One data-parallel engine's series (label `engine`; "" where the server has none)."""

    values: Mapping[str, float]  # canonical scalar names, see metrics.names.SCALARS
    hists: Mapping[str, Histogram]  # canonical histogram names, see metrics.names.HISTOGRAMS


@dataclass(frozen=True, slots=True)
class Sample:
    """What one vLLM /metrics page says, in canonical names, per engine."""

    engines: Mapping[str, EngineSample]
    generation: str = "unknown"  # "v1", "v0", "sglang" or "unknown": which metric names the server spoke
    engine: str = "vllm"  # the engine (engines registry name) whose page this was
    model_name: str | None = None
    cache_config: Mapping[str, str] = field(default_factory=dict)  # vllm:cache_config_info labels
    process_cpu_seconds: float | None = None  # process_cpu_seconds_total of the API server
    extra: Mapping[str, float] = field(default_factory=dict)  # other unlabelled scalars kept
    warnings: tuple[str, ...] = ()  # what was wrong with the page but read anyway (duplicates, ...)
    # vLLM's lora_requests_info, newest series: (max_lora, running adapters, waiting adapters)
    lora: tuple[int | None, tuple[str, ...], tuple[str, ...]] | None = None

    # Gauges a pod reports as a sum over its engines; everything else takes the worst engine.
    _SUMMED = frozenset(
        {
            "running",
            "waiting",
            "waiting_capacity",
            "waiting_deferred",
            "swapped",
            "preemptions",
            "requests_aborted",
            "prompt_tokens",
            "generation_tokens",
            "prefix_queries",
            "prefix_hits",
            "requests_success",
            # SGLang: per data-parallel rank, so the pod's is the sum
            "retracted",
            "used_tokens",
            "max_total_tokens",
            "cached_tokens",
            "requests_total",
            "gen_throughput",
        }
    )

    def value(self, name: str) -> float | None:
        """Pod-level value: sum for counts, max for ratios; None when no engine exposes it."""
        if len(self.engines) == 1:  # one engine (most pages): its own value, without a list per call
            for e in self.engines.values():
                return e.values.get(name)
        vals = [e.values[name] for e in self.engines.values() if name in e.values]
        if not vals:
            return None
        return sum(vals) if name in self._SUMMED else max(vals)

    def hist(self, name: str) -> Histogram | None:
        out: Histogram | None = None
        for e in self.engines.values():
            h = e.hists.get(name)
            if h is not None:
                out = h if out is None else out + h
        return out


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A user of one GPU: a PID with its memory (NVML) or a pod's container (DCGM pod mapping)."""

    pid: int | None = None
    used_memory_bytes: float | None = None  # None: the driver does not say (MIG, no permission)
    name: str | None = None  # the process name, where the driver or /proc gives it
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU as a DCGM exporter, NVML, amdsmi or nvidia-smi reports it. None = not reported."""

    index: str
    uuid: str | None = None
    name: str | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    util_pct: float | None = None  # GPU_UTIL: "any kernel running", 100% is not saturation
    sm_active_pct: float | None = None  # PROF_GR_ENGINE_ACTIVE / SM_ACTIVE, preferred when present
    throttle_reasons: tuple[str, ...] = ()  # empty = none active
    ecc_uncorrected: float | None = None
    xid_errors: float | None = None  # last XID code seen (0 = none)
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    processes: tuple[GpuProcess, ...] = ()  # empty: none known (see the source for why)

    @property
    def memory_pct(self) -> float | None:
        if self.memory_used_bytes is None or not self.memory_total_bytes:
            return None
        return 100.0 * self.memory_used_bytes / self.memory_total_bytes

    @property
    def compute_pct(self) -> float | None:
        return self.sm_active_pct if self.sm_active_pct is not None else self.util_pct


@dataclass(frozen=True, slots=True)
class GpuSample:
    """The GPUs of one replica (several under tensor parallelism) and where they came from."""

    devices: tuple[GpuDevice, ...]
    source: str = ""  # "dcgm", "nvml", "amdsmi", "nvidia-smi", "sim"
    join: str = ""  # how the devices were matched to the replica ("pod label", "node+uuid", ...)

    def _worst(self, attr: str, hi: bool = True) -> float | None:
        vals: list[float] = [v for d in self.devices if (v := getattr(d, attr)) is not None]
        if not vals:
            return None
        return max(vals) if hi else min(vals)

    @property
    def memory_pct(self) -> float | None:
        return self._worst("memory_pct")

    @property
    def compute_pct(self) -> float | None:
        # The worst GPU of a TP group for compute is the busiest one: the group runs in lockstep.
        return self._worst("compute_pct")

    @property
    def throttle_reasons(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for d in self.devices:
            for r in d.throttle_reasons:
                seen[r] = None
        return tuple(seen)

    @property
    def ecc_uncorrected(self) -> float | None:
        return self._worst("ecc_uncorrected")

    @property
    def xid_errors(self) -> float | None:
        return self._worst("xid_errors")

    @property
    def count(self) -> int:
        return len(self.devices)

    @property
    def worst(self) -> GpuDevice | None:
        """The device to show for the group: a faulty one first, then the fullest memory."""
        def rank(d: GpuDevice) -> tuple[Any, ...]:
            fault = bool(d.throttle_reasons) or bool(d.ecc_uncorrected) or bool(d.xid_errors)
            return (fault, d.memory_pct or 0.0, d.compute_pct or 0.0)

        return max(self.devices, key=rank) if self.devices else None


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the cluster says about the pod behind a replica (absent outside Kubernetes)."""

    namespace: str
    name: str
    node: str | None = None
    phase: str | None = None
    ready: bool | None = None
    restarts: int = 0
    last_termination_reason: str | None = None  # e.g. "OOMKilled"
    last_exit_code: int | None = None  # e.g. 137
    owner_kind: str | None = None  # "Deployment", "StatefulSet", ...
    owner_name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    pod_ip: str | None = None
    started_at: float | None = None  # pod start (creation) time, in the source's clock: AGE


@dataclass(frozen=True, slots=True)
class Scrape:
    """One attempt to read one replica. Either `sample` is set or `error` says why not."""

    ts: float  # unix seconds (simulated seconds in the demo)
    replica: str
    sample: Sample | None = None
    error: str | None = None
    raw: str | None = None  # the page as scraped, kept for recording
    gpu: GpuSample | None = None
    pod: PodInfo | None = None
    group: str | None = None  # owner (Deployment/StatefulSet) or a user-given group
    latency_s: float | None = None  # how long the scrape took
    # ReplicaMetrics fields the source already derived (Prometheus: server-side rates and
    # quantiles); they take precedence over the history's own derivation from `sample`.
    derived: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.sample is not None and self.error is None

    @property
    def page(self) -> Sample:
        """The parsed page of a successful scrape: what the history keeps and the diagnosis
        reads (a failed scrape has none; reaching for it is a bug, not a missing value)."""
        if self.sample is None:
            raise ValueError(f"scrape of {self.replica} has no page: {self.error}")
        return self.sample


@slot_init
@dataclass(frozen=True, slots=True)
class Evidence:
    """One signal behind a verdict: its value, the threshold it was compared with, the result."""

    signal: str  # e.g. "kv_usage"
    value: float | str | None
    threshold: float | str | None
    op: str  # ">=", "<", ">", "==", "missing", "info"
    crossed: bool
    text: str  # one human line, e.g. "KV usage 0.97 >= 0.90"

    def as_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "value": self.value,
            "threshold": self.threshold,
            "op": self.op,
            "crossed": self.crossed,
            "text": self.text,
        }




@slot_init
@dataclass(frozen=True, slots=True)
class Finding:
    verdict: str
    evidence: tuple[Evidence, ...] = ()
    since: float | None = None  # when this verdict started (first scrape that gave it)
    missing: tuple[str, ...] = ()  # signals the verdict could have used but were not exposed
    summary: str = ""


@slot_init
@dataclass(frozen=True, slots=True)
class ReplicaMetrics:
    """Derived numbers for one replica at the latest scrape. None = not exposed / not enough data."""

    kv_usage: float | None = None  # 0..1, worst engine
    waiting: float | None = None
    waiting_capacity: float | None = None
    waiting_deferred: float | None = None
    running: float | None = None
    preemptions_per_s: float | None = None
    gen_tokens_per_s: float | None = None
    prompt_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    prefix_hit_rate: float | None = None
    gpu_memory_pct: float | None = None
    gpu_util_pct: float | None = None
    gpu_count: int | None = None
    cpu_cores: float | None = None  # API-server CPU use in cores (rate of process_cpu_seconds_total)
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    itl_p99_s: float | None = None
    e2e_p50_s: float | None = None
    e2e_p95_s: float | None = None
    e2e_p99_s: float | None = None
    queue_p95_s: float | None = None
    batch_p95: float | None = None  # p95 of running requests over the window
    prompt_len_p95: float | None = None
    gen_len_p95: float | None = None
    max_tokens_p95: float | None = None
    max_num_seqs: float | None = None  # from cache/scheduler config where the source knows it


@slot_init
@dataclass(frozen=True, slots=True)
class ReplicaView:
    """Everything the screens need about one replica, produced once per refresh."""

    name: str
    state: str  # OK / STALE / DOWN
    finding: Finding
    metrics: ReplicaMetrics
    series: Mapping[str, tuple[float | None, ...]]  # sparkline series, oldest first
    error: str | None = None
    group: str | None = None
    pod: PodInfo | None = None
    engines: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # per-engine values
    generation: str = "unknown"
    engine: str = ""  # engines registry name of the replica's last page ("" before one was read)
    model_name: str | None = None
    last_ok_ts: float | None = None
    cache_config: Mapping[str, str] = field(default_factory=dict)
    # signals of the last scrape that held a non-finite value: {signal: reason} (tui.core.finite)
    invalid: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # the last good page's problems (duplicate series, ...)

    @property
    def verdict(self) -> str:
        return self.finding.verdict


@dataclass(frozen=True, slots=True)
class FleetState:
    ts: float
    source: str  # what is being watched, for the header
    replicas: tuple[ReplicaView, ...]
    # fleet-level queue / latency alarms (diagnosis.alarm.Alarm), most recent refresh
    alarms: tuple[Any, ...] = ()
    # the source's own problems this refresh (Prometheus warnings, a partial answer), cleaned
    source_warnings: tuple[str, ...] = ()
    # model groups with a hot replica beside idle ones (diagnosis.imbalance.Imbalance)
    imbalance: tuple[Any, ...] = ()

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.replicas:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

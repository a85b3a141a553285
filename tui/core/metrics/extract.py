"""Parsed pages -> model objects: a vLLM page -> Sample, a DCGM-exporter page -> GpuSample.

Names come from metrics.names, so a vLLM rename is handled there. A metric the server does not
expose stays absent (None / missing key), never 0: renamed and removed names are common.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..model import EngineSample, GpuDevice, GpuProcess, GpuSample, Histogram, Sample
from . import names
from .lora import LORA_INFO, lora_from_rows
from .parser import Labels, Page, SeriesKey, histogram_series, parse, tuple_getter

# Unlabelled process series kept in Sample.extra (restart detection, API-server memory).
EXTRA = ("process_start_time_seconds", "process_resident_memory_bytes")

# Which generation spoke: names (samples or TYPE lines) only one generation exposes. Early V1
# (0.8.x) still exposed vllm:gpu_cache_usage_perc, so that name proves nothing either way;
# prefix-cache *counters* arrived with V1 (V0 had hit-rate gauges).
V1_MARKERS = (names.V1_ONLY - {"vllm:gpu_cache_usage_perc"}) | {
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:num_requests_waiting_by_reason",
    "vllm:request_time_per_output_token_seconds",
    "vllm:engine_sleep_state",
}
V0_MARKERS = (names.V0_ONLY - {"vllm:gpu_cache_usage_perc"}) | {
    "vllm:cpu_prefix_cache_hit_rate",
    "vllm:avg_prompt_throughput_toks_per_s",
    "vllm:time_in_queue_requests",
    "vllm:request_params_best_of",
}


# Histograms a page exposes that nothing of kvwatch reads (not the windows, the look-backs nor
# the diagnosis): their rows are a quarter of a V1 page's kept lines, so they are not parsed
# (parse and to_sample of a real-size page: 0.26 -> 0.23 ms). Prometheus and the simulator,
# which name them too, are not affected.
UNREAD_HISTS = frozenset({"tpot", "prefill_time", "decode_time", "request_preemptions"})
_READ_HISTS = {canon: bases for canon, bases in names.HISTOGRAMS.items() if canon not in UNREAD_HISTS}


def _hist_names() -> frozenset[str]:
    out: set[str] = set()
    for bases in _READ_HISTS.values():
        for base in bases:
            out.update(histogram_series(base))
    return frozenset(out)


# Every sample name to_sample() reads; pass this to parse() so nothing else is parsed.
VLLM_WANTED: frozenset[str] = frozenset(
    {n for exposed in names.SCALARS.values() for n in exposed}
    | _hist_names()
    | {names.WAITING_BY_REASON, names.CACHE_CONFIG, names.PROCESS_CPU}
    | set(EXTRA)
    | V1_MARKERS
    | V0_MARKERS
    | {LORA_INFO}
)
DCGM_WANTED: frozenset[str] = frozenset(names.DCGM)

_INF = math.inf
# DCGM reports "blank" (no sensor / not supported) as huge sentinel values near 2**63.
_DCGM_BLANK = 9.0e18
_MIB = 1024.0 * 1024.0


def parse_vllm(text: str) -> Page:
    return parse(text, VLLM_WANTED)


def parse_dcgm(text: str) -> Page:
    return parse(text, DCGM_WANTED)


# -- vLLM --------------------------------------------------------------------------------------


# Engines kept apart per replica: a page with a label explosion (90k `engine` values) would
# otherwise keep 90k engine records per scrape in the history. The rest become one aggregate.
MAX_ENGINES = 64
OTHER_ENGINES = "(other)"

# Canonical names to_sample adds beside names.SCALARS (they start from 0.0 and add up rows).
_ADDED = ("requests_aborted", "waiting_capacity", "waiting_deferred")
assert not set(_ADDED) & set(names.SCALARS)


def to_sample(page: Page) -> Sample:
    """A vLLM page in canonical names. Engines are keyed by the `engine` label ("" when absent);
    `engines` is empty when the page has no vLLM engine series at all.

    Where each value goes (which engine, which canonical name, summed or the worst, which
    histogram slot) depends only on the page's series (names and labels) and on which values
    are NaN: that is the page's plan (_build_plan), and reading the values through it
    (_apply) is the rest. A replica exposes the same series in the same order on every
    scrape, and replicas of one model the same ones, so a page whose series and NaN rows are
    those of a page read before reuses that page's plan; any other page gets a plan of its own.
    """
    keys, vals = page.rows()
    total = sum(vals)  # NaN when a value is (or +Inf beside -Inf)
    nan = frozenset(i for i, v in enumerate(vals) if v != v) if total != total else _NO_NAN
    slot = (len(keys), id(keys[0]) if keys else 0, id(keys[-1]) if keys else 0, nan)
    plan = _PAGE_PLANS.get(slot)
    # The parser hands every page the same (name, labels) tuple for a series, and the plan
    # holds its page's tuples (so their ids are not reused): equal lists compare item by item
    # by identity, any other list by value.
    if plan is None or plan.keys != keys:
        plan = _build_plan(keys, nan)
        if len(_PAGE_PLANS) >= 128:
            _PAGE_PLANS.clear()  # ~50 KB each for a real-size page
        _PAGE_PLANS[slot] = plan
    return _apply(plan, vals, page.families)


# A histogram part: (bounds, the bucket values by row index -> tuple, +Inf taken from _count,
# the _sum row or None, the _count row or None, the +Inf row or -1)
_Part = tuple[tuple[float, ...], Callable[[list[float]], tuple[float, ...]], bool, int | None, int | None, int]
# A scalar: (canonical name, how rows combine: "sum" | "max" | "add0" (0.0 + each), row indices)
_Op = tuple[str, str, tuple[int, ...]]


class _PagePlan:
    """Where each kept row of a page goes (see to_sample); built by _build_plan."""

    __slots__ = ("keys", "scalars", "hists", "hist_only", "bound", "model_name", "v1", "names_v0",
                 "cache_config", "cpu", "extra", "warnings", "lora")

    keys: list[SeriesKey]
    # per engine, in the order engines appear: (engine, canonical names, their first rows'
    # values -> tuple, the scalars that combine several rows)
    scalars: list[tuple[str, tuple[str, ...], Callable[[list[float]], tuple[float, ...]], list[_Op]]]
    hists: list[tuple[str, str, tuple[_Part, ...]]]  # (engine, canonical name, parts added up)
    hist_only: list[str]  # engines with histograms and no scalar
    bound: bool  # more than MAX_ENGINES engines: the rest as one aggregate
    model_name: str | None
    v1: bool  # an engine label, or a V1 marker among the sample names
    names_v0: bool  # a V0 marker among the sample names
    cache_config: dict[str, str]
    cpu: int | None
    extra: list[tuple[str, int]]
    warnings: tuple[str, ...]
    lora: list[tuple[int, Labels]]


# (row count, id of the first and of the last (name, labels), the NaN rows) -> the plan of a
# page read before
_PAGE_PLANS: dict[tuple[int, int, int, frozenset[int]], _PagePlan] = {}
_NO_NAN: frozenset[int] = frozenset()


def _build_plan(keys: list[SeriesKey], nan: frozenset[int]) -> _PagePlan:
    """The plan of a page whose kept rows are `keys`, the rows in `nan` holding NaN."""
    by_name: dict[str, list[tuple[int, Labels]]] = {}
    for i, (name, labels) in enumerate(keys):
        rows = by_name.get(name)
        if rows is None:
            rows = by_name[name] = []
        rows.append((i, labels))

    def engine_rows(name: str) -> list[tuple[int, Labels]]:
        """Rows of one name from vLLM engines, without production-stack router series."""
        return [r for r in by_name.get(name, ()) if "server" not in r[1] or not _is_router(r[1])]

    ops: dict[str, dict[str, list[Any]]] = {}  # engine -> canonical -> [how, [row, ...]]
    model_name: str | None = None
    saw_engine_label = False
    summed = Sample._SUMMED
    dup = 0  # repeated series (same name and labels) on the page

    for canon, candidates in names.SCALARS.items():
        exposed = next((n for n in candidates if engine_rows(n)), None)
        if exposed is None:
            continue
        rows, repeats = _distinct_rows(engine_rows(exposed))
        dup += repeats
        for i, labels in rows:
            if i in nan:  # NaN: the server has no value to give
                continue
            eng = labels.get("engine", "")
            saw_engine_label |= "engine" in labels
            if model_name is None:
                model_name = labels.get("model_name")
            ev = ops.setdefault(eng, {})
            if canon in ev:
                # Several series per engine (finished_reason, ...): sum counts, worst ratio.
                ev[canon][1].append(i)
            else:
                ev[canon] = ["sum" if canon in summed else "max", [i]]

    # requests clients abandoned (finished_reason="abort"): the scale-out arithmetic counts them
    # as demand, not as served capacity
    added: list[tuple[str, int, str]] = [
        (labels.get("engine", ""), i, "requests_aborted") for i, labels in engine_rows(names.REQUESTS_SUCCESS)
        if labels.get("finished_reason") == "abort" and i not in nan]
    added += [(labels.get("engine", ""), i, "waiting_" + labels["reason"])
              for i, labels in engine_rows(names.WAITING_BY_REASON)
              if labels.get("reason") in ("capacity", "deferred") and i not in nan]
    for eng, i, key in added:
        ev = ops.setdefault(eng, {})
        if key in ev:
            ev[key][1].append(i)
        else:
            ev[key] = ["add0", [i]]

    hists: list[tuple[str, str, tuple[_Part, ...]]] = []
    for canon, bases in _READ_HISTS.items():
        for base in bases:
            per_engine = _hist_parts(by_name, base)
            if per_engine:
                hists += [(eng, canon, tuple(parts)) for eng, parts in per_engine.items()]
                break

    cache_config: dict[str, str] = {}
    for _, labels in sorted(engine_rows(names.CACHE_CONFIG), key=lambda r: r[1].get("engine", "")):
        cache_config = {k: v for k, v in labels.items() if k not in ("engine", "model_name")}
        break

    plan = _PagePlan()
    plan.keys = keys
    plan.scalars = []
    for eng, ev in ops.items():
        canons = tuple(ev)
        plan.scalars.append((eng, canons, tuple_getter(tuple(ev[c][1][0] for c in canons)),
                             [(c, how, tuple(idx)) for c, (how, idx) in ev.items() if how == "add0" or len(idx) > 1]))
    plan.hists = hists
    plan.hist_only = [eng for eng in dict.fromkeys(eng for eng, _, _ in hists) if eng not in ops]
    n_engines = len(ops) + len(plan.hist_only)
    warnings: list[str] = []
    if dup:
        warnings.append(f"duplicate series on the page: {dup} series repeated (last value kept)")
    plan.bound = n_engines > MAX_ENGINES
    if plan.bound:
        warnings.append(f"{n_engines} engines on the page: {MAX_ENGINES - 1} kept apart, the rest as {OTHER_ENGINES}")
    plan.warnings = tuple(warnings)
    if model_name is None:
        model_name = _any_model_name(engine_rows)
    plan.model_name = model_name
    plan.v1 = saw_engine_label or not by_name.keys().isdisjoint(V1_MARKERS)
    plan.names_v0 = not by_name.keys().isdisjoint(V0_MARKERS)
    plan.cache_config = cache_config
    plan.cpu = _unlabelled_row(by_name, names.PROCESS_CPU, nan)
    plan.extra = [(n, j) for n in EXTRA if (j := _unlabelled_row(by_name, n, nan)) is not None]
    plan.lora = by_name.get(LORA_INFO, [])
    return plan


def _apply(plan: _PagePlan, vals: list[float], families: dict[str, str]) -> Sample:
    """The Sample of a page laid out as `plan` says, from its values."""
    values: dict[str, dict[str, float]] = {}
    for eng, canons, first, multi in plan.scalars:
        ev = dict(zip(canons, first(vals), strict=True))  # every name in its place, first rows
        for canon, how, idx in multi:
            if how == "max":
                v = vals[idx[0]]
                for i in idx[1:]:
                    v = max(v, vals[i])
            else:
                v = 0.0 + vals[idx[0]] if how == "add0" else vals[idx[0]]
                for i in idx[1:]:
                    v = v + vals[i]
            ev[canon] = v
        values[eng] = ev
    hists: dict[str, dict[str, Histogram]] = {}
    for eng, canon, parts in plan.hists:
        h: Histogram | None = None
        for bounds, cum, inf_from_count, sum_row, count_row, inf_row in parts:
            count = vals[count_row] if count_row is not None else None
            counts = cum(vals)
            if inf_from_count:
                counts += (count,)  # type: ignore[operator]  # a plan takes +Inf from _count only where there is one
            part = Histogram(bounds, counts, vals[sum_row] if sum_row is not None else math.nan,
                             count if count is not None else vals[inf_row])
            h = part if h is None else h + part  # several series in one engine: add up
        hists.setdefault(eng, {})[canon] = h  # type: ignore[assignment]  # a plan's parts are never empty
    for eng in plan.hist_only:
        values[eng] = {}
    if plan.bound:
        values, hists = _bound_engines(values, hists, Sample._SUMMED)
    engines = {eng: EngineSample(values=ev, hists=hists.get(eng, {})) for eng, ev in values.items()}
    if not engines:
        generation = "unknown"
    elif plan.v1 or not families.keys().isdisjoint(V1_MARKERS):
        generation = "v1"
    elif plan.names_v0 or not families.keys().isdisjoint(V0_MARKERS):
        generation = "v0"
    else:
        generation = "unknown"
    return Sample(
        engines=engines,
        generation=generation,
        model_name=plan.model_name,
        cache_config=plan.cache_config,
        process_cpu_seconds=vals[plan.cpu] if plan.cpu is not None else None,
        extra={n: vals[i] for n, i in plan.extra},
        warnings=plan.warnings,
        lora=lora_from_rows([(labels, vals[i]) for i, labels in plan.lora]) if plan.lora else None,
    )


def _distinct_rows(rows: list[tuple[int, Labels]]) -> tuple[list[tuple[int, Labels]], int]:
    """Rows with each label set once, keeping its last value (as Prometheus ingests a page
    with a repeated series), and the number of repeats."""
    if len(rows) < 2:
        return rows, 0
    last = {labels: j for j, (_, labels) in enumerate(rows)}
    if len(last) == len(rows):
        return rows, 0
    return [rows[j] for j in sorted(last.values())], len(rows) - len(last)


def _engine_order(eng: str) -> tuple[Any, ...]:
    return (0, int(eng), "") if eng.isdigit() else (1, 0, eng)


def _bound_engines(values: dict[str, dict[str, float]], hists: dict[str, dict[str, Histogram]],
                   summed: frozenset[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first MAX_ENGINES - 1 engines (in engine order) and one aggregate of the others:
    sums for counts, the worst for ratios, histograms added, so pod-level values are unchanged."""
    order = sorted(values, key=_engine_order)
    keep, rest = order[: MAX_ENGINES - 1], order[MAX_ENGINES - 1 :]
    other_v: dict[str, float] = {}
    other_h: dict[str, Histogram] = {}
    for eng in rest:
        for k, v in values[eng].items():
            prev = other_v.get(k)
            other_v[k] = v if prev is None else (prev + v if k in summed else max(prev, v))
        for k, h in hists.get(eng, {}).items():
            prev_h = other_h.get(k)
            other_h[k] = h if prev_h is None else prev_h + h
    new_values = {eng: values[eng] for eng in keep}
    new_values[OTHER_ENGINES] = other_v
    new_hists = {eng: hists[eng] for eng in keep if eng in hists}
    if other_h:
        new_hists[OTHER_ENGINES] = other_h
    return new_values, new_hists


def _any_model_name(engine_rows: Callable[[str], list[tuple[int, Labels]]]) -> str | None:
    for name in _READ_HISTS.values():
        for base in name:
            for _, labels in engine_rows(base + "_count"):
                if "model_name" in labels:
                    return str(labels["model_name"])
    return None


def _unlabelled(page: Page, name: str) -> float | None:
    for labels, v in page.get(name):
        if not labels and v == v:
            return v
    return None


def _unlabelled_row(by_name: dict[str, list[tuple[int, Labels]]], name: str, nan: frozenset[int]) -> int | None:
    for i, labels in by_name.get(name, ()):
        if not labels and i not in nan:
            return i
    return None


def _hist_parts(by_name: dict[str, list[tuple[int, Labels]]], base: str) -> dict[str, list[_Part]]:
    """Per engine, the parts of one histogram base name (several series in one engine are
    added up); empty when the page has no buckets for it."""
    bucket_name, sum_name, count_name = histogram_series(base)
    # series identity (labels without le) -> {le bound: row index}; a repeated row: the last
    by_ident: dict[tuple[Any, ...], dict[float, int]] = {}
    for i, lab in by_name.get(bucket_name, ()):
        ident, bound = lab.hist_key()
        if bound is None or ("server" in lab and _is_router(lab)):
            continue
        by_ident.setdefault(ident, {})[bound] = i
    if not by_ident:
        return {}
    sums = {labels.hist_key()[0]: i for i, labels in by_name.get(sum_name, ())}
    counts = {labels.hist_key()[0]: i for i, labels in by_name.get(count_name, ())}
    out: dict[str, list[_Part]] = {}
    for ident, by_le in by_ident.items():
        inf_row = by_le.setdefault(_INF, -1)  # -1: +Inf taken from _count
        count_row = counts.get(ident)
        if inf_row < 0 and count_row is None:
            continue  # neither +Inf nor _count: the total is unknown
        bounds = tuple(sorted(by_le))
        if len(_BOUNDS) > 1000:
            _BOUNDS.clear()
        bounds = _BOUNDS.setdefault(bounds, bounds)
        rows = tuple(j for b in bounds if (j := by_le[b]) >= 0)  # +Inf, the last bound, may be -1
        part = (bounds, tuple_getter(rows), inf_row < 0, sums.get(ident), count_row, inf_row)
        out.setdefault(dict(ident).get("engine", ""), []).append(part)
    return out


# Bucket layouts repeat on every scrape of every replica: share one tuple per layout, since
# histories keep hundreds of samples per replica.
_BOUNDS: dict[tuple[float, ...], tuple[float, ...]] = {}


def _is_router(labels: Labels) -> bool:
    # The production-stack router re-exports vllm:* names with a `server` label.
    return "server" in labels and "model_name" not in labels and "engine" not in labels


# -- DCGM exporter -----------------------------------------------------------------------------


def to_gpu(
    page: Page,
    *,
    pod: str | None = None,
    namespace: str | None = None,
    uuids: Iterable[str] | None = None,
    hostname: str | None = None,
    source: str = "dcgm",
) -> GpuSample | None:
    """GPUs on a DCGM-exporter page, one GpuDevice per GPU (or MIG instance).

    Join hints narrow the devices to one replica's: `pod` (and `namespace`) match the labels a
    pod-mapping exporter adds; `uuids` match `UUID`; `hostname` matches `Hostname`/`hostname`.
    None when no device is left.
    """
    want_uuids = set(uuids) if uuids is not None else None
    fields: dict[tuple[str, str], dict[str, float]] = {}  # device key -> attr -> value
    meta: dict[tuple[str, str], Labels] = {}
    for metric, attr in names.DCGM.items():
        for labels, v in page.get(metric):
            if pod is not None and labels.get("pod") != pod:
                continue
            if namespace is not None and labels.get("namespace") != namespace:
                continue
            uuid = labels.get("UUID") or labels.get("uuid")
            if want_uuids is not None and uuid not in want_uuids:
                continue
            if hostname is not None and (labels.get("Hostname") or labels.get("hostname")) != hostname:
                continue
            if v != v or abs(v) >= _DCGM_BLANK:
                continue
            gpu = labels.get("gpu", "")
            key = (uuid or gpu, labels.get("GPU_I_ID", ""))
            meta.setdefault(key, labels)
            f = fields.setdefault(key, {})
            if attr == "throttle_mask" and "throttle_mask" in f:
                f[attr] = float(int(f[attr]) | int(v))  # both throttle field names present
            else:
                f[attr] = v
    if not fields:
        return None
    devices = []
    for key in sorted(fields, key=_device_order(meta)):
        f, labels = fields[key], meta[key]
        used, free = f.get("fb_used_mib"), f.get("fb_free_mib")
        total = None
        if used is not None and free is not None:
            total = (used + free + f.get("fb_reserved_mib", 0.0)) * _MIB
        active = f.get("sm_active", f.get("gr_engine_active"))
        index = labels.get("gpu", key[0])
        if key[1]:
            index = f"{index}/{key[1]}"
        mask = f.get("throttle_mask")
        devices.append(
            GpuDevice(
                index=index,
                uuid=labels.get("UUID") or labels.get("uuid"),
                name=labels.get("modelName"),
                memory_used_bytes=used * _MIB if used is not None else None,
                memory_total_bytes=total,
                util_pct=f.get("util_pct"),
                sm_active_pct=100.0 * active if active is not None else None,
                throttle_reasons=names.throttle_names(int(mask)) if mask is not None else (),
                ecc_uncorrected=f.get("ecc_dbe"),
                xid_errors=f.get("xid"),
                temperature_c=f.get("temperature_c"),
                power_w=f.get("power_w"),
                processes=_pod_users(labels),
            )
        )
    if pod is not None:
        join = "pod label"
    elif want_uuids is not None:
        join = "uuid"
    elif hostname is not None:
        join = "hostname"
    else:
        join = ""
    return GpuSample(devices=tuple(devices), source=source, join=join)


def _pod_users(labels: Labels) -> tuple[GpuProcess, ...]:
    """The pod using a GPU, from the exporter's pod mapping (Prometheus may have renamed the
    labels `exported_*` to keep its own); an unmapped GPU carries empty values: no user known."""
    pod = labels.get("exported_pod") or labels.get("pod")
    if not pod:
        return ()
    return (GpuProcess(pod=pod, namespace=labels.get("exported_namespace") or labels.get("namespace") or None,
                       container=labels.get("exported_container") or labels.get("container") or None),)


def _device_order(meta: dict[tuple[str, str], Labels]) -> Any:
    def order(key: tuple[str, str]) -> tuple[Any, ...]:
        gpu = meta[key].get("gpu", "")
        return (0, int(gpu), key[1]) if gpu.isdigit() else (1, gpu, key[1])

    return order

"""Parsed pages -> model objects: a vLLM page -> Sample, a DCGM-exporter page -> GpuSample.

Names come from metrics.names, so a vLLM rename is handled there. A metric the server does not
expose stays absent (None / missing key), never 0: renamed and removed names are common.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..model import EngineSample, GpuDevice, GpuProcess, GpuSample, Histogram, Sample
from . import names
from .lora import LORA_INFO, lora_info
from .parser import Labels, Page, SampleRow, histogram_series, parse

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


def _engine_rows(page: Page, name: str) -> list[SampleRow]:
    """Rows of one name from vLLM engines, without production-stack router series."""
    return [row for row in page.get(name) if "server" not in row[0] or not _is_router(row[0])]


def _first_exposed(page: Page, candidates: Iterable[str]) -> str | None:
    for name in candidates:
        for _ in _engine_rows(page, name):
            return name
    return None


# Engines kept apart per replica: a page with a label explosion (90k `engine` values) would
# otherwise keep 90k engine records per scrape in the history. The rest become one aggregate.
MAX_ENGINES = 64
OTHER_ENGINES = "(other)"


def _distinct_rows(rows: list[SampleRow], dup: list[int]) -> list[SampleRow]:
    """Rows with each label set once, keeping its last value (as Prometheus ingests a page
    with a repeated series); the number of repeats is added to dup[0]."""
    if len(rows) < 2:
        return rows
    last = {labels: i for i, (labels, _) in enumerate(rows)}
    if len(last) == len(rows):
        return rows
    dup[0] += len(rows) - len(last)
    return [rows[i] for i in sorted(last.values())]


def to_sample(page: Page) -> Sample:
    """A vLLM page in canonical names. Engines are keyed by the `engine` label ("" when absent);
    `engines` is empty when the page has no vLLM engine series at all."""
    values: dict[str, dict[str, float]] = {}  # engine -> canonical -> value
    hists: dict[str, dict[str, Histogram]] = {}
    model_name: str | None = None
    saw_engine_label = False
    summed = Sample._SUMMED
    dup = [0]  # repeated series (same name and labels) on the page

    for canon, candidates in names.SCALARS.items():
        exposed = _first_exposed(page, candidates)
        if exposed is None:
            continue
        for labels, v in _distinct_rows(_engine_rows(page, exposed), dup):
            if v != v:  # NaN: the server has no value to give
                continue
            eng = labels.get("engine", "")
            saw_engine_label |= "engine" in labels
            if model_name is None:
                model_name = labels.get("model_name")
            ev = values.setdefault(eng, {})
            if canon in ev:
                # Several series per engine (finished_reason, ...): sum counts, worst ratio.
                ev[canon] = ev[canon] + v if canon in summed else max(ev[canon], v)
            else:
                ev[canon] = v

    # requests clients abandoned (finished_reason="abort"): the scale-out arithmetic counts them
    # as demand, not as served capacity
    for labels, v in _engine_rows(page, names.REQUESTS_SUCCESS):
        if labels.get("finished_reason") != "abort" or v != v:
            continue
        ev = values.setdefault(labels.get("engine", ""), {})
        ev["requests_aborted"] = ev.get("requests_aborted", 0.0) + v

    for labels, v in _engine_rows(page, names.WAITING_BY_REASON):
        reason = labels.get("reason")
        if reason not in ("capacity", "deferred") or v != v:
            continue
        eng = labels.get("engine", "")
        ev = values.setdefault(eng, {})
        key = "waiting_" + reason
        ev[key] = ev.get(key, 0.0) + v

    for canon, bases in _READ_HISTS.items():
        for base in bases:
            per_engine = _histograms(page, base)
            if per_engine:
                for eng, h in per_engine.items():
                    hists.setdefault(eng, {})[canon] = h
                break

    cache_config: dict[str, str] = {}
    for labels, _ in sorted(_engine_rows(page, names.CACHE_CONFIG), key=lambda r: r[0].get("engine", "")):
        cache_config = {k: v for k, v in labels.items() if k not in ("engine", "model_name")}
        break

    for eng in hists:
        values.setdefault(eng, {})
    warnings: list[str] = []
    if dup[0]:
        warnings.append(f"duplicate series on the page: {dup[0]} series repeated (last value kept)")
    if len(values) > MAX_ENGINES:
        warnings.append(f"{len(values)} engines on the page: {MAX_ENGINES - 1} kept apart, the rest as {OTHER_ENGINES}")
        values, hists = _bound_engines(values, hists, summed)
    engines = {eng: EngineSample(values=vals, hists=hists.get(eng, {})) for eng, vals in values.items()}
    if model_name is None:
        model_name = _any_model_name(page)

    cpu = _unlabelled(page, names.PROCESS_CPU)
    extra = {n: x for n in EXTRA if (x := _unlabelled(page, n)) is not None}
    return Sample(
        engines=engines,
        generation=_generation(page, saw_engine_label) if engines else "unknown",
        model_name=model_name,
        cache_config=cache_config,
        process_cpu_seconds=cpu,
        extra=extra,
        warnings=tuple(warnings),
        lora=lora_info(page),
    )


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


def _any_model_name(page: Page) -> str | None:
    for name in _READ_HISTS.values():
        for base in name:
            for labels, _ in _engine_rows(page, base + "_count"):
                if "model_name" in labels:
                    return str(labels["model_name"])
    return None


def _unlabelled(page: Page, name: str) -> float | None:
    for labels, v in page.get(name):
        if not labels and v == v:
            return v
    return None


def _generation(page: Page, saw_engine_label: bool) -> str:
    present = page.samples.keys() | page.families.keys()
    if saw_engine_label or not present.isdisjoint(V1_MARKERS):
        return "v1"
    if not present.isdisjoint(V0_MARKERS):
        return "v0"
    return "unknown"


def _histograms(page: Page, base: str) -> dict[str, Histogram]:
    """One Histogram per engine for a base name; empty when the page has no buckets for it."""
    bucket_name, sum_name, count_name = histogram_series(base)
    rows = page.get(bucket_name)
    if not rows:
        return {}
    plan = _bucket_plan(bucket_name, rows)
    if not plan:
        return {}
    sums = {labels.hist_key()[0]: v for labels, v in page.get(sum_name)}
    counts = {labels.hist_key()[0]: v for labels, v in page.get(count_name)}
    out: dict[str, Histogram] = {}
    for ident, eng, bounds, idx, inf_row in plan:
        count = counts.get(ident)
        if inf_row >= 0:
            cum = tuple([rows[j][1] for j in idx])
        elif count is None:
            continue  # neither +Inf nor _count: the total is unknown
        else:
            cum = tuple([rows[j][1] if j >= 0 else count for j in idx])  # -1: +Inf from _count
        h = Histogram(bounds=bounds, counts=cum, sum=sums.get(ident, math.nan),
                      count=count if count is not None else rows[inf_row][1])
        prev = out.get(eng)
        out[eng] = h if prev is None else prev + h  # several series in one engine: add up
    return out


# (ident, engine, bounds, row index per bound, the +Inf row); index -1: +Inf taken from _count
_Plan = list[tuple[tuple[Any, ...], str, tuple[float, ...], tuple[int, ...], int]]
# Which bucket row goes where depends only on the rows' label sets, and parsed label sets are
# shared between pages (parser's series cache): every scrape of every replica of one model
# repeats the same list, so the layout is worked out once and reused while the labels match.
_PLANS: dict[tuple[str, int, int], tuple[list[Labels], _Plan]] = {}


def _bucket_plan(bucket_name: str, rows: list[Any]) -> _Plan:
    labels = [r[0] for r in rows]
    key = (bucket_name, len(labels), id(labels[0]))
    hit = _PLANS.get(key)
    if hit is not None and hit[0] == labels:
        return hit[1]
    # series identity (labels without le) -> {le bound: row index}; a repeated row: the last
    by_ident: dict[tuple[Any, ...], dict[float, int]] = {}
    for j, lab in enumerate(labels):
        ident, bound = lab.hist_key()
        if bound is None or ("server" in lab and _is_router(lab)):
            continue
        by_ident.setdefault(ident, {})[bound] = j
    plan: _Plan = []
    for ident, by_le in by_ident.items():
        inf_row = by_le.setdefault(_INF, -1)
        bounds = tuple(sorted(by_le))
        if len(_BOUNDS) > 1000:
            _BOUNDS.clear()
        bounds = _BOUNDS.setdefault(bounds, bounds)
        plan.append((ident, dict(ident).get("engine", ""), bounds, tuple(by_le[b] for b in bounds), inf_row))
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[key] = (labels, plan)
    return plan


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

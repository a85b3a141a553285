"""A Sample back to Prometheus text (format 0.0.4), in the names one vLLM generation exposes.

The recorder uses it when a source produced a Sample without page text (Prometheus queries,
the in-process simulator), so every line of a scrape log is a page any reader can parse. The
labelled scenario suite uses it to write traces in the V1 and V0 dialects.
"""

from __future__ import annotations

import math

from ..metrics import names
from ..model import Histogram, Sample

# Dialects: "v1" = newest V1 (engine label, waiting by reason, kv_cache_usage_perc);
# "v1-early" = 0.8.x (no engine label, gpu_cache_usage_perc, no waiting by reason);
# "v0" = V0 (gpu_cache_usage_perc, swapped, time_per_output_token histogram).
DIALECTS = ("v1", "v1-early", "v0")

_TYPES = {
    "kv_usage": "gauge",
    "running": "gauge",
    "waiting": "gauge",
    "swapped": "gauge",
    "cpu_kv_usage": "gauge",
    "engine_healthy": "gauge",
}

# (canonical -> exposed name) where a dialect differs from the first (newest) name
_V0_SCALARS = {
    "kv_usage": "vllm:gpu_cache_usage_perc",
    "prefix_queries": None,  # V0 had hit-rate gauges, not counters
    "prefix_hits": None,
}
_EARLY_SCALARS = {
    "kv_usage": "vllm:gpu_cache_usage_perc",
    "prefix_queries": "vllm:gpu_prefix_cache_queries_total",
    "prefix_hits": "vllm:gpu_prefix_cache_hits_total",
}
_V0_HISTS = {"itl": "vllm:time_per_output_token_seconds", "tpot": None}


def _num(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_esc(str(v))}"' for k, v in pairs) + "}"


def render_sample(sample: Sample, dialect: str = "v1", model_name: str | None = None) -> str:
    """Exposition text for `sample`; engines keep their `engine` label only in dialect "v1"."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    model = model_name or sample.model_name or "model"
    out: list[str] = []
    engines = sorted(sample.engines.items())

    def base_labels(eng: str) -> list[tuple[str, str]]:
        pairs = [("model_name", model)]
        if dialect == "v1":
            pairs.append(("engine", eng or "0"))
        return pairs

    def family(name: str, typ: str) -> None:
        out.append(f"# TYPE {name} {typ}")

    for canon, exposed in names.SCALARS.items():
        name: str | None = exposed[0]
        if dialect == "v0":
            name = _V0_SCALARS.get(canon, name)
        elif dialect == "v1-early":
            name = _EARLY_SCALARS.get(canon, name)
        if name is None:
            continue
        rows = [(eng, es.values[canon]) for eng, es in engines if canon in es.values]
        if not rows:
            continue
        family(name[:-6] if name.endswith("_total") else name, _TYPES.get(canon, "counter"))
        for eng, v in rows:
            pairs = base_labels(eng)
            if canon == "requests_success":
                pairs = [("finished_reason", "stop")] + pairs
            out.append(f"{name}{_labels(pairs)} {_num(v)}")

    if dialect == "v1":
        rows_w = [(eng, es.values) for eng, es in engines
                  if "waiting_capacity" in es.values or "waiting_deferred" in es.values]
        if rows_w:
            family(names.WAITING_BY_REASON, "gauge")
            for eng, vals in rows_w:
                for reason in ("capacity", "deferred"):
                    w = vals.get("waiting_" + reason)
                    if w is not None:
                        out.append(f"{names.WAITING_BY_REASON}{_labels(base_labels(eng) + [('reason', reason)])} {_num(w)}")
    if dialect == "v0":
        # a V0-only gauge, so a reader can tell the generation
        family("vllm:avg_generation_throughput_toks_per_s", "gauge")
        out.append(f"vllm:avg_generation_throughput_toks_per_s{_labels(base_labels(''))} 0.0")

    for canon, bases in names.HISTOGRAMS.items():
        base: str | None = bases[0]
        if dialect == "v0":
            base = _V0_HISTS.get(canon, base)
        if base is None:
            continue
        rows_h = [(eng, es.hists[canon]) for eng, es in engines if canon in es.hists]
        if not rows_h:
            continue
        family(base, "histogram")
        for eng, h in rows_h:
            out.extend(_hist_lines(base, base_labels(eng), h))

    if sample.cache_config:
        family(names.CACHE_CONFIG, "gauge")
        for eng in [e for e, _ in engines] or [""]:
            pairs = sorted(sample.cache_config.items())
            if dialect == "v1":
                pairs.append(("engine", eng or "0"))
            out.append(f"{names.CACHE_CONFIG}{_labels(pairs)} 1.0")
            if dialect != "v1":
                break
    if sample.process_cpu_seconds is not None:
        family("process_cpu_seconds", "counter")
        out.append(f"process_cpu_seconds_total {_num(sample.process_cpu_seconds)}")
    for k, v in sorted(sample.extra.items()):
        family(k, "gauge")
        out.append(f"{k} {_num(v)}")
    return "\n".join(out) + "\n"


def _hist_lines(base: str, pairs: list[tuple[str, str]], h: Histogram) -> list[str]:
    lines = []
    for bound, cum in zip(h.bounds, h.counts, strict=True):
        le = "+Inf" if math.isinf(bound) else repr(float(bound))
        lines.append(f"{base}_bucket{_labels(pairs + [('le', le)])} {_num(cum)}")
    if not h.bounds or not math.isinf(h.bounds[-1]):
        lines.append(f"{base}_bucket{_labels(pairs + [('le', '+Inf')])} {_num(h.count)}")
    lines.append(f"{base}_sum{_labels(pairs)} {_num(h.sum)}")
    lines.append(f"{base}_count{_labels(pairs)} {_num(h.count)}")
    return lines

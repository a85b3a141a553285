"""Non-finite values (NaN, +Inf, -Inf) out of a scrape before it reaches the history.

A page may legally say `vllm:num_requests_running +Inf`; no arithmetic downstream (rates,
`round`, `floor`, sums over engines) is meant for it. Such a value makes only its own signal
invalid: it is dropped from the sample (so it reads as "not exposed") and the reason is kept
for the screens and `--json`, while the replica's other signals and the fleet go on.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping

from .model import EngineSample, Histogram, Sample, Scrape


def _bad(v: object) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


# What a canonical signal can be at all (both engines): a value outside is a broken exporter,
# not a reading, so it is treated as a non-finite one (dropped, with its reason). Wide bounds:
# only values no server can report are refused.
_FRACTION, _COUNT, _COUNTER = (0.0, 1.05), (0.0, 1e7), (0.0, 1e19)
RANGES: dict[str, tuple[float, float]] = {
    **dict.fromkeys(("kv_usage", "cpu_kv_usage", "cache_hit_rate", "engine_healthy"), _FRACTION),
    **dict.fromkeys(("running", "waiting", "swapped", "waiting_capacity", "waiting_deferred", "retracted"), _COUNT),
    **dict.fromkeys(("preemptions", "prompt_tokens", "generation_tokens", "prefix_queries", "prefix_hits",
                     "requests_success", "requests_total", "requests_aborted", "cached_tokens"), _COUNTER),
    **dict.fromkeys(("used_tokens", "max_total_tokens", "gen_throughput"), (0.0, 1e12)),
}


def _invalid_reason(k: str, v: object) -> str | None:
    """Why value `v` of signal `k` cannot be used (None: it can)."""
    if not isinstance(v, float):
        return None
    if not math.isfinite(v):
        return f"{k} is {_what(v)}"
    lo_hi = RANGES.get(k)
    if lo_hi is not None and not lo_hi[0] <= v <= lo_hi[1]:
        return f"{k} is {v:g}, out of range"
    return None


def _what(v: float) -> str:
    return "NaN" if math.isnan(v) else ("+Inf" if v > 0 else "-Inf")


def _hist_ok(h: Histogram) -> bool:
    # The last bound is +Inf by definition; counts and sums must be finite. math.isfinite over
    # the counts in C: every bucket of every histogram of every scrape passes through here.
    try:
        return math.isfinite(h.sum) and math.isfinite(h.count) and all(map(math.isfinite, h.counts))
    except (TypeError, OverflowError):  # not all floats: only a float can be non-finite (_bad)
        return not (_bad(h.sum) or _bad(h.count) or any(_bad(c) for c in h.counts))


def _finite_sum(total: float) -> bool:
    return total - total == 0.0  # an Inf or NaN anywhere in a sum makes it Inf or NaN


_range = RANGES.get


def _all_usable(scrape: Scrape) -> bool:
    """True when `scrape` has no value `_finite_scrape_full` would drop (False: it may have one).
    Sums instead of a call per value: a sum of finite numbers is finite unless it overflows,
    and anything else (a non-number, an overflow) is left to the full check."""
    try:
        sample = scrape.sample
        if sample is not None:
            for es in sample.engines.values():
                values = es.values
                if not _finite_sum(sum(values.values(), 0.0)):
                    return False
                for k, v in values.items():  # (a page has fewer values than RANGES names)
                    r = _range(k)
                    if r is not None and isinstance(v, float) and not r[0] <= v <= r[1]:
                        return False
                total = 0.0
                for h in es.hists.values():
                    total += h.sum + h.count + sum(h.counts, 0.0)
                if not _finite_sum(total):
                    return False
            cpu = sample.process_cpu_seconds
            if cpu is not None and _bad(cpu):
                return False
            if sample.extra and not _finite_sum(sum(sample.extra.values(), 0.0)):
                return False
        return not scrape.derived or _finite_sum(sum(scrape.derived.values(), 0.0))
    except (TypeError, OverflowError):
        return False


def finite_scrape(scrape: Scrape) -> tuple[Scrape, dict[str, str]]:
    """`scrape` without its non-finite values, and {signal: reason} for each one dropped."""
    if _all_usable(scrape):  # (every value of nearly every page: no call per value)
        return scrape, {}
    return _finite_scrape_full(scrape)


def _finite_scrape_full(scrape: Scrape) -> tuple[Scrape, dict[str, str]]:
    """`finite_scrape`, value by value."""
    invalid: dict[str, str] = {}
    sample = scrape.sample
    if sample is not None:
        sample = _finite_sample(sample, invalid)
    derived: Mapping[str, float] = scrape.derived
    if any(_bad(v) for v in derived.values()):
        derived = {}
        for k, v in scrape.derived.items():
            if _bad(v):
                invalid[k] = f"{k} is {_what(v)}, ignored"
            else:
                derived[k] = v
    if not invalid:
        return scrape, invalid
    return replace(scrape, sample=sample, derived=derived), invalid


def _finite_sample(sample: Sample, invalid: dict[str, str]) -> Sample:
    changed = False
    engines: dict[str, EngineSample] = {}
    for name, es in sample.engines.items():
        values, hists = es.values, es.hists
        if any(_invalid_reason(k, v) for k, v in values.items()):
            values = {}
            for k, v in es.values.items():
                why = _invalid_reason(k, v)
                if why:
                    where = f" (engine {name})" if name else ""
                    invalid.setdefault(k, f"{why}{where}, ignored")
                else:
                    values[k] = v
        if not all(_hist_ok(h) for h in hists.values()):
            hists = {k: h for k, h in es.hists.items() if _hist_ok(h)}
            for k in es.hists.keys() - hists.keys():
                invalid.setdefault(k, f"{k} histogram has a non-finite count or sum, ignored")
        if values is not es.values or hists is not es.hists:
            changed = True
            es = EngineSample(values, hists)
        engines[name] = es
    cpu = sample.process_cpu_seconds
    if cpu is not None and _bad(cpu):
        invalid["process_cpu_seconds"] = f"process_cpu_seconds is {_what(cpu)}, ignored"
        cpu, changed = None, True
    extra = sample.extra
    if any(_bad(v) for v in extra.values()):
        extra, changed = {k: v for k, v in extra.items() if not _bad(v)}, True
    if not changed:
        return sample
    return replace(sample, engines=engines, process_cpu_seconds=cpu, extra=extra)

"""PromQL for the Prometheus source: a few queries that read a whole fleet, whatever its size.

Every query aggregates `by (namespace, pod, instance[, engine])` so the answer carries only the
labels kvwatch uses. Several expressions are folded into one query with `or`, each tagged by
`label_replace` with a `kvw` label naming the ReplicaMetrics field it fills (without distinct
labels `or` would drop all but the first, as it matches label sets ignoring the metric name).
Both vLLM generations are covered: gauges by fetching every alias and picking in names.SCALARS
order, counters and histograms with `rate(new) or rate(old)` (per-series fallback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..metrics import names
from .base import SourceError
from ..textsafe import clean

# Labels that identify a replica (pod, else the scrape target) and, within it, an engine.
REPLICA_LABELS = ("namespace", "pod", "instance")
TAG = "kvw"  # label naming the derived field a series of a folded query fills

# Raw gauges and counters fetched per engine. Counters stay raw so ReplicaHistory can derive
# rates itself when the rate query fails; request_success is left out (one series per
# finish reason, many series for a fallback only).
RAW_SCALARS = tuple(c for c in names.SCALARS if c != "requests_success")
RAW_LABELS = ("__name__", *REPLICA_LABELS, "engine", "model_name", "reason")

# ReplicaMetrics field -> canonical counter whose per-second rate it is.
RATES = {
    "preemptions_per_s": "preemptions",
    "gen_tokens_per_s": "generation_tokens",
    "prompt_tokens_per_s": "prompt_tokens",
    "requests_per_s": "requests_success",
}

# ReplicaMetrics field -> (canonical histogram, quantile).
QUANTILES = {
    "ttft_p50_s": ("ttft", 0.50),
    "ttft_p95_s": ("ttft", 0.95),
    "ttft_p99_s": ("ttft", 0.99),
    "itl_p50_s": ("itl", 0.50),
    "itl_p95_s": ("itl", 0.95),
    "itl_p99_s": ("itl", 0.99),
    "e2e_p50_s": ("e2e", 0.50),
    "e2e_p95_s": ("e2e", 0.95),
    "e2e_p99_s": ("e2e", 0.99),
    "queue_p95_s": ("queue_time", 0.95),
    "prompt_len_p95": ("prompt_len", 0.95),
    "gen_len_p95": ("gen_len", 0.95),
    "max_tokens_p95": ("max_tokens", 0.95),
}

# The quantile fields grouped by histogram family: one query each, evaluated in parallel.
QUANTILE_GROUPS: tuple[tuple[str, ...], ...] = tuple(
    tuple(f for f, (c, _) in QUANTILES.items() if c == canon) for canon in dict.fromkeys(c for c, _ in QUANTILES.values())
)

UP_DOWN = "up_down"  # TAG value of targets Prometheus fails to scrape (up == 0)

_MATCHER = re.compile(r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*')


def parse_match(match: str | None) -> str:
    """The matchers inside a user selector: '{namespace="x"}' or 'namespace="x"' -> 'namespace="x"'.

    Only label matchers are accepted (no metric name, no functions), so the text can be merged
    into every query; anything else is a SourceError naming the flag.
    """
    text = (match or "").strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if not text:
        return ""
    pos, out = 0, []
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if m is None:
            raise SourceError(
                f"bad --match {clean(match or '')!r}: expected label matchers such as "
                "'{namespace=\"inference\",app=~\"vllm.*\"}'"
            )
        out.append(m.group().strip())
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise SourceError(f"bad --match {clean(match or '')!r}: matchers must be separated by ','")
            pos += 1
    if any(o.split("=")[0].strip().rstrip("!~") == "__name__" for o in out):
        raise SourceError(f"bad --match {clean(match or '')!r}: select labels, not metric names")
    return ",".join(out)


def selector(metric: str, match: str, extra: str = 'server=""') -> str:
    """`metric{match,extra}`. `server=""` drops the production-stack router's vllm:* series."""
    inner = ",".join(x for x in (match, extra) if x)
    return f"{metric}{{{inner}}}"


def _by(*labels: str) -> str:
    return ", ".join(labels)


def _tag(expr: str, field: str) -> str:
    return f'label_replace({expr}, "{TAG}", "{field}", "", "")'


def _fold(parts: list[str]) -> str:
    return " or ".join(parts)


def window(seconds: float) -> str:
    return f"{max(1, int(round(seconds)))}s"


def raw_names() -> tuple[str, ...]:
    out: list[str] = []
    for canon in RAW_SCALARS:
        out.extend(names.SCALARS[canon])
    out.append(names.WAITING_BY_REASON)
    return tuple(dict.fromkeys(out))


SAMPLE_TS = "sample_ts"  # TAG value: when Prometheus last scraped the replica (unix seconds)
PROCESS_CPU = "process_cpu"  # TAG value: the API server's process_cpu_seconds_total


def scalars_query(match: str) -> str:
    """Every gauge/counter alias, one series per replica, engine and name; plus, per replica,
    the time of its latest scrape and its API server's CPU seconds counter."""
    regex = "|".join(raw_names())  # plain [a-z_:] names: nothing to escape
    sel = "{" + ",".join(x for x in (f'__name__=~"{regex}"', match, 'server=""') if x) + "}"
    running = selector("vllm:num_requests_running", match)
    parts = [
        f"max by ({_by(*RAW_LABELS)}) ({sel})",
        _tag(f"max by ({_by(*REPLICA_LABELS)}) (timestamp({running}))", SAMPLE_TS),
        # Only processes that also expose vLLM series: the match may select other exporters.
        _tag(f"max by ({_by(*REPLICA_LABELS)}) ({selector(names.PROCESS_CPU, match, '')} and on (instance) {running})",
             PROCESS_CPU),
    ]
    return _fold(parts)


def _rate_sum(canon: str, match: str, w: str, by: tuple[str, ...] = REPLICA_LABELS) -> str:
    alts = " or ".join(f"rate({selector(n, match)}[{w}])" for n in names.SCALARS[canon])
    return f"sum by ({_by(*by)}) ({alts})"


def rates_query(match: str, rate_window_s: float, fields: tuple[str, ...] | None = None) -> str:
    """Per-replica rates, prefix-cache hit ratio, API-server CPU and down targets, folded."""
    w = window(rate_window_s)
    want = set(fields) if fields is not None else None
    parts = []
    for field, canon in RATES.items():
        if want is None or field in want:
            parts.append(_tag(_rate_sum(canon, match, w), field))
    if want is None or "prefix_hit_rate" in want:
        hits = _rate_sum("prefix_hits", match, w)
        queries = _rate_sum("prefix_queries", match, w)
        parts.append(_tag(f"{hits} / ({queries} > 0)", "prefix_hit_rate"))
    if want is None or "cpu_cores" in want:
        cpu = (
            f"sum by ({_by(*REPLICA_LABELS)}) (rate({selector(names.PROCESS_CPU, match, '')}[{w}])"
            f" and on (instance) {selector('vllm:num_requests_running', match)})"
        )
        parts.append(_tag(cpu, "cpu_cores"))
    if want is None:
        up = f"max by ({_by(*REPLICA_LABELS)}) ({selector('up', match, '')}) == 0"
        parts.append(_tag(up, UP_DOWN))
    return _fold(parts)


def quantiles_query(match: str, rate_window_s: float, fields: tuple[str, ...] | None = None) -> str:
    """histogram_quantile per replica (over all its engines), folded."""
    w = window(rate_window_s)
    parts = []
    for field, (canon, q) in QUANTILES.items():
        if fields is not None and field not in fields:
            continue
        alts = " or ".join(f"rate({selector(b + '_bucket', match)}[{w}])" for b in names.HISTOGRAMS[canon])
        parts.append(_tag(f"histogram_quantile({q:g}, sum by ({_by(*REPLICA_LABELS, 'le')}) ({alts}))", field))
    return _fold(parts)


def cache_config_query(match: str) -> str:
    return selector(names.CACHE_CONFIG, match)


@dataclass(frozen=True, slots=True)
class FleetQueries:
    """The query texts of one refresh (built once per source; the match never changes)."""

    scalars: str
    rates: str
    quantiles: str
    cache_config: str

    @classmethod
    def build(cls, match: str, rate_window_s: float) -> "FleetQueries":
        return cls(
            scalars=scalars_query(match),
            rates=rates_query(match, rate_window_s),
            quantiles=quantiles_query(match, rate_window_s),
            cache_config=cache_config_query(match),
        )

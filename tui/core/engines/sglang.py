"""SGLang: everything kvwatch knows about this engine, behind the `Engine` interface.

SGLang's failure is vLLM's: its token pool (the KV cache) fills, the scheduler *retracts*
running requests (its preemption: they go back to the queue and are recomputed), and the
queue grows. So its page maps onto the same canonical signals: `sglang:token_usage` is the KV
usage, `sglang:num_retracted_requests_total` the preemption counter, `sglang:num_queue_reqs`
the waiting queue (shared/reference/engines-metrics.md, section 2 and the table).

Ranks: SGLang labels scheduler series with `dp_rank` (data parallel), `tp_rank` / `pp_rank`.
One pod is one replica; each data-parallel rank is one of its engines (keyed by `dp_rank`,
"" without it). Tensor-parallel ranks of one scheduler report the same state, so several rows
of one dp rank are not added up: the worst (largest) is kept. What an older SGLang does not
expose stays missing, never 0.

Flags: SGLang's own names and defaults (`python -m sglang.launch_server --help`, ServerArgs).
Several defaults are derived at start-up from the GPU (mem-fraction-static, chunked-prefill-size,
max-running-requests, max-total-tokens): the note on each flag says so.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..metrics.extract import _unlabelled
from ..metrics.parser import Page, histogram_series, parse
from ..model import EngineSample, Histogram, Sample
from .base import ArgSpec, Engine

PREFIX = "sglang:"

# canonical scalar -> exposed names (first found wins; counters with their `_total`)
SCALARS: dict[str, tuple[str, ...]] = {
    "kv_usage": ("sglang:token_usage",),
    "running": ("sglang:num_running_reqs",),
    "waiting": ("sglang:num_queue_reqs",),
    "preemptions": ("sglang:num_retracted_requests_total",),
    "retracted": ("sglang:num_retracted_reqs",),  # retracted in the last scheduler step (gauge)
    "used_tokens": ("sglang:num_used_tokens",),
    "max_total_tokens": ("sglang:max_total_num_tokens",),
    "cache_hit_rate": ("sglang:cache_hit_rate",),
    "gen_throughput": ("sglang:gen_throughput",),
    "prompt_tokens": ("sglang:prompt_tokens_total",),
    "generation_tokens": ("sglang:generation_tokens_total",),
    "cached_tokens": ("sglang:cached_tokens_total",),
    "requests_total": ("sglang:num_requests_total",),
    "requests_aborted": ("sglang:num_aborted_requests_total",),
}

# canonical histogram -> exposed base names
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("sglang:time_to_first_token_seconds",),
    "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    "e2e": ("sglang:e2e_request_latency_seconds",),
    "queue_time": ("sglang:queue_time_seconds",),
    "prompt_len": ("sglang:prompt_tokens_histogram",),
    "gen_len": ("sglang:generation_tokens_histogram",),
}

CACHE_CONFIG = "sglang:cache_config_info"
PROCESS_CPU = "process_cpu_seconds_total"
EXTRA = ("process_start_time_seconds", "process_resident_memory_bytes")
RANK = "dp_rank"
# Labels that say where a series comes from, not what the cache is.
_PLACE_LABELS = frozenset({"model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank", "moe_ep_rank", "pid"})


def _wanted() -> frozenset[str]:
    out = {n for exposed in SCALARS.values() for n in exposed}
    for bases in HISTOGRAMS.values():
        for base in bases:
            out.update(histogram_series(base))
    return frozenset(out | {CACHE_CONFIG, PROCESS_CPU, *EXTRA})


WANTED = _wanted()


def _rank(labels: Mapping[str, str]) -> str:
    return labels.get(RANK, "")


def _histograms(page: Page, base: str) -> dict[str, Histogram]:
    """One Histogram per dp rank; series of one rank that differ otherwise are added up
    (tokenizer workers each count their own requests)."""
    bucket_name, sum_name, count_name = histogram_series(base)
    series: dict[tuple[Any, ...], dict[float, float]] = {}
    for labels, v in page.get(bucket_name):
        ident, bound = labels.hist_key()
        if bound is not None:
            series.setdefault(ident, {})[bound] = v
    sums = {labels.hist_key()[0]: v for labels, v in page.get(sum_name)}
    counts = {labels.hist_key()[0]: v for labels, v in page.get(count_name)}
    out: dict[str, Histogram] = {}
    for ident, by_le in series.items():
        count = counts.get(ident)
        if float("inf") not in by_le:
            if count is None:
                continue  # neither +Inf nor _count: the total is unknown
            by_le[float("inf")] = count
        bounds = tuple(sorted(by_le))
        h = Histogram(bounds, tuple(by_le[b] for b in bounds), sums.get(ident, float("nan")),
                      count if count is not None else by_le[float("inf")])
        rank = dict(ident).get(RANK, "")
        out[rank] = h if rank not in out else out[rank] + h
    return out


def to_sample(page: Page) -> Sample:
    """An SGLang page in canonical names, one engine per dp rank; `engines` is empty when the
    page carries no SGLang scheduler or tokenizer series."""
    values: dict[str, dict[str, float]] = {}
    model_name: str | None = None
    for canon, candidates in SCALARS.items():
        name = next((n for n in candidates if page.get(n)), None)
        if name is None:
            continue
        for labels, v in page.get(name):
            if v != v:  # NaN: no value to give
                continue
            if model_name is None:
                model_name = labels.get("model_name")
            ev = values.setdefault(_rank(labels), {})
            ev[canon] = max(ev[canon], v) if canon in ev else v  # TP ranks repeat one scheduler
    hists: dict[str, dict[str, Histogram]] = {}
    for canon, bases in HISTOGRAMS.items():
        for base in bases:
            per_rank = _histograms(page, base)
            if per_rank:
                for rank, h in per_rank.items():
                    hists.setdefault(rank, {})[canon] = h
                break
    cache_config: dict[str, str] = {}
    rows = sorted(page.get(CACHE_CONFIG), key=lambda r: _rank(r[0]))
    if rows:
        cache_config = {k: v for k, v in rows[0][0].items() if k not in _PLACE_LABELS}
        model_name = model_name or rows[0][0].get("model_name")
    for rank in hists:
        values.setdefault(rank, {})
    engines = {r: EngineSample(values=vals, hists=hists.get(r, {})) for r, vals in values.items()}
    return Sample(
        engines=engines,
        generation="sglang",
        engine="sglang",
        model_name=model_name,
        cache_config=cache_config,
        process_cpu_seconds=_api_cpu(page),
        extra={n: x for n in EXTRA if (x := _unlabelled(page, n)) is not None},
    )


def _api_cpu(page: Page) -> float | None:
    """The API server's CPU seconds: the unlabelled series, or SGLang's own per-process series
    for the tokenizer manager (`component="tokenizer"`), the process that serves HTTP."""
    v = _unlabelled(page, PROCESS_CPU)
    if v is not None:
        return v
    for labels, x in page.get(PROCESS_CPU):
        if labels.get("component") == "tokenizer" and x == x:
            return x
    return None


def parse_page(text: str) -> Sample:
    return to_sample(parse(text, WANTED))


# -- flags -------------------------------------------------------------------------------------

KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
DTYPE_BYTES = {
    "float16": 2.0, "half": 2.0, "bfloat16": 2.0, "bf16": 2.0, "float32": 4.0,
    "fp8_e5m2": 1.0, "fp8_e4m3": 1.0, "fp4_e2m1": 0.5,
}

# ServerArgs picks mem_fraction_static from the GPU and the TP size when the flag is absent;
# 0.88 is what a single large GPU gets (less with TP and on small cards).
MEM_FRACTION_STATIC_DEFAULT = 0.88

SPECS: dict[str, ArgSpec] = {
    s.name: s
    for s in (
        ArgSpec("model-path", "str", None, None, "required", False, aliases=("model",)),
        ArgSpec("max-running-requests", "int", None, None,
                "derived from the token pool when absent (the pool's tokens / context budget)"),
        ArgSpec("chunked-prefill-size", "int", None, None,
                "derived from the GPU when absent (8192 on >= 80 GiB GPUs, 2048-4096 on smaller); -1 disables"),
        ArgSpec("mem-fraction-static", "float", None, None,
                f"derived from the GPU and TP size when absent (~{MEM_FRACTION_STATIC_DEFAULT} on one large GPU); "
                "fraction of GPU memory for weights + KV pool"),
        ArgSpec("max-total-tokens", "int", None, None, "token-pool size; derived from memory when absent"),
        ArgSpec("context-length", "tokens", None, None, "derived from the model config"),
        ArgSpec("schedule-conservativeness", "float", 1.0, 1.0,
                "above 1 admits fewer requests (fewer retractions), below 1 more"),
        ArgSpec("max-prefill-tokens", "int", 16384, 16384, "token budget of one prefill batch"),
        ArgSpec("page-size", "int", 1, 1, "tokens per KV page"),
        ArgSpec("kv-cache-dtype", "choice", "auto", "auto", "auto = the model dtype", choices=KV_CACHE_DTYPES),
        # store_true with no --no- form: shown, not edited (kvwatch could not write it back off)
        ArgSpec("disable-radix-cache", "bool", False, False, "prefix (radix) cache off", False),
        ArgSpec("tp-size", "int", 1, 1, "GPUs per data-parallel rank", False, aliases=("tp", "tensor-parallel-size")),
        ArgSpec("dp-size", "int", 1, 1, "data-parallel ranks in the pod", False, aliases=("dp", "data-parallel-size")),
    )
}
EDITABLE = (
    "max-running-requests",
    "chunked-prefill-size",
    "mem-fraction-static",
    "max-total-tokens",
    "context-length",
    "schedule-conservativeness",
    "max-prefill-tokens",
    "page-size",
    "kv-cache-dtype",
)
KV_ARGS = EDITABLE + ("disable-radix-cache", "tp-size", "dp-size", "model-path")
BOOLEAN_FLAGS = frozenset({
    "trust-remote-code", "enable-metrics", "disable-radix-cache", "disable-cuda-graph", "enable-dp-attention",
    "enable-torch-compile", "skip-tokenizer-init", "log-requests", "enable-mixed-chunk", "disable-overlap-schedule",
    "enable-p2p-check", "is-embedding", "enable-cache-report",
})
MODULES = ("sglang.launch_server",)
STRONG_FLAGS = frozenset({"model-path", "mem-fraction-static", "max-running-requests", "chunked-prefill-size",
                          "schedule-conservativeness", "max-total-tokens"})

ENGINE = Engine(
    name="sglang",
    label="SGLang",
    metric_prefixes=(PREFIX,),
    parse_page=parse_page,
    scalars=SCALARS,
    histograms=HISTOGRAMS,
    commands=(("sglang", "serve"),),
    modules=MODULES,
    images=("lmsysorg/sglang",),
    strong_flags=STRONG_FLAGS,
    arg_specs=SPECS,
    editable=EDITABLE,
    kv_args=KV_ARGS,
    boolean_flags=BOOLEAN_FLAGS,
    kv_cache_dtypes=KV_CACHE_DTYPES,
    dtype_bytes=DTYPE_BYTES,
    signal_labels={"kv_usage": "token usage", "preemptions": "retractions"},
)

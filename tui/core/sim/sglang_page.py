"""A simulated replica's engine families under SGLang's names (`sglang:` prefix).

The scheduler model is the same for both engines (a paged pool, a running cap, chunked prefill,
requests pushed back to the queue when the pool runs out); an SGLang replica only speaks of it
in SGLang's words: `token_usage` for the pool, `num_queue_reqs` for the queue, retractions for
preemptions (shared/reference/engines-metrics.md, section 2). Labels as a real SGLang scheduler
sets them (`engine_type`, `model_name`, `pp_rank`, `tp_rank`, and `dp_rank` per data-parallel
rank); the tokenizer's histograms carry `model_name` only, as one tokenizer serves every rank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import buckets as B
from .engine import Engine

if TYPE_CHECKING:
    from .replica import Replica

# (canonical hist key on the engine, exposed base name, HELP, bounds)
_HISTS = (
    ("ttft", "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", B.TTFT_V1),
    ("itl", "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", B.ITL_V1),
    ("e2e", "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
     B.LATENCY_V1),
    ("queue_time", "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", B.LATENCY_V1),
)


def render(r: "Replica", gostr: Callable[[float], str], header: Callable[[str, str, str], str],
           labels: Callable[[dict[str, Any]], str]) -> str:
    """The replica's `sglang:` families (empty before its engines start)."""
    if not r.engines:
        return ""
    model = r.model.name
    dp = len(r.engines) > 1
    base = {"engine_type": "unified", "model_name": model, "pp_rank": "0", "tp_rank": "0"}
    lbl = [labels({**base, "dp_rank": str(e.index)} if dp else base) for e in r.engines]
    plan = r.plan
    pool = plan.kv_cache_size_tokens if plan is not None else 0
    gen_tps = r.throughput()[1] / len(r.engines)
    out: list[str] = []

    def family(name: str, help_: str, typ: str, value: Callable[[Engine], float]) -> None:
        out.append(header(name, help_, typ))
        out.extend(f"{name}{lb} {gostr(value(e))}\n" for e, lb in zip(r.engines, lbl, strict=True))

    family("sglang:num_running_reqs", "The number of running requests.", "gauge", lambda e: e.num_running)
    family("sglang:num_used_tokens", "The number of used tokens.", "gauge", lambda e: round(e.kv_usage * pool))
    family("sglang:token_usage", "The token usage.", "gauge", lambda e: round(e.kv_usage, 4))
    family("sglang:gen_throughput", "The generation throughput (token/s).", "gauge", lambda e: round(gen_tps, 3))
    family("sglang:num_queue_reqs", "The number of requests in the waiting queue.", "gauge", lambda e: e.num_waiting)
    family("sglang:cache_hit_rate", "The prefix cache hit rate.", "gauge",
           lambda e: round(e.c.prefix_hits / e.c.prefix_queries, 4) if e.c.prefix_queries else 0.0)
    family("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", "gauge",
           lambda e: pool)
    family("sglang:num_retracted_requests_total", "Total number of retracted requests.", "counter",
           lambda e: e.c.preemptions)
    if plan is not None:
        name = "sglang:cache_config_info"
        out.append(header(name, "Cache configuration.", "gauge"))
        page = str(r.resolved.block_size)
        for e in r.engines:
            d = {"model_name": model, "num_pages": str(plan.num_gpu_blocks), "page_size": page}
            out.append(f"{name}{labels({**d, 'dp_rank': str(e.index)} if dp else d)} 1.0\n")

    tok = labels({"model_name": model})
    counters: tuple[tuple[str, str, Callable[[Any], float]], ...] = (
        ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", lambda c: c.prompt_tokens),
        ("sglang:generation_tokens_total", "Number of generation tokens processed.", lambda c: c.generation_tokens),
        ("sglang:cached_tokens_total", "Number of cached prompt tokens.", lambda c: c.prompt_cached),
        ("sglang:num_requests_total", "Number of requests processed.", lambda c: sum(c.success.values())),
    )
    for name, help_, value in counters:
        out.append(header(name, help_, "counter"))
        out.append(f"{name}{tok} {gostr(sum(value(e.c) for e in r.engines))}\n")
    for key, name, help_, bounds in _HISTS:
        out.append(header(name, help_, "histogram"))
        hs = [e.h[key] for e in r.engines]
        cum = [sum(col) for col in zip(*(h.cumulative(bounds) for h in hs), strict=True)]
        for b, v in zip(tuple(bounds) + (float("inf"),), cum, strict=True):
            out.append(f"{name}_bucket{labels({'le': gostr(b), 'model_name': model})} {gostr(v)}\n")
        out.append(f"{name}_sum{tok} {gostr(sum(h.sum for h in hs))}\n")
        out.append(f"{name}_count{tok} {gostr(sum(h.count for h in hs))}\n")
    return "".join(out)

"""A real-size vLLM V1 (0.10-era) /metrics page for the benchmarks.

Same families, label sets, bucket layouts, HELP/TYPE lines and `_created` series as a vLLM
0.10 API server with one engine, the Python client's process/GC series included: about 42 KB
and 320 samples, like the page the ingestion budget was measured on.

`step` (0 = the page as it always was) renders the same server `step` seconds later: every
counter, histogram bucket, `_count` and `_sum` has grown by a realistic amount per second (a
busy replica: ~8 requests/s, ~4,800 prompt and ~1,500 generation tokens/s, one ITL observation
per generated token), the gauges (running, waiting, KV usage) move a little, and the lines and
labels stay the same. Deterministic: (seed, step) gives one page, and no value that a counter
holds is ever lower at a later step (each grows by r*s + r/2*(cos(phi) - cos(0.7*s + phi)),
whose step-to-step rise is at least 0.65*r).
"""

from __future__ import annotations

import math
import random

TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
       20.0, 40.0, 80.0)
LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
           240.0, 480.0, 960.0, 1920.0, 7680.0)
TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000)
ITERATION = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N = (1, 2, 5, 10, 20)
PREEMPT = (1, 2, 3, 4, 5, 10, 20)

HISTS = (
    ("vllm:time_to_first_token_seconds", TTFT, "Histogram of time to first token in seconds."),
    ("vllm:inter_token_latency_seconds", ITL, "Histogram of inter-token latency in seconds."),
    ("vllm:request_time_per_output_token_seconds", ITL, "Histogram of time_per_output_token_seconds per request."),
    ("vllm:e2e_request_latency_seconds", LATENCY, "Histogram of e2e request latency in seconds."),
    ("vllm:request_queue_time_seconds", LATENCY, "Histogram of time spent in WAITING phase for request."),
    ("vllm:request_inference_time_seconds", LATENCY, "Histogram of time spent in RUNNING phase for request."),
    ("vllm:request_prefill_time_seconds", LATENCY, "Histogram of time spent in PREFILL phase for request."),
    ("vllm:request_decode_time_seconds", LATENCY, "Histogram of time spent in DECODE phase for request."),
    ("vllm:request_prompt_tokens", TOKENS, "Number of prefill tokens processed."),
    ("vllm:request_generation_tokens", TOKENS, "Number of generation tokens processed."),
    ("vllm:request_params_max_tokens", TOKENS, "Histogram of the max_tokens request parameter."),
    ("vllm:iteration_tokens_total", ITERATION, "Histogram of number of tokens per engine_step."),
    ("vllm:request_params_n", PARAMS_N, "Histogram of the n request parameter."),
)
COUNTERS = (
    ("vllm:num_preemptions", "Cumulative number of preemption from the engine."),
    ("vllm:prompt_tokens", "Number of prefill tokens processed."),
    ("vllm:generation_tokens", "Number of generation tokens processed."),
    ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."),
    ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."),
    ("vllm:gpu_prefix_cache_queries", "GPU prefix cache queries, in terms of number of queried tokens. "
     "DEPRECATED: Use vllm:prefix_cache_queries instead."),
    ("vllm:gpu_prefix_cache_hits", "GPU prefix cache hits, in terms of number of cached tokens. "
     "DEPRECATED: Use vllm:prefix_cache_hits instead."),
)

# growth per second (per step) of a busy replica; histograms: observations per second
COUNTER_RATES = {
    "vllm:num_preemptions": 0.05, "vllm:prompt_tokens": 4800.0, "vllm:generation_tokens": 1500.0,
    "vllm:prefix_cache_queries": 4800.0, "vllm:prefix_cache_hits": 2500.0,
    "vllm:gpu_prefix_cache_queries": 4800.0, "vllm:gpu_prefix_cache_hits": 2500.0,
}
SUCCESS_RATES = {"stop": 6.0, "length": 2.0, "abort": 0.1}
HIST_RATES = {"vllm:inter_token_latency_seconds": 1500.0, "vllm:iteration_tokens_total": 40.0}
REQUESTS_PER_S = 8.0  # every other histogram: one observation per finished request
MIDS = {"vllm:request_params_n": 1.0}


def grown(rate: float, step: int, phase: float) -> float:
    """How much a counter growing at `rate` per second has grown after `step` seconds: never less
    at a later step, 0 at step 0, jittered around the rate so successive deltas differ."""
    if step <= 0:
        return 0.0
    return rate * step + 0.5 * rate * (math.cos(phase) - math.cos(0.7 * step + phase))


def _phase(seed: int, k: int) -> float:
    return (seed * 0.618 + k * 1.3) % (2 * math.pi)


def render_v1_page(
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
    engines: int = 1,
    seed: int = 0,
    kv_usage: float = 0.4213,
    running: int = 37,
    waiting: int = 0,
    step: int = 0,
) -> str:
    rnd = random.Random(seed)
    slot = iter(range(10_000))  # one phase per growing series, in page order

    def up(value: float, rate: float) -> float:
        """`value` (the step-0 count) grown to this step, whole: counts are integers."""
        return float(value + int(grown(rate, step, _phase(seed, next(slot)))))

    if step > 0:  # the gauges move a little; 0 at step 0
        running = max(0, running + round(3 * (math.sin(0.3 * step + seed) - math.sin(seed))))
        waiting = max(0, waiting + max(0, round(2 * math.sin(0.5 * step))))
        kv_usage = round(min(1.0, max(0.0, kv_usage + 0.03 * (math.sin(0.2 * step + seed) - math.sin(seed)))), 4)
    out: list[str] = []
    add = out.append

    def fam(name: str, typ: str, help_: str) -> None:
        add(f"# HELP {name} {help_}")
        add(f"# TYPE {name} {typ}")

    created = 1.7537953269352946e09
    fam("python_gc_objects_collected_total", "counter", "Objects collected during gc")
    for gen in ("0", "1", "2"):
        add(f'python_gc_objects_collected_total{{generation="{gen}"}} {up(rnd.randint(100, 90000), 40.0)}')
    fam("python_gc_objects_uncollectable_total", "counter", "Uncollectable objects found during GC")
    for gen in ("0", "1", "2"):
        add(f'python_gc_objects_uncollectable_total{{generation="{gen}"}} 0.0')
    fam("python_gc_collections_total", "counter", "Number of times this generation was collected")
    for gen in ("0", "1", "2"):
        add(f'python_gc_collections_total{{generation="{gen}"}} {up(rnd.randint(10, 9000), 0.5)}')
    fam("python_info", "gauge", "Python platform information")
    add('python_info{implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"} 1.0')
    for name, typ, val in (
        ("process_virtual_memory_bytes", "gauge", 9.5e10),
        ("process_resident_memory_bytes", "gauge", 3.1e9),
        ("process_start_time_seconds", "gauge", 1.75379531e9),
        ("process_cpu_seconds_total", "counter", 1234.56),
        ("process_open_fds", "gauge", 97.0),
        ("process_max_fds", "gauge", 1048576.0),
    ):
        fam(name, typ, name.replace("_", " "))
        if typ == "counter":  # ~1.1 CPU-seconds a second, to the 10 ms
            val = round(val + grown(1.1, step, _phase(seed, 9999)), 2)
        add(f"{name} {val!r}")

    for e in range(engines):
        lab = f'engine="{e}",model_name="{model}"'
        fam("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.")
        add(f"vllm:num_requests_running{{{lab}}} {float(running)}")
        fam("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.")
        add(f"vllm:num_requests_waiting{{{lab}}} {float(waiting)}")
        fam("vllm:gpu_cache_usage_perc", "gauge",
            "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.")
        add(f"vllm:gpu_cache_usage_perc{{{lab}}} {kv_usage!r}")
        fam("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.")
        add(f"vllm:kv_cache_usage_perc{{{lab}}} {kv_usage!r}")
        for name, help_ in COUNTERS:
            fam(name + "_total", "counter", help_)
            add(f"{name}_total{{{lab}}} {up(rnd.randint(0, 10**7), COUNTER_RATES[name])}")
            fam(name + "_created", "gauge", help_)
            add(f"{name}_created{{{lab}}} {created!r}")
        fam("vllm:request_success_total", "counter", "Count of successfully processed requests.")
        for reason in ("stop", "length", "abort"):
            count = up(rnd.randint(0, 9999), SUCCESS_RATES[reason])
            add(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} {count}')
        fam("vllm:request_success_created", "gauge", "Count of successfully processed requests.")
        for reason in ("stop", "length", "abort"):
            add(f'vllm:request_success_created{{{lab},finished_reason="{reason}"}} {created!r}')
        for base, bounds, help_ in HISTS:
            fam(base, "histogram", help_)
            n = rnd.randint(1000, 100000)
            cum, counts = 0, []
            for _ in bounds:
                counts.append(rnd.randint(0, max(1, (n - cum) // 3)))
                cum += counts[-1]
            counts.append(n - cum)  # the +Inf bucket's own
            total = rnd.random()
            rate = HIST_RATES.get(base, REQUESTS_PER_S)
            # new observations fall as the old ones did; each adds its bucket's middle to _sum
            new = [int(grown(rate * c / n, step, _phase(seed, next(slot)))) for c in counts]
            lows = (0.0, *bounds)
            mids = [(lo + hi) / 2 for lo, hi in zip(lows, bounds, strict=False)] + [2.0 * bounds[-1]]
            cum = 0
            for b, c, d in zip(bounds, counts, new, strict=False):
                cum += c + d
                add(f'{base}_bucket{{engine="{e}",le="{float(b)}",model_name="{model}"}} {float(cum)}')
            grown_n = n + sum(new)
            add(f'{base}_bucket{{engine="{e}",le="+Inf",model_name="{model}"}} {float(grown_n)}')
            add(f"{base}_count{{{lab}}} {float(grown_n)}")
            added = sum(d * MIDS.get(base, m) for d, m in zip(new, mids, strict=True))
            add(f"{base}_sum{{{lab}}} {n * total * 3 + added!r}")
            fam(base + "_created", "gauge", help_)
            add(f"{base}_created{{{lab}}} {created!r}")
        fam("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
        add(
            "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales=\"False\","
            "cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"" + str(e) + "\","
            "gpu_memory_utilization=\"0.9\",is_attention_free=\"False\",num_cpu_blocks=\"None\","
            "num_gpu_blocks=\"27915\",num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"builtin\","
            "sliding_window=\"None\",swap_space=\"4\",swap_space_bytes=\"4294967296\"} 1.0"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    page = render_v1_page()
    n = sum(1 for line in page.splitlines() if line and not line.startswith("#"))
    print(f"{len(page.encode())} bytes, {n} samples")

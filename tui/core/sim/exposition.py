"""A replica's state as the pages a real server and a DCGM exporter would serve (text format 0.0.4).

Layout follows prometheus_client as vLLM uses it: labels sorted by name, floats as Go prints
them, counters as `_total` plus a `_created` gauge family (V1 only; V0 disabled `_created`),
histograms as `_bucket`/`_count`/`_sum`. Everything that does not change between scrapes (HELP
and TYPE lines, label sets, bucket labels) is built once per replica; a render only formats
numbers.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from . import buckets as B
from . import sglang_page
from .engine import Engine
from .hardware import MiB
from .replica import FAILED, READY, Replica

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DRIVER_VERSION = "550.54.15"
_INF = float("inf")


def gostr(d: float) -> str:
    """prometheus_client's floatToGoString."""
    d = float(d)
    if d == _INF:
        return "+Inf"
    if d == -_INF:
        return "-Inf"
    if d != d:
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels(d: dict[str, str]) -> str:
    if not d:
        return ""
    return "{" + ",".join(f'{k}="{escape(str(v))}"' for k, v in sorted(d.items())) + "}"


@lru_cache(maxsize=4096)
def header(name: str, help_: str, typ: str) -> str:
    return f"# HELP {name} {help_}\n# TYPE {name} {typ}\n"


# (canonical hist key on the engine, exposed base name, HELP, V1 bounds, V0 bounds or None if V1-only)
def _hist_specs(tok: tuple[int, ...]) -> list[tuple[str, str, str, tuple[Any, ...] | None, tuple[Any, ...] | None]]:
    return [
        ("prompt_len", "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok, tok),
        ("gen_len", "vllm:request_generation_tokens", "Number of generation tokens processed.", tok, tok),
        ("iteration_tokens", "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
         B.ITERATION_V1, B.ITERATION_V0),
        ("max_gen", "vllm:request_max_num_generation_tokens",
         "Histogram of maximum number of requested generation tokens.", tok, tok),
        ("params_n", "vllm:request_params_n", "Histogram of the n request parameter.", B.PARAMS_N, B.PARAMS_N),
        ("max_tokens", "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tok, tok),
        ("ttft", "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
         B.TTFT_V1, B.TTFT_V0),
        ("itl", "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", B.ITL_V1, None),
        ("itl", "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
         None, B.TPOT_V0),
        ("tpot", "vllm:request_time_per_output_token_seconds",
         "Histogram of time_per_output_token_seconds per request.", B.ITL_V1, None),
        ("e2e", "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
         B.LATENCY_V1, B.LATENCY_V0),
        ("queue_time", "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
         B.LATENCY_V1, B.LATENCY_V0),
        ("inference_time", "vllm:request_inference_time_seconds",
         "Histogram of time spent in RUNNING phase for request.", B.LATENCY_V1, B.LATENCY_V0),
        ("prefill_time", "vllm:request_prefill_time_seconds",
         "Histogram of time spent in PREFILL phase for request.", B.LATENCY_V1, B.LATENCY_V0),
        ("decode_time", "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
         B.LATENCY_V1, B.LATENCY_V0),
        ("prefill_kv_computed", "vllm:request_prefill_kv_computed_tokens",
         "Histogram of new KV tokens computed during prefill (excluding cached tokens).", tok, None),
        ("request_preemptions", "vllm:request_num_preemptions",
         "Histogram of the number of times a request was preempted.", B.PREEMPTIONS, None),
    ]


HTTP_HIGHR = B.HTTP_HIGHR
HTTP_HANDLERS = ("/v1/chat/completions", "/metrics", "/health")


class PageRenderer:
    """Renders one replica's /metrics page (V1 or V0 names); static text is built once."""

    def __init__(self, replica: Replica) -> None:
        self.r = replica
        self.v0 = replica.v0
        self._engines: tuple[Engine, ...] = ()
        self._static: dict[str, object] = {}
        self._cache: tuple[int, int, str] | None = None
        self.scrapes = {h: 0 for h in HTTP_HANDLERS}  # served requests, for the http_* families

    def render(self) -> str:
        r = self.r
        key = (r.version, sum(self.scrapes.values()))
        if self._cache is not None and self._cache[:2] == key:
            return self._cache[2]
        if tuple(r.engines) != self._engines:
            self._build()
        out: list[str] = [self._process()]
        if self.r.sglang:
            out.append(sglang_page.render(r, gostr, header, labels))
        else:
            out.append(self._vllm_v0() if self.v0 else self._vllm_v1())
        out.append(self._http())
        text = "".join(out)
        self._cache = (key[0], key[1], text)
        return text

    # -- static parts -------------------------------------------------------------
    def _build(self) -> None:
        r = self.r
        self._engines = tuple(r.engines)
        model = r.model.name
        eng_labels = []
        for e in self._engines:
            d = {"model_name": model} if self.v0 else {"model_name": model, "engine": str(e.index)}
            eng_labels.append(d)
        self._eng_labels = eng_labels
        self._eng_lbl = [labels(d) for d in eng_labels]
        tok = B.buckets_1_2_5(r.plan.max_model_len) if r.plan else (1,)
        specs = []
        for key, name, help_, b1, b0 in _hist_specs(tok):
            bounds = b0 if self.v0 else b1
            if bounds is None:
                continue
            bucket_lbls = []
            for d in eng_labels:
                row = [name + "_bucket" + labels({**d, "le": gostr(b)}) + " " for b in bounds]
                row.append(name + "_bucket" + labels({**d, "le": "+Inf"}) + " ")
                bucket_lbls.append(row)
            specs.append((key, name, header(name, help_, "histogram"),
                          header(name + "_created", help_, "gauge") if not self.v0 else "",
                          tuple(bounds), bucket_lbls))
        self._hists = specs
        self._cache_info = self._cache_config_lines()

    def _cache_config_lines(self) -> str:
        r = self.r
        p, a = r.plan, r.resolved
        if p is None:
            return ""
        name = "vllm:cache_config_info"
        out = [header(name, "Information of the LLMEngine CacheConfig", "gauge")]
        if self.v0:
            d = {
                "block_size": str(a.block_size), "cache_dtype": a.kv_cache_dtype, "cpu_offload_gb": "0",
                "enable_prefix_caching": str(a.enable_prefix_caching), "gpu_memory_utilization": str(a.gpu_memory_utilization),
                "is_attention_free": "False", "num_cpu_blocks": str(r.num_cpu_blocks),
                "num_gpu_blocks": str(p.num_gpu_blocks), "num_gpu_blocks_override": str(a.num_gpu_blocks_override),
                "sliding_window": "None",
                "swap_space_bytes": str(int((a.swap_space if a.swap_space is not None else 4) * 1024**3)),
            }
            out.append(f"{name}{labels(d)} 1.0\n")
            return "".join(out)
        for e in self._engines:
            d = {
                "block_size": str(a.block_size), "cache_dtype": a.kv_cache_dtype, "calculate_kv_scales": "False",
                "cpu_offload_gb": "0", "enable_prefix_caching": str(a.enable_prefix_caching),
                "engine": str(e.index), "gpu_memory_utilization": str(a.gpu_memory_utilization),
                "is_attention_free": "False", "kv_cache_max_concurrency": str(round(p.max_concurrency, 2)),
                "kv_cache_memory_bytes": "None", "kv_cache_size_tokens": str(p.kv_cache_size_tokens),
                "kv_offloading_backend": "native", "kv_offloading_size": "None", "mamba_cache_dtype": "auto",
                "num_cpu_blocks": "None", "num_gpu_blocks": str(p.num_gpu_blocks),
                "num_gpu_blocks_override": str(a.num_gpu_blocks_override), "prefix_caching_hash_algo": "sha256",
                "sliding_window": "None", "user_specified_block_size": "False",
            }
            out.append(f"{name}{labels(d)} 1.0\n")
        return "".join(out)

    # -- dynamic parts ------------------------------------------------------------
    def _process(self) -> str:
        r = self.r
        gen = r.engines[0].c.steps if r.engines else 0
        gc0 = 1200 + gen // 40
        lines = [
            header("python_gc_objects_collected_total", "Objects collected during gc", "counter"),
            f'python_gc_objects_collected_total{{generation="0"}} {gostr(gc0 * 7)}\n',
            f'python_gc_objects_collected_total{{generation="1"}} {gostr(gc0 // 3)}\n',
            f'python_gc_objects_collected_total{{generation="2"}} {gostr(gc0 // 50)}\n',
            header("python_gc_objects_uncollectable_total", "Uncollectable objects found during GC", "counter"),
            'python_gc_objects_uncollectable_total{generation="0"} 0.0\n',
            'python_gc_objects_uncollectable_total{generation="1"} 0.0\n',
            'python_gc_objects_uncollectable_total{generation="2"} 0.0\n',
            header("python_gc_collections_total", "Number of times this generation was collected", "counter"),
            f'python_gc_collections_total{{generation="0"}} {gostr(gc0)}\n',
            f'python_gc_collections_total{{generation="1"}} {gostr(gc0 // 10)}\n',
            f'python_gc_collections_total{{generation="2"}} {gostr(gc0 // 100)}\n',
            header("python_info", "Python platform information", "gauge"),
            'python_info{implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"} 1.0\n',
            header("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge"),
            f"process_virtual_memory_bytes {gostr(2.9e10)}\n",
            header("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge"),
            f"process_resident_memory_bytes {gostr(float(1_650_000_000 + 4096 * (gen % 997)))}\n",
            header("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge"),
            f"process_start_time_seconds {gostr(round(r.created, 2))}\n",
            header("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter"),
            f"process_cpu_seconds_total {gostr(round(r.cpu_seconds(), 2))}\n",
            header("process_open_fds", "Number of open file descriptors.", "gauge"),
            f"process_open_fds {gostr(float(64 + sum(e.num_running for e in r.engines)))}\n",
            header("process_max_fds", "Maximum number of open file descriptors.", "gauge"),
            "process_max_fds 1.048576e+06\n",
        ]
        return "".join(lines)

    def _gauges(self, name: str, help_: str, value: Callable[[Engine], float]) -> str:
        out = [header(name, help_, "gauge")]
        for e, lbl in zip(self._engines, self._eng_lbl, strict=True):
            out.append(f"{name}{lbl} {gostr(value(e))}\n")
        return "".join(out)

    def _counter(self, name: str, help_: str, value: Callable[[Engine], float] | None,
                 extra: tuple[str, tuple[str, ...]] | None = None,
                 per: Callable[[Engine, str], float] | None = None) -> str:
        """A counter family; V1 adds the `_created` gauge family after it. One series per
        engine from `value`, or with `extra` (label, values) one per value from `per`."""
        if (value is None) == (per is None) or (per is None) != (extra is None):
            raise ValueError(f"{name}: give value, or extra with per")
        out = [header(name + "_total", help_, "counter")]
        created: list[str] = []
        t0 = gostr(self.r.ready_at)
        for e, d in zip(self._engines, self._eng_labels, strict=True):
            if value is not None:
                lbl = labels(d)
                out.append(f"{name}_total{lbl} {gostr(value(e))}\n")
                created.append(f"{name}_created{lbl} {t0}\n")
            elif extra is not None and per is not None:
                key, vals = extra
                for v in vals:
                    lbl = labels({**d, key: v})
                    out.append(f"{name}_total{lbl} {gostr(per(e, v))}\n")
                    created.append(f"{name}_created{lbl} {t0}\n")
        if not self.v0:
            out.append(header(name + "_created", help_, "gauge"))
            out.extend(created)
        return "".join(out)

    def _histograms(self) -> str:
        out: list[str] = []
        t0 = gostr(self.r.ready_at)
        for key, name, head, chead, bounds, bucket_lbls in self._hists:
            out.append(head)
            created = []
            for e, lbl, row in zip(self._engines, self._eng_lbl, bucket_lbls, strict=True):
                h = e.h[key]
                cum = h.cumulative(bounds)
                out.extend(f"{p}{gostr(c)}\n" for p, c in zip(row, cum, strict=True))
                out.append(f"{name}_count{lbl} {gostr(h.count)}\n")
                out.append(f"{name}_sum{lbl} {gostr(h.sum)}\n")
                created.append(f"{name}_created{lbl} {t0}\n")
            if chead:
                out.append(chead)
                out.extend(created)
        return "".join(out)

    def _vllm_v1(self) -> str:
        if not self._engines:
            return ""
        c = self._counter
        parts = [
            self._gauges("vllm:num_requests_running", "Number of requests in model execution batches.",
                         lambda e: e.num_running),
            self._gauges("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                         lambda e: e.num_waiting),
        ]
        name = "vllm:num_requests_waiting_by_reason"
        rows = [header(name, "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
                       "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV "
                       "transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.", "gauge")]
        for e, d in zip(self._engines, self._eng_labels, strict=True):
            rows.append(f"{name}{labels({**d, 'reason': 'capacity'})} {gostr(e.num_waiting)}\n")
            rows.append(f"{name}{labels({**d, 'reason': 'deferred'})} 0.0\n")
        parts.append("".join(rows))
        name = "vllm:engine_sleep_state"
        rows = [header(name, "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
                       "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
                       "gauge")]
        for d in self._eng_labels:
            for st, v in (("awake", "1.0"), ("weights_offloaded", "0.0"), ("discard_all", "0.0")):
                rows.append(f"{name}{labels({**d, 'sleep_state': st})} {v}\n")
        parts.append("".join(rows))
        parts.append(self._gauges("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                                  lambda e: e.kv_usage))
        parts += [
            c("vllm:num_preemptions", "Cumulative number of preemption from the engine.", lambda e: e.c.preemptions),
            c("vllm:prompt_tokens", "Number of prefill tokens processed.", lambda e: e.c.prompt_tokens),
            c("vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", None,
              ("source", ("local_compute", "local_cache_hit", "external_kv_transfer")),
              lambda e, s: e.c.prompt_local if s == "local_compute" else
              (e.c.prompt_cached if s == "local_cache_hit" else 0)),
            c("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).",
              lambda e: e.c.prompt_cached),
            c("vllm:generation_tokens", "Number of generation tokens processed.", lambda e: e.c.generation_tokens),
            c("vllm:request_success", "Count of successfully processed requests.", None,
              ("finished_reason", ("stop", "length", "abort", "error")), lambda e, s: e.c.success[s]),
            c("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
              lambda e: e.c.prefix_queries),
            c("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
              lambda e: e.c.prefix_hits),
            self._histograms(),
            self._cache_info,
        ]
        return "".join(parts)

    def _vllm_v0(self) -> str:
        if not self._engines:
            return ""
        e = self._engines[0]
        r = self.r
        a = r.resolved
        g = self._gauges
        hit = (e.c.prefix_hits / e.c.prefix_queries if e.c.prefix_queries else 0.0) if a.enable_prefix_caching else -1.0
        thr = r.throughput()
        parts = [
            self._cache_info,
            g("vllm:num_requests_running", "Number of requests currently running on GPU.", lambda e: e.num_running),
            g("vllm:num_requests_swapped", "Number of requests swapped to CPU.", lambda e: 0),
            g("vllm:num_requests_waiting", "Number of requests waiting to be processed.", lambda e: e.num_waiting),
            g("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", lambda e: e.kv_usage),
            g("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", lambda e: 0),
            g("vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", lambda e: -1.0),
            g("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", lambda e: hit),
            g("vllm:avg_prompt_throughput_toks_per_s", "Average prefill throughput in tokens/s.", lambda e: thr[0]),
            g("vllm:avg_generation_throughput_toks_per_s", "Average generation throughput in tokens/s.",
              lambda e: thr[1]),
            self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                          lambda e: e.c.preemptions),
            self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.", lambda e: e.c.prompt_tokens),
            self._counter("vllm:generation_tokens", "Number of generation tokens processed.",
                          lambda e: e.c.generation_tokens),
            self._counter("vllm:request_success", "Count of successfully processed requests.", None,
                          ("finished_reason", ("stop", "length", "abort")), lambda e, s: e.c.success[s]),
            self._histograms(),
        ]
        return "".join(parts)

    def _http(self) -> str:
        """prometheus_fastapi_instrumentator's families: completions as finished, scrapes as served."""
        r = self.r
        lat = [e.h["http_e2e"] for e in self._engines]
        few = (0.1, 0.5, 1.0)
        per: dict[str, tuple[int, float, list[int]]] = {}  # handler -> (count, sum, cumulative at `few`)
        n = sum(h.count for h in lat)
        cum = [sum(col) for col in zip(*(h.cumulative(few)[:3] for h in lat), strict=True)] if lat else [0, 0, 0]
        per["/v1/chat/completions"] = (n, sum(h.sum for h in lat), cum)
        for h in HTTP_HANDLERS[1:]:
            k = self.scrapes[h]
            per[h] = (k, k * 0.002, [k, k, k])  # local scrapes answer in ~2 ms
        out = [header("http_requests_total", "Total number of requests by method, status and handler.", "counter")]
        lbl = {h: f'handler="{h}",method="{"POST" if h.startswith("/v1") else "GET"}"' for h in HTTP_HANDLERS}
        for h in HTTP_HANDLERS:
            out.append(f'http_requests_total{{{lbl[h]},status="2xx"}} {gostr(per[h][0])}\n')
        if not self.v0:
            out.append(header("http_requests_created", "Total number of requests by method, status and handler.",
                              "gauge"))
            out += [f'http_requests_created{{{lbl[h]},status="2xx"}} {gostr(r.created)}\n' for h in HTTP_HANDLERS]
        name = "http_request_duration_highr_seconds"
        help_ = "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. "
        out.append(header(name, help_, "histogram"))
        cum = [sum(col) for col in zip(*(h.cumulative(HTTP_HIGHR) for h in lat), strict=True)]
        for b, v in zip(HTTP_HIGHR + (_INF,), cum, strict=True):
            out.append(f'{name}_bucket{{le="{gostr(b)}"}} {gostr(v)}\n')
        out.append(f"{name}_count {gostr(n)}\n{name}_sum {gostr(per['/v1/chat/completions'][1])}\n")
        if not self.v0:
            out.append(header(name + "_created", help_, "gauge") + f"{name}_created {gostr(r.created)}\n")
        name = "http_request_duration_seconds"
        out.append(header(name, "Latency with only few buckets by handler. Made to be only used if aggregation by "
                          "handler is important. ", "histogram"))
        for h in HTTP_HANDLERS:
            k, total, buckets = per[h]
            hl = lbl[h].replace(",method", ',le="{}",method')
            for bound, v in zip(few, buckets, strict=True):
                out.append(f"{name}_bucket{{{hl.format(gostr(bound))}}} {gostr(v)}\n")
            out.append(f"{name}_bucket{{{hl.format('+Inf')}}} {gostr(k)}\n")
            out.append(f"{name}_count{{{lbl[h]}}} {gostr(k)}\n{name}_sum{{{lbl[h]}}} {gostr(total)}\n")
        return "".join(out)


# -- DCGM exporter -------------------------------------------------------------------
_DCGM_FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data."),
)
_DCGM_HEADERS = {f: header(f, h, t) for f, t, h in _DCGM_FIELDS}


def gpu_values(r: Replica, gi: int) -> dict[str, float]:
    """One simulated GPU's DCGM fields, derived from the replica's engine and node."""
    tp = max(1, r.resolved.tensor_parallel_size)
    e = r.engines[gi // tp] if r.engines and gi // tp < len(r.engines) else None
    act = e.activity if e is not None else 0.0
    running = r.state == READY
    spec = r.gpu_spec
    used = r.gpu_memory_used_bytes() // MiB
    if r.state != FAILED:
        used += 1  # the driver's own
    total = spec.fb_total_mib - spec.reserved_mib
    node = r.node
    throttled = node.throttle_mask & 0x6C  # power/thermal/hw slowdown bits
    mask = node.throttle_mask | (0x1 if act < 0.02 else 0)
    sm_max = 1980 if spec.large else 1410
    sm = 210 if act < 0.02 and not running else (sm_max // 2 if throttled else sm_max)
    temp = 31 + 45 * act + (22 if node.throttle_mask & 0x60 else 0)
    return {
        "DCGM_FI_DEV_SM_CLOCK": sm,
        "DCGM_FI_DEV_MEM_CLOCK": 1593 if not spec.large else 2619,
        "DCGM_FI_DEV_GPU_TEMP": int(temp),
        "DCGM_FI_DEV_POWER_USAGE": round(55 + 320 * act, 3),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
        "DCGM_FI_DEV_GPU_UTIL": int(round(100 * act)),
        "DCGM_FI_DEV_MEM_COPY_UTIL": int(round(100 * act * 0.6)),
        "DCGM_FI_DEV_XID_ERRORS": node.xid,
        "DCGM_FI_DEV_FB_FREE": max(0, total - used),
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_RESERVED": spec.reserved_mib,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": node.ecc_dbe,
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": mask,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(act, 6),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(act * 0.55, 6),
        "DCGM_FI_PROF_DRAM_ACTIVE": round(min(1.0, act * 0.8), 6),
    }


def render_dcgm(r: Replica, container: str = "vllm") -> str:
    """The DCGM exporter page for the replica's GPU(s), with the pod mapping labels."""
    rows = []
    for g in r.gpus:
        # the exporter's template order, not sorted
        lbl = "{" + ",".join(f'{k}="{escape(v)}"' for k, v in (
            ("gpu", str(g.index)), ("UUID", g.uuid), ("pci_bus_id", g.pci_bus_id), ("device", f"nvidia{g.index}"),
            ("modelName", r.gpu_spec.name), ("Hostname", r.node.name), ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION),
            ("container", container), ("namespace", r.namespace), ("pod", r.name))) + "}"
        rows.append((lbl, gpu_values(r, g.index)))
    out: list[str] = []
    for f, _, _ in _DCGM_FIELDS:
        out.append(_DCGM_HEADERS[f])
        for lbl, vals in rows:
            v = vals[f]
            out.append(f"{f}{lbl} {v if isinstance(v, int) else gostr(v)}\n")
    return "".join(out)

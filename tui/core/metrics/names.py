"""Canonical signal names and the exposed metric names they come from, across vLLM generations.

One table serves the /metrics parser, the Prometheus source (PromQL) and the simulator, so a
rename in vLLM is handled in one place. Order matters: the first name found on a page wins,
so the V1 name is listed before its deprecated V0 alias.
"""

from __future__ import annotations

# canonical scalar -> exposed sample names (counters with their exposed `_total`)
SCALARS: dict[str, tuple[str, ...]] = {
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "swapped": ("vllm:num_requests_swapped",),
    "cpu_kv_usage": ("vllm:cpu_cache_usage_perc",),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    # summed over finished_reason
    "requests_success": ("vllm:request_success_total",),
    "engine_healthy": ("vllm:engine_healthy",),
}

# the finished-requests counter, read again for its finished_reason="abort" rows ("requests_aborted")
REQUESTS_SUCCESS = "vllm:request_success_total"

# waiting split by reason (newest V1): label reason=capacity|deferred
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"

# canonical histogram -> exposed base names (series are base+_bucket/_sum/_count)
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue_time": ("vllm:request_queue_time_seconds",),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    "prompt_len": ("vllm:request_prompt_tokens",),
    "gen_len": ("vllm:request_generation_tokens",),
    "max_tokens": ("vllm:request_params_max_tokens",),
    "iteration_tokens": ("vllm:iteration_tokens_total",),
    "request_preemptions": ("vllm:request_num_preemptions",),
}

CACHE_CONFIG = "vllm:cache_config_info"
PROCESS_CPU = "process_cpu_seconds_total"

# Names only V0 servers expose (used to tell the generations apart).
V0_ONLY = frozenset(
    {
        "vllm:gpu_cache_usage_perc",
        "vllm:num_requests_swapped",
        "vllm:cpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_hit_rate",
        "vllm:avg_generation_throughput_toks_per_s",
    }
)
V1_ONLY = frozenset({"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"})

# DCGM exporter fields (NVIDIA) -> GpuDevice attribute; AMD device-metrics-exporter equivalents
# live in the GPU source modules.
DCGM = {
    "DCGM_FI_DEV_FB_USED": "fb_used_mib",
    "DCGM_FI_DEV_FB_FREE": "fb_free_mib",
    "DCGM_FI_DEV_FB_RESERVED": "fb_reserved_mib",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "gr_engine_active",  # 0..1 ratio
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active",  # 0..1 ratio
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "throttle_mask",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "throttle_mask",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
}

# NVML clocks-event (throttle) reason bits -> names. "gpu_idle" and "applications_clocks_setting"
# are benign and are not reported as throttling.
THROTTLE_BITS = {
    0x0000000000000001: "gpu_idle",
    0x0000000000000002: "applications_clocks_setting",
    0x0000000000000004: "sw_power_cap",
    0x0000000000000008: "hw_slowdown",
    0x0000000000000010: "sync_boost",
    0x0000000000000020: "sw_thermal_slowdown",
    0x0000000000000040: "hw_thermal_slowdown",
    0x0000000000000080: "hw_power_brake_slowdown",
    0x0000000000000100: "display_clock_setting",
}
BENIGN_THROTTLE = frozenset({"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"})


def throttle_names(mask: int) -> tuple[str, ...]:
    """Active, non-benign throttle reasons in an NVML/DCGM bit mask."""
    return tuple(
        name for bit, name in THROTTLE_BITS.items() if mask & bit and name not in BENIGN_THROTTLE
    )

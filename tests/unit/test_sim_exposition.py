"""The simulated pages: valid text format 0.0.4, vLLM's V1/V0 names, labels and buckets, DCGM fields."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tui.core.metrics.extract import parse_dcgm, parse_vllm, to_gpu, to_sample
from tui.core.sim import buckets as B
from tui.core.sim.args import EngineArgs
from tui.core.sim.exposition import PageRenderer, gostr, render_dcgm
from tui.core.sim.hardware import GPUS, MODELS
from tui.core.sim.replica import Node, Replica
from tui.core.sim.scenarios import CHAT, LONG
from tui.core.sim.workload import Workload

ARGS = EngineArgs(max_model_len=8192, max_num_seqs=64)


def busy_replica(v0: bool = False, shape=CHAT, rate=4.0, seconds=60.0, args=ARGS, node=None) -> Replica:
    r = Replica("llama-8b-0", "llama-8b", MODELS["llama-3.1-8b"], GPUS["a100-40gb"], args, t0=1.75e9, v0=v0,
                node=node)
    w = Workload(3)
    t, nxt = r.now, r.now + w.gap(rate)
    while t < r.created + seconds:
        t += 0.5
        while nxt <= t:
            r.submit(w.request(nxt, shape))
            nxt += w.gap(rate)
        r.advance_to(t)
    return r


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def bounds_of(fam) -> list[str]:
    return [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket") and s.labels.get("engine", "0") == "0"]


def test_v1_page_parses_with_v1_names_labels_and_buckets():
    r = busy_replica()
    text = PageRenderer(r).render()
    assert 30_000 < len(text) < 80_000  # a real-size page
    fams = families(text)
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success",
                 "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:time_to_first_token_seconds",
                 "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
                 "vllm:request_queue_time_seconds", "vllm:iteration_tokens_total", "vllm:request_num_preemptions",
                 "vllm:num_requests_waiting_by_reason", "vllm:cache_config_info", "process_cpu_seconds"):
        assert name in fams, name
    for name in ("vllm:gpu_cache_usage_perc", "vllm:num_requests_swapped", "vllm:time_per_output_token_seconds"):
        assert name not in fams
    for s in fams["vllm:num_requests_running"].samples:
        assert s.labels == {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}
    assert fams["vllm:num_preemptions"].type == "counter"
    assert fams["vllm:num_preemptions_created"].type == "gauge"  # text 0.0.4: its own family
    assert fams["vllm:num_preemptions_created"].samples[0].value == r.ready_at
    assert bounds_of(fams["vllm:time_to_first_token_seconds"]) == [gostr(b) for b in B.TTFT_V1] + ["+Inf"]
    assert bounds_of(fams["vllm:inter_token_latency_seconds"]) == [gostr(b) for b in B.ITL_V1] + ["+Inf"]
    assert bounds_of(fams["vllm:e2e_request_latency_seconds"]) == [gostr(b) for b in B.LATENCY_V1] + ["+Inf"]
    assert bounds_of(fams["vllm:request_prompt_tokens"])[-2:] == ["5000.0", "+Inf"]  # 1-2-5 up to 8192
    reasons = {s.labels["reason"] for s in fams["vllm:num_requests_waiting_by_reason"].samples}
    assert reasons == {"capacity", "deferred"}
    (info,) = fams["vllm:cache_config_info"].samples
    assert info.labels["num_gpu_blocks"] == str(r.plan.num_gpu_blocks)
    assert info.labels["block_size"] == "16" and info.labels["gpu_memory_utilization"] == "0.92"
    assert info.labels["cache_dtype"] == "auto" and info.labels["enable_prefix_caching"] == "True"
    assert int(info.labels["kv_cache_size_tokens"]) == r.plan.num_gpu_blocks * 16
    assert float(info.labels["kv_cache_max_concurrency"]) == pytest.approx(r.plan.num_gpu_blocks * 16 / 8192, abs=0.01)
    # histogram counts are cumulative and end at _count
    ttft = [s for s in fams["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_bucket")]
    vals = [s.value for s in ttft]
    assert vals == sorted(vals) and vals[-1] == r.engines[0].h["ttft"].count > 0


def test_v0_page_speaks_v0_names_without_engine_label_or_created():
    r = busy_replica(v0=True)
    text = PageRenderer(r).render()
    fams = families(text)
    for name in ("vllm:gpu_cache_usage_perc", "vllm:num_requests_swapped", "vllm:time_per_output_token_seconds",
                 "vllm:cpu_cache_usage_perc", "vllm:avg_generation_throughput_toks_per_s"):
        assert name in fams, name
    assert "vllm:kv_cache_usage_perc" not in fams and "vllm:inter_token_latency_seconds" not in fams
    assert "_created" not in text
    for f in fams.values():
        if f.name.startswith("vllm:") and f.name != "vllm:cache_config_info":
            for s in f.samples:
                assert "engine" not in s.labels and "model_name" in s.labels
    assert bounds_of(fams["vllm:time_to_first_token_seconds"]) == [gostr(b) for b in B.TTFT_V0] + ["+Inf"]
    assert bounds_of(fams["vllm:time_per_output_token_seconds"]) == [gostr(b) for b in B.TPOT_V0] + ["+Inf"]
    assert bounds_of(fams["vllm:iteration_tokens_total"])[-2:] == ["8096.0", "+Inf"]
    (info,) = fams["vllm:cache_config_info"].samples
    assert info.labels["swap_space_bytes"] == str(4 * 1024**3) and "num_cpu_blocks" in info.labels


@pytest.mark.parametrize("v0", [False, True])
def test_extracted_sample_matches_engine_state(v0):
    r = busy_replica(v0=v0, shape=LONG, rate=1.5, seconds=200)
    e = r.engines[0]
    assert e.c.preemptions > 0 and e.num_waiting > 0  # a state worth checking
    s = to_sample(parse_vllm(PageRenderer(r).render()))
    assert s.generation == ("v0" if v0 else "v1")
    assert s.value("kv_usage") == pytest.approx(e.kv_usage)
    assert s.value("running") == e.num_running
    assert s.value("waiting") == e.num_waiting
    assert s.value("preemptions") == e.c.preemptions
    assert s.value("generation_tokens") == e.c.generation_tokens
    assert s.value("requests_success") == sum(e.c.success[k] for k in ("stop", "length", "abort"))
    assert s.cache_config["num_gpu_blocks"] == str(r.plan.num_gpu_blocks)
    assert s.process_cpu_seconds == pytest.approx(r.cpu_seconds(), abs=0.01)
    assert s.hist("ttft").count == e.h["ttft"].count
    assert s.hist("itl").count == e.h["itl"].count


def test_data_parallel_replica_exposes_one_series_per_engine():
    r = busy_replica(args=replace(ARGS, data_parallel_size=2))
    assert len(r.engines) == 2 and len(r.gpus) == 2
    s = to_sample(parse_vllm(PageRenderer(r).render()))
    assert set(s.engines) == {"0", "1"}
    assert s.value("running") == sum(e.num_running for e in r.engines)
    assert s.value("kv_usage") == pytest.approx(max(e.kv_usage for e in r.engines))


def test_dcgm_page_reports_memory_util_and_throttle():
    node = Node("gpu-node-1")
    r = busy_replica(node=node)
    text = render_dcgm(r)
    fams = families(text)
    (used,) = fams["DCGM_FI_DEV_FB_USED"].samples
    (free,) = fams["DCGM_FI_DEV_FB_FREE"].samples
    (res,) = fams["DCGM_FI_DEV_FB_RESERVED"].samples
    assert used.value + free.value + res.value == r.gpu_spec.fb_total_mib
    assert used.labels["pod"] == "llama-8b-0" and used.labels["Hostname"] == "gpu-node-1"
    assert {"gpu", "UUID", "device", "modelName", "namespace", "container"} <= set(used.labels)
    (act,) = fams["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples
    assert 0 < act.value <= 1
    gpu = to_gpu(parse_dcgm(text), pod="llama-8b-0")
    assert gpu is not None and gpu.throttle_reasons == ()
    assert gpu.memory_pct == pytest.approx(92, abs=2)  # vLLM's pre-allocated pool, not the cache fill
    node.throttle_mask = 0x40
    gpu = to_gpu(parse_dcgm(render_dcgm(r)), pod="llama-8b-0")
    assert gpu.throttle_reasons == ("hw_thermal_slowdown",)


def test_render_is_cached_until_state_moves():
    r = busy_replica(seconds=5)
    pr = PageRenderer(r)
    a = pr.render()
    assert pr.render() is a
    r.advance_to(r.now + 1)
    assert pr.render() is not a


def test_label_values_are_escaped():
    r = busy_replica(seconds=1)
    r.model = replace(r.model, name='odd"name\\with\nnewline')
    fams = families(PageRenderer(r).render())
    (s,) = fams["vllm:num_requests_running"].samples
    assert s.labels["model_name"] == 'odd"name\\with\nnewline'

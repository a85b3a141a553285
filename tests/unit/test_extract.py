"""Parsed pages -> Sample / GpuSample: golden values from real pages, engines, histograms,
missing metrics, router series, DCGM pages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tui.core.metrics.extract import DCGM_WANTED, VLLM_WANTED, parse_dcgm, parse_vllm, to_gpu, to_sample
from tui.core.metrics.parser import parse

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "samples"


def sample_text(name: str) -> str:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"reference sample {path} not found (the shared dir sits beside the checkout)")
    return path.read_text()


V0_COMPOSER = "vllm-0.6.x-v0-vllmComposer-test-fixture-codeindex-48058675646.prom"
V0_KOREAN = "vllm-0.5-0.6-v0-korean-tutorial-codeindex-19518685618.prom"
V1_0_10 = "vllm-0.10.0-production-stack-issue-617.prom"
V1_318 = "vllm-0.8.x-v1-production-stack-issue-318.prom"
METAL = "vllm-metal-v1-issue-479-elided.prom"
OTHERS = [
    "llamacpp-2025-06-pr-13196.prom",
    "sglang-0.5.1-issue-13485.prom",
    "sglang-2025-03-pr-4444.prom",
    "tgi-names-ibm-vllm-tgis-adapter-pr-18.prom",
    "triton-trtllm-23.11-tensorrtllm_backend-readme-example.prom",
]


# -- golden values from real pages ----------------------------------------------------------------


def test_v0_composer_fixture():
    s = to_sample(parse_vllm(sample_text(V0_COMPOSER)))
    assert s.generation == "v0"
    assert s.model_name == "mymodelname"
    assert list(s.engines) == [""]
    assert s.value("running") == 3.0
    assert s.value("waiting") == 2.0
    assert s.value("kv_usage") == 0.0
    assert s.value("swapped") == 0.0
    assert s.value("prompt_tokens") == 5453083.0
    assert s.value("requests_success") == 6193.0 + 28.0 + 5.0  # summed over finished_reason
    assert s.value("prefix_queries") is None  # V0 had no prefix-cache counters
    assert s.process_cpu_seconds is None
    assert s.cache_config["num_gpu_blocks"] == "11560"
    assert s.cache_config["cache_dtype"] == "fp8_e5m2"
    ttft = s.hist("ttft")
    assert ttft.bounds == (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, math.inf)
    assert ttft.counts == (0, 0, 0, 0, 19, 83, 133, 247, 1006, 3566, 6812, 7511, 8297, 8432, 8482, 8494, 8499)
    assert ttft.count == 8499.0 and ttft.sum == 5686.670262336731
    # V0's time_per_output_token stands in for inter-token latency.
    assert s.hist("itl").count == 147223.0
    assert s.hist("e2e").counts[-1] == 6226.0
    assert s.hist("queue_time") is None


def test_v0_korean_tutorial():
    s = to_sample(parse_vllm(sample_text(V0_KOREAN)))
    assert s.generation == "v0"
    assert s.model_name == "meta-llama/Llama-3.1-8B-Instruct"
    assert s.cache_config["num_gpu_blocks"] == "2375"
    assert s.value("cpu_kv_usage") == 0.0
    assert s.value("requests_success") is None


def test_v1_0_10_with_engine_label_and_deprecated_names():
    s = to_sample(parse_vllm(sample_text(V1_0_10)))
    assert s.generation == "v1"
    assert list(s.engines) == ["0"]
    assert s.model_name == "zai-org/GLM-4.5"
    assert s.value("kv_usage") == 9.75010481363281e-06
    assert s.value("prefix_queries") == 32.0
    assert s.value("prefix_hits") == 0.0  # only the deprecated gpu_ name is on this excerpt
    assert s.value("running") is None  # not on the page: absent, not 0


def test_early_v1_detected_from_names_and_old_kv_name_used():
    s = to_sample(parse_vllm(sample_text(V1_318)))
    assert s.generation == "v1"  # gpu_cache_usage_perc alone would say nothing
    assert list(s.engines) == [""]
    assert s.value("kv_usage") == 0.0  # from vllm:gpu_cache_usage_perc
    assert s.value("running") == 0.0 and s.value("waiting") == 0.0
    assert s.process_cpu_seconds == 439.71999999999997
    assert s.extra["process_start_time_seconds"] == 1.74262400557e09


def test_elided_metal_page_keeps_parseable_lines():
    page = parse_vllm(sample_text(METAL))
    assert [n for n, _ in page.errors] == [3, 4, 6]
    s = to_sample(page)
    assert s.value("running") == 0.0
    assert s.value("waiting") == 6.0
    assert s.value("kv_usage") == 0.0
    assert s.value("waiting_capacity") is None  # its lines were elided
    assert s.cache_config == {}
    assert s.generation == "v1"


@pytest.mark.parametrize("name", OTHERS)
def test_other_engines_have_no_vllm_engines(name):
    s = to_sample(parse_vllm(sample_text(name)))
    assert s.engines == {}
    assert s.generation == "unknown"


@pytest.mark.parametrize("name", [V0_COMPOSER, V0_KOREAN, V1_0_10, V1_318, METAL])
def test_wanted_set_loses_nothing_extract_reads(name):
    text = sample_text(name)
    assert to_sample(parse(text, VLLM_WANTED)) == to_sample(parse(text))


# -- engines, histograms, missing values ----------------------------------------------------------

DP_PAGE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
vllm:num_requests_running{server="http://10.0.0.1:8000"} 99.0
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="capacity"} 2.0
vllm:num_requests_waiting_by_reason{engine="1",model_name="m",reason="deferred"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.93
vllm:num_requests_swapped{engine="0",model_name="m"} NaN
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 10.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 4.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 7.0
vllm:request_success_created{engine="1",finished_reason="stop",model_name="m"} 1.7e9
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 8.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 4.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 4.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 8.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 4.5
"""


def test_data_parallel_engines_are_one_replica():
    s = to_sample(parse_vllm(DP_PAGE))
    assert set(s.engines) == {"0", "1"}  # the router's `server` series made no engine ""
    assert s.value("running") == 8.0  # summed; the router's 99 is excluded
    assert s.value("waiting") == 3.0
    assert s.value("kv_usage") == 0.93  # worst engine
    assert s.engines["0"].values["kv_usage"] == 0.5
    assert s.value("waiting_capacity") == 2.0 and s.value("waiting_deferred") == 0.0
    assert s.engines["0"].values.get("waiting_capacity") is None
    assert s.engines["0"].values["requests_success"] == 14.0
    assert s.value("requests_success") == 21.0
    assert s.value("swapped") is None  # NaN means no value, not 0
    assert s.generation == "v1"


def test_histograms_sorted_and_missing_inf_taken_from_count():
    s = to_sample(parse_vllm(DP_PAGE))
    h0 = s.engines["0"].hists["ttft"]
    assert h0.bounds == (0.1, 1.0, math.inf) and h0.counts == (2.0, 8.0, 10.0)
    h1 = s.engines["1"].hists["ttft"]
    assert h1.bounds == (0.1, 1.0, math.inf) and h1.counts == (1.0, 3.0, 4.0)
    total = s.hist("ttft")
    assert total.counts == (3.0, 11.0, 14.0) and total.count == 14.0 and total.sum == 6.5
    # Neither +Inf nor _count: the total is unknown, so the histogram is absent.
    assert s.hist("e2e") is None


def _ttft_page(counts: tuple[float, ...], bounds: tuple[str, ...] = ("0.1", "1.0", "+Inf")) -> str:
    rows = [f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{b}",model_name="m"}} {c}'
            for b, c in zip(bounds, counts, strict=False)]
    rows += [f'vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {counts[-1]}',
             f'vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {sum(counts)}']
    return "\n".join(rows) + "\n"


def test_histograms_of_repeated_label_sets_carry_each_pages_own_values():
    """Later scrapes reuse the bucket layout worked out for the first (the label sets are the
    parser's shared objects): the values, and a layout that changed, must still be each page's."""
    first = to_sample(parse_vllm(_ttft_page((1.0, 2.0, 3.0)))).hist("ttft")
    second = to_sample(parse_vllm(_ttft_page((4.0, 9.0, 12.0)))).hist("ttft")
    assert first.counts == (1.0, 2.0, 3.0) and first.count == 3.0
    assert second.counts == (4.0, 9.0, 12.0) and second.count == 12.0 and second.sum == 25.0
    # same first label set and as many rows, one bound different: a layout of its own
    moved = to_sample(parse_vllm(_ttft_page((1.0, 5.0, 6.0), ("0.1", "2.5", "+Inf")))).hist("ttft")
    assert moved.bounds == (0.1, 2.5, math.inf) and moved.counts == (1.0, 5.0, 6.0)
    # +Inf missing: from _count, page by page
    for total in (7.0, 11.0):
        page = _ttft_page((1.0, 2.0, total)).replace('le="+Inf"', 'le="nope"')
        h = to_sample(parse_vllm(page)).hist("ttft")
        assert h.bounds == (0.1, 1.0, math.inf) and h.counts == (1.0, 2.0, total) and h.count == total


def test_router_only_page_has_no_engines():
    page = parse_vllm('vllm:num_requests_running{server="http://a"} 2\nvllm:current_qps{server="http://a"} 1\n')
    assert to_sample(page).engines == {}


# -- DCGM exporter --------------------------------------------------------------------------------


def _dcgm_line(metric: str, gpu: str, uuid: str, pod: str, value: str) -> str:
    return (
        f'{metric}{{gpu="{gpu}",UUID="{uuid}",pci_bus_id="00000000:0{gpu}:00.0",device="nvidia{gpu}",'
        f'modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",container="vllm",namespace="llm",pod="{pod}"}} {value}'
    )


def dcgm_page() -> str:
    rows = {
        "DCGM_FI_DEV_FB_USED": ("72000", "1000"),
        "DCGM_FI_DEV_FB_FREE": ("8000", "79000"),
        "DCGM_FI_DEV_FB_RESERVED": ("500", "500"),
        "DCGM_FI_DEV_GPU_UTIL": ("98", "0"),
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("0.85", "0.0"),
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": (str(0x1 | 0x4 | 0x40), "1"),
        "DCGM_FI_DEV_XID_ERRORS": ("79", "0"),
        "DCGM_FI_DEV_GPU_TEMP": ("71", "9223372036854775794"),
        "DCGM_FI_DEV_SM_CLOCK": ("1980", "345"),
    }
    lines = []
    for metric, (a, b) in rows.items():
        lines.append(f"# TYPE {metric} gauge")
        lines.append(_dcgm_line(metric, "1", "GPU-bbb", "vllm-b-0", b))
        lines.append(_dcgm_line(metric, "0", "GPU-aaa", "vllm-a-0", a))
    return "\n".join(lines) + "\n"


def test_dcgm_devices_units_and_throttle_names():
    gpu = to_gpu(parse_dcgm(dcgm_page()))
    assert gpu is not None and gpu.source == "dcgm" and gpu.join == ""
    d0, d1 = gpu.devices
    assert (d0.index, d0.uuid, d0.name) == ("0", "GPU-aaa", "NVIDIA H100 80GB HBM3")
    assert d0.memory_used_bytes == 72000 * 1024 * 1024
    assert d0.memory_total_bytes == (72000 + 8000 + 500) * 1024 * 1024
    assert d0.util_pct == 98.0
    assert d0.sm_active_pct == pytest.approx(85.0)
    assert d0.throttle_reasons == ("sw_power_cap", "hw_thermal_slowdown")  # gpu_idle is benign
    assert d0.xid_errors == 79.0
    assert d0.temperature_c == 71.0
    assert d0.ecc_uncorrected is None  # not exported: absent
    assert d1.throttle_reasons == ()
    assert d1.temperature_c is None  # DCGM's blank sentinel
    assert gpu.xid_errors == 79.0


def test_dcgm_pod_filter():
    page = parse_dcgm(dcgm_page())
    only_b = to_gpu(page, pod="vllm-b-0")
    assert only_b is not None and only_b.join == "pod label"
    assert [d.uuid for d in only_b.devices] == ["GPU-bbb"]
    assert only_b.memory_pct == pytest.approx(100 * 1000 / 80500)
    assert to_gpu(page, pod="someone-else") is None
    assert [d.uuid for d in to_gpu(page, uuids=["GPU-aaa"]).devices] == ["GPU-aaa"]


def test_sm_active_preferred_over_graphics_engine_active():
    text = dcgm_page() + _dcgm_line("DCGM_FI_PROF_SM_ACTIVE", "0", "GPU-aaa", "vllm-a-0", "0.42") + "\n"
    d0 = to_gpu(parse_dcgm(text)).devices[0]
    assert d0.sm_active_pct == pytest.approx(42.0)


def test_vllm_page_is_not_a_gpu_page():
    assert to_gpu(parse_dcgm(sample_text(V0_COMPOSER))) is None
    assert DCGM_WANTED.isdisjoint(VLLM_WANTED)


# -- malformed pages: duplicate series, unbounded engine labels (issue 10 defects 11 and 6) ---------


def test_duplicate_series_take_the_last_value_and_say_so():
    page = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 50.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.99\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.30\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0\n'
        'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 4.0\n'
    )
    s = to_sample(parse_vllm(page))
    assert s.value("running") == 50.0  # the last, as Prometheus keeps it: not 51
    assert s.value("kv_usage") == 0.30  # not the max of the two
    assert s.value("requests_success") == 7.0  # distinct series of one engine still add up
    assert len(s.warnings) == 1 and "duplicate" in s.warnings[0] and "2 series" in s.warnings[0]


def test_a_clean_page_has_no_warnings():
    s = to_sample(parse_vllm('vllm:num_requests_running{engine="0"} 1.0\nvllm:num_requests_running{engine="1"} 2.0\n'))
    assert s.value("running") == 3.0 and s.warnings == ()


def test_engines_beyond_the_bound_are_aggregated_and_said():
    from tui.core.metrics.extract import MAX_ENGINES

    n = MAX_ENGINES + 500
    lines = [f'vllm:num_requests_running{{engine="{e}"}} 1.0' for e in range(n)]
    lines += [f'vllm:kv_cache_usage_perc{{engine="{e}"}} {0.9 if e == n - 1 else 0.1}' for e in range(n)]
    lines += [f'vllm:e2e_request_latency_seconds_bucket{{engine="{e}",le="+Inf"}} 2.0' for e in range(n)]
    s = to_sample(parse_vllm("\n".join(lines) + "\n"))
    assert len(s.engines) == MAX_ENGINES  # the first MAX_ENGINES - 1 and one aggregate of the rest
    assert s.value("running") == float(n)  # nothing lost from the pod's totals
    assert s.value("kv_usage") == 0.9  # the worst engine, even when aggregated
    assert s.hist("e2e").count == 2.0 * n
    assert any("engines" in w and str(n) in w for w in s.warnings), s.warnings


def test_only_the_histograms_kvwatch_reads_are_parsed():
    """A real V1 page's bucket rows are most of the lines parsed; prefill / decode time, per-request
    time per output token and per-request preemptions are read by nothing (not the windows,
    the look-backs nor the diagnosis), so their rows are skipped like any unwanted family's."""
    from tui.core.pointlog import LOOKBACK_HISTS, WINDOW_HISTS

    read = set(WINDOW_HISTS) | set(LOOKBACK_HISTS) | {"iteration_tokens"}  # its count: engine steps
    from bench.realpage import render_v1_page

    for text in (sample_text("vllm-0.6.x-v0-vllmComposer-test-fixture-codeindex-48058675646.prom"),
                 render_v1_page(seed=3)):  # (the only reference pages with histograms; bench's V1 page)
        page = parse_vllm(text)
        s = to_sample(page)
        kept = {h for e in s.engines.values() for h in e.hists}
        assert kept <= read, kept - read
        assert {"ttft", "e2e", "prompt_len"} <= kept
        assert not [n for n in page.samples if "prefill_time" in n or "decode_time" in n or "request_time_per" in n]
    assert s.hist("iteration_tokens") is not None

"""SGLang pages -> Sample: every real sample page read exactly (checked against
prometheus_client's parser), data-parallel ranks as one replica, missing stays missing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tui.core import engines
from tui.core.engines import sglang

from .test_parser import SAMPLES

# A data-parallel SGLang pod (dp 2, tp 2: each scheduler's TP ranks repeat its state), with the
# scheduler, retraction and tokenizer families of a current release.
DP_PAGE = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 40.0
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="1"} 40.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 12.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 0.97
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 0.31
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 9.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 570979.0
sglang:max_total_num_tokens{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 570979.0
# HELP sglang:num_retracted_requests_total Total number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 17.0
sglang:num_retracted_requests_total{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 1.0
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{dp_rank="0",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} 0.42
sglang:cache_hit_rate{dp_rank="1",engine_type="unified",model_name="Qwen/Qwen3-32B",pp_rank="0",tp_rank="0"} NaN
# HELP sglang:cache_config_info Cache configuration.
# TYPE sglang:cache_config_info gauge
sglang:cache_config_info{dp_rank="0",model_name="Qwen/Qwen3-32B",num_pages="570979",page_size="1"} 1.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="Qwen/Qwen3-32B"} 3.0
sglang:time_to_first_token_seconds_bucket{le="1.0",model_name="Qwen/Qwen3-32B"} 8.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="Qwen/Qwen3-32B"} 10.0
sglang:time_to_first_token_seconds_sum{model_name="Qwen/Qwen3-32B"} 7.5
sglang:time_to_first_token_seconds_count{model_name="Qwen/Qwen3-32B"} 10.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="Qwen/Qwen3-32B"} 123456.0
"""


def sglang_pages() -> list[Path]:
    pages = sorted(SAMPLES.glob("sglang*.prom"))
    if not pages:
        pytest.skip(f"no SGLang pages in {SAMPLES}")
    return pages


def expected_values(text: str) -> dict[str, dict[str, float]]:
    """The canonical values per dp rank, computed from prometheus_client's reading of the page
    by the documented rule: first exposed name wins, NaN is no value, TP rows of one rank -> max."""
    rows: dict[str, list[tuple[dict, float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            rows.setdefault(s.name, []).append((s.labels, s.value))
    out: dict[str, dict[str, float]] = {}
    for canon, names in sglang.SCALARS.items():
        name = next((n for n in names if n in rows), None)
        for labels, v in rows.get(name, []):
            if math.isnan(v):
                continue
            ev = out.setdefault(labels.get("dp_rank", ""), {})
            ev[canon] = max(ev.get(canon, v), v)
    return out


def test_every_sglang_sample_page_is_read_exactly():
    for path in sglang_pages():
        text = path.read_text()
        s = engines.parse_page(text)
        assert s.engine == "sglang", path.name
        got = {rank: dict(e.values) for rank, e in s.engines.items()}
        assert got == expected_values(text), path.name
        assert got, path.name  # a real page is not an empty Sample


def test_the_dp_page_is_read_exactly_too():
    s = engines.parse_page(DP_PAGE)
    assert {r: dict(e.values) for r, e in s.engines.items() if e.values} == expected_values(DP_PAGE)


def test_a_data_parallel_pod_is_one_replica_with_per_rank_values():
    s = engines.parse_page(DP_PAGE)
    assert set(s.engines) == {"0", "1", ""}  # the tokenizer's histogram has no rank
    r0, r1 = s.engines["0"].values, s.engines["1"].values
    assert r0["running"] == 40 and r1["running"] == 12  # TP ranks of rank 0 are not added up
    assert s.value("running") == 52  # the pod: sum of its ranks
    assert s.value("kv_usage") == 0.97  # the pod: its worst rank
    assert s.value("preemptions") == 18  # retractions, summed
    assert s.value("max_total_tokens") == 2 * 570979
    assert r0["cache_hit_rate"] == 0.42 and "cache_hit_rate" not in r1  # NaN is no value
    assert s.hist("ttft").count == 10
    assert s.cache_config == {"num_pages": "570979", "page_size": "1"}
    assert s.model_name == "Qwen/Qwen3-32B"


def test_what_an_older_sglang_lacks_is_missing_not_zero():
    s = engines.parse_page((SAMPLES / "sglang-2025-03-pr-4444.prom").read_text()) if SAMPLES.is_dir() else None
    if s is None:
        pytest.skip("samples missing")
    for name in ("waiting", "preemptions", "max_total_tokens", "cache_hit_rate"):
        assert s.value(name) is None, name
    assert s.value("running") == 0.0 and s.value("kv_usage") == 0.0
    assert s.hist("ttft") is None


def test_pages_are_routed_and_labelled_by_engine():
    assert engines.engine_for_page(DP_PAGE) is engines.SGLANG
    assert engines.display("sglang", "sglang") == "SGLang"
    assert engines.display("vllm", "v1") == "vLLM V1"
    assert engines.display("vllm", "v0") == "vLLM V0"
    assert engines.display("vllm", "unknown") == "vLLM"


# -- diagnosis ----------------------------------------------------------------------------------


def _page(usage: float, queue: float, retracted: float, gen: float) -> str:
    lbl = 'engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"'
    return (f"# TYPE sglang:token_usage gauge\nsglang:token_usage{{{lbl}}} {usage}\n"
            f"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{{lbl}}} 30.0\n"
            f"# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{{{lbl}}} {queue}\n"
            f"# TYPE sglang:num_retracted_requests_total counter\n"
            f"sglang:num_retracted_requests_total{{{lbl}}} {retracted}\n"
            f"# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total{{{lbl}}} {gen}\n")


def _diagnose(pages):
    from tui.core.diagnosis import Thresholds, diagnose
    from tui.core.history import ReplicaHistory
    from tui.core.model import Scrape

    h = ReplicaHistory("sg")
    for i, text in enumerate(pages):
        h.add(Scrape(ts=1000.0 + 5 * i, replica="sg", sample=engines.parse_page(text)))
    return diagnose(h, 1000.0 + 5 * (len(pages) - 1), Thresholds())


def test_sglang_retractions_at_a_full_token_pool_are_kv_pressure_and_say_so():
    f = _diagnose([_page(0.97, 4 + i, 3.0 * i, 1000.0 * i) for i in range(6)])
    assert f.verdict == "kv-pressure"
    texts = [e.text for e in f.evidence]
    assert any(t.startswith("SGLang token usage 0.97 >=") for t in texts), texts
    assert any(t.startswith("SGLang retractions/s 0.60 (30 s) >") for t in texts), texts


def test_sglang_without_retraction_counter_says_the_signal_is_missing():
    pages = [_page(0.5, 0, 0, 1000.0 * i).replace("sglang:num_retracted_requests_total", "x_other")
             for i in range(4)]
    f = _diagnose(pages)
    assert f.verdict == "healthy"
    assert "preemptions_per_s" in f.missing
    assert any(e.text == "SGLang retractions/s: not exposed" for e in f.evidence)

"""The engine interface: one module per engine, and the tree asking it instead of hard-wiring vLLM."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

from tui.core import engines
from tui.core.cluster import args as A
from tui.core.diagnosis import capacity
from tui.core.engines import VLLM
from tui.core.record.reader import record_to_scrape
from tui.core.sim import args as sim_args
from tui.core.sim.hardware import MODELS

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.5
"""


def _fake_engine() -> engines.Engine:
    # Another engine with its own family prefix, reading its page through vLLM's mapping.
    return dataclasses.replace(VLLM, name="fake", label="Fake", metric_prefixes=("fake:",),
                               parse_page=lambda text: VLLM.parse_page(text.replace("fake:", "vllm:")))


def test_a_page_is_routed_to_the_engine_that_owns_its_families(monkeypatch):
    fake = _fake_engine()
    monkeypatch.setattr(engines, "ENGINES", (VLLM, fake))
    assert engines.engine_for_page(PAGE) is VLLM
    assert engines.engine_for_page(PAGE.replace("vllm:", "fake:")) is fake
    assert engines.engine_for_page("") is engines.DEFAULT


def test_recorded_pages_are_parsed_through_the_registry(monkeypatch):
    monkeypatch.setattr(engines, "ENGINES", (VLLM, _fake_engine()))
    s = record_to_scrape({"ts": 1.0, "replica": "r", "metrics": PAGE.replace("vllm:", "fake:")})
    assert s.error is None and s.sample is not None
    assert s.sample.value("running") == 3 and s.sample.value("kv_usage") == 0.5


def test_no_source_hard_wires_the_vllm_parser():
    """Sources and the recorder ask `engines.parse_page`; only the engine module names vLLM's parser."""
    allowed = {"tui/core/engines/vllm.py", "tui/core/metrics/extract.py", "tui/core/diagnosis/scenarios.py"}
    offenders = []
    for path in (ROOT / "tui").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name == "parse_vllm" for a in node.names):
                offenders.append(rel)
    assert offenders == []


def test_one_kv_cache_dtype_list_everywhere():
    assert A.SPECS["kv-cache-dtype"].choices == VLLM.kv_cache_dtypes
    for d in VLLM.kv_cache_dtypes:  # the simulator accepts every choice the edit form offers
        sim_args.EngineArgs(kv_cache_dtype=d).validate()
    with pytest.raises(ValueError):
        sim_args.EngineArgs(kv_cache_dtype="fp7").validate()


@pytest.mark.parametrize("dtype", [d for d in VLLM.kv_cache_dtypes] + ["float32"])
def test_kv_bytes_per_token_agree_across_simulator_planner_and_preflight(dtype):
    m = MODELS["llama-3.1-8b"]
    arch = capacity.ModelArch(m.layers, m.kv_heads, m.head_dim)
    want = VLLM.kv_bytes_per_token(m.layers, m.kv_heads, m.head_dim, dtype)
    assert capacity.kv_bytes_per_token(arch, dtype)[0] == want
    if dtype in VLLM.kv_cache_dtypes:
        assert m.kv_bytes_per_token(dtype) == want
    assert A.kv_bytes_per_token(m.layers, m.kv_heads, m.head_dim, A._dtype_bytes(dtype)) == want


def test_gpu_memory_utilization_default_is_stated_once():
    assert VLLM.default("gpu-memory-utilization") == 0.9 == A.default_for("gpu-memory-utilization")
    # The simulated fleet runs above vLLM's default on purpose: a named simulator setting.
    assert sim_args.EngineArgs().gpu_memory_utilization == sim_args.SIM_GPU_MEMORY_UTILIZATION == 0.92


def test_kv_pool_tokens_from_gpu_memory_utilisation_and_weights():
    GiB = 1024**3
    bpt = VLLM.kv_bytes_per_token(32, 8, 128)  # Llama-3-8B bf16: 128 KiB per token
    assert VLLM.kv_pool_tokens(80 * GiB, 0.9, 16 * GiB, bpt) == int((72 - 16) * GiB // bpt) == 458752
    assert VLLM.kv_pool_tokens(10 * GiB, 0.5, 6 * GiB, bpt) == 0
    with pytest.raises(ValueError):
        VLLM.kv_pool_bytes(80 * GiB, 1.2, 0)


def test_sim_args_and_hardware_do_not_import_each_other():
    def imports(rel: str) -> set[str]:
        tree = ast.parse((ROOT / rel).read_text())
        return {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}

    assert "hardware" not in imports("tui/core/sim/args.py")


def test_every_metric_an_engine_reads_is_under_the_prefixes_that_mark_its_pages():
    for e in engines.ENGINES:
        exposed = [n for names in (*e.scalars.values(), *e.histograms.values()) for n in names]
        assert exposed and all(n.startswith(e.metric_prefixes) for n in exposed), e.name
        assert {"kv_usage", "running", "waiting", "preemptions"} <= set(e.scalars)

"""Capacity planner against the worked figures in shared/reference/engine-args.md."""

from __future__ import annotations

import pytest

from tui.core.diagnosis.capacity import (
    GiB,
    ModelArch,
    arch_from_config,
    kv_budget,
    kv_bytes_per_token,
    plan,
    plan_for_history,
)
from tui.core.metrics.extract import parse_vllm, to_sample

from .diagnosis_helpers import TOK_B, hist, history_of, scrape

SAMPLES = "/work/shared/reference/samples/"
LLAMA3_8B = {  # the fields of meta-llama/Meta-Llama-3-8B's config.json that matter
    "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192, "model_type": "llama",
}


def test_llama3_8b_bytes_per_token_is_128_kib():
    arch = arch_from_config(LLAMA3_8B)
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim, arch.dtype_bytes) == (32, 8, 128, 2)
    bpt, lines = kv_bytes_per_token(arch)
    assert bpt == 131_072
    assert "131,072 B" in lines[0]
    assert kv_bytes_per_token(arch, "fp8")[0] == 65_536  # fp8 halves it
    assert kv_bytes_per_token(arch, tp=2)[0] == 65_536  # KV heads split across TP ranks


def test_a100_40gb_budget_and_blocks_match_the_v0_log():
    # "total_gpu_memory (39.50GiB) x gpu_memory_utilization (0.90) = 35.55GiB; model weights take
    # 14.96GiB; non_torch_memory takes 0.10GiB; PyTorch activation peak memory takes 9.37GiB;
    # the rest of the memory reserved for KV Cache is 11.12GiB." ... "# GPU blocks: 5691"
    budget, lines = kv_budget(39.50 * GiB, 0.90, 14.96 * GiB, 9.37 * GiB, 0.10 * GiB)
    assert budget / GiB == pytest.approx(11.12, abs=0.005)
    p = plan(arch=arch_from_config(LLAMA3_8B), gpu_total_bytes=39.50 * GiB, gpu_memory_utilization=0.90,
             weights_bytes=14.96 * GiB, activation_bytes=9.37 * GiB, non_torch_bytes=0.10 * GiB, max_model_len=8192)
    # 11.12 GiB / 128 KiB = 91,095 tokens -> 5,693 blocks (the log's 11.12 is rounded; it says 5691)
    assert p.num_gpu_blocks == pytest.approx(5691, abs=3)
    assert p.max_concurrency == pytest.approx(11.12, abs=0.01)
    assert p.source == "architecture and GPU memory"
    text = "\n".join(p.lines)
    assert "35.55 GiB" in text and "11.12 GiB" in text


def test_concurrency_from_the_logged_block_count():
    p = plan(cache_config={"num_gpu_blocks": "5691", "block_size": "16"}, max_model_len=8192)
    assert p.capacity_tokens == 91_056
    assert p.max_concurrency == pytest.approx(11.115, abs=0.001)  # "Maximum concurrency ... 11.12x"
    assert "5,691 x block_size 16 = 91,056 tokens" in "\n".join(p.lines)


def test_v0_sample_page_blocks():
    text = open(SAMPLES + "vllm-0.5-0.6-v0-korean-tutorial-codeindex-19518685618.prom").read()
    s = to_sample(parse_vllm(text))
    arch = arch_from_config(LLAMA3_8B)  # Llama-3.1-8B: same KV shape
    p = plan(cache_config=s.cache_config, arch=arch, max_model_len=8192)
    assert p.capacity_tokens == 2375 * 16
    # its CPU swap space: 4 GiB / (128 KiB x 16) = 2048 blocks, as the label says
    bpt, _ = kv_bytes_per_token(arch)
    assert int(s.cache_config["swap_space_bytes"]) // (bpt * 16) == int(s.cache_config["num_cpu_blocks"]) == 2048


def test_kv_cache_size_tokens_label_wins_over_blocks_for_hybrid_models():
    # vllm-metal #479 (elided labels): num_gpu_blocks="118", kv_cache_size_tokens="90000"
    labels = {"kv_cache_max_concurrency": "1.0", "num_gpu_blocks": "118", "kv_cache_size_tokens": "90000",
              "block_size": "16"}
    p = plan(cache_config=labels, max_model_len=90000)
    assert p.capacity_tokens == 90_000 and p.max_concurrency == 1.0
    assert any("hybrid" in n for n in p.notes)
    p2 = plan(cache_config={"num_gpu_blocks": "118", "block_size": "16", "sliding_window": "4096"})
    assert p2.capacity_tokens == 1888 and any("wrong for hybrid" in n for n in p2.notes)


def test_suggested_max_num_seqs_from_p95_shape_with_headroom():
    p = plan(cache_config={"num_gpu_blocks": "5691", "block_size": "16"}, p95_prompt=2000, p95_output=400,
             current_max_num_seqs=256, headroom=0.1)
    # 91,056 x 0.9 / 2,400 = 34.1
    assert p.suggested_max_num_seqs == 34
    assert p.suggest == {"max-num-seqs": "34"}
    assert any("256 > 34" in line for line in p.lines)


def test_plan_for_history_uses_the_served_request_shape():
    prompts = [1500.0] * 95 + [4000.0] * 5
    gens = [300.0] * 100
    h = history_of([
        scrape(1000.0, cache={"num_gpu_blocks": "5691", "block_size": "16"},
               hists={"prompt_len": hist(TOK_B, []), "gen_len": hist(TOK_B, [])}),
        scrape(1005.0, cache={"num_gpu_blocks": "5691", "block_size": "16"},
               hists={"prompt_len": hist(TOK_B, prompts), "gen_len": hist(TOK_B, gens)}),
    ])
    p = plan_for_history(h, max_model_len=8192)
    assert p.tokens_per_request is not None and 1500 <= p.tokens_per_request <= 2500
    assert p.suggested_max_num_seqs == int(91_056 * 0.9 / p.tokens_per_request)


def test_unknown_capacity_says_what_is_missing():
    p = plan()
    assert p.capacity_tokens is None and any("unknown" in n for n in p.notes)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        arch_from_config({"hidden_size": 4096})
    with pytest.raises(ValueError, match="gpu-memory-utilization"):
        kv_budget(40 * GiB, 1.5, 10 * GiB)


def test_gqa_mqa_and_multimodal_configs():
    assert arch_from_config({"num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
                             "hidden_size": 3584}).head_dim == 128
    mqa = arch_from_config({"n_layer": 24, "n_head": 16, "n_embd": 2048, "multi_query": True})
    assert mqa.num_kv_heads == 1
    mm = arch_from_config({"text_config": {"num_hidden_layers": 40, "num_attention_heads": 32,
                                           "num_key_value_heads": 8, "head_dim": 128}, "torch_dtype": "bfloat16"})
    assert mm.num_layers == 40
    assert ModelArch(1, 1, 1).dtype_bytes == 2

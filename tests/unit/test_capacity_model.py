"""One model of a replica's capacity: the planner, the runbook's cap step and the edit preflight
read the same figure, and it never contradicts what the replica was seen doing."""

from __future__ import annotations

from tui.core.cluster import args as A
from tui.core.diagnosis import Thresholds
from tui.core.diagnosis.capacity import plan_for_history

from .diagnosis_helpers import TOK_B, hist, history_of, scrape

T = Thresholds()
LABELS = {"kv_cache_size_tokens": "100000", "block_size": "16", "gpu_memory_utilization": "0.9"}


def _history(running: float, kv: float, preempt_per_scrape: float):
    # p95 prompt ~4k + output ~2k tokens: 100k x 0.9 / ~6k -> ~15 by the p95 arithmetic
    out = []
    for i in range(12):
        hists = {"prompt_len": hist(TOK_B, [4000.0] * 20 * (i + 1)), "gen_len": hist(TOK_B, [2000.0] * 20 * (i + 1))}
        out.append(scrape(1000.0 + 10 * i, kv=kv, running=running, waiting=20.0, preempt=preempt_per_scrape * i,
                          cache={**LABELS, "max_num_seqs": "32"}, hists=hists))
    return history_of(out)


def test_a_batch_seen_running_without_preemption_fits():
    p = plan_for_history(_history(32.0, 0.8, 0.0), t=T, current_max_num_seqs=32)
    assert p.suggested_max_num_seqs == 32, p.lines
    assert not any("vLLM preempts" in ln for ln in p.lines), p.lines  # the table shows no preemption
    assert any("observed: 32 sequences" in ln for ln in p.lines)


def test_a_preempting_replica_is_sized_by_its_request_shape():
    p = plan_for_history(_history(32.0, 0.97, 3.0), t=T, current_max_num_seqs=32)
    assert p.suggested_max_num_seqs is not None and p.suggested_max_num_seqs < 32, p.lines
    assert any("vLLM preempts" in ln for ln in p.lines)


def test_the_preflight_warns_above_the_plans_figure():
    cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--max-model-len", "8192",
                                                         "--max-num-seqs", "64"]})
    pf = A.kv_preflight(cmd, {"max-num-seqs": 32}, LABELS, fits=19, fits_why="capacity plan")
    assert pf.status == "warn" and any("max-num-seqs 32 > 19 that fits" in m for m in pf.messages), pf
    assert A.kv_preflight(cmd, {"max-num-seqs": 16}, LABELS, fits=19).status == "ok"

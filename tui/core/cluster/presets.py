"""The vLLM incident presets by name (runbook: emergency-mitigation.md steps 2-4).

Apart from `args` so the key registry (tui/actions.py) can describe them without loading the
args package, which only a cluster needs; `args.changes` applies them."""

from __future__ import annotations

PRESETS: dict[str, str] = {
    "seqs-25": "cut --max-num-seqs by 25%",
    "seqs-50": "cut --max-num-seqs by 50%",
    "gmu-0.7": "--gpu-memory-utilization 0.7",
    "gmu-0.6": "--gpu-memory-utilization 0.6",
    "batched-50": "halve --max-num-batched-tokens",
}

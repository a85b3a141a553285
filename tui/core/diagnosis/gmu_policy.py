"""kvwatch's one gpu-memory-utilization policy: the runbook's steps, `kvwatch audit`'s headroom
rule, the edit form's presets and the preflight all read it here.

The runbooks, each right in its own place, read together:
  prevention.md            gpu-memory-utilization <= 0.7 (<= 0.6 long-context / bursty): the
                           ceiling kvwatch recommends and the audit's rule (fail above it)
  emergency-mitigation.md  CUDA OOM / allocation failures: 0.7, still unstable 0.6
  preemption-thrash.md     after demand is capped, raise it "toward (not to) the limit, leave
                           headroom": in STEP increments, never past the ceiling; at the ceiling
                           the supply side is done and the next step is to scale out
kvwatch is stricter than the runbooks where they are loose: lowering gpu-memory-utilization
relieves CUDA OOM crashes but shrinks the KV pool, which makes preemption thrash worse, so it is
offered only with evidence of OOM (or outside an incident, as prevention), never against KV
pressure or a queue.
"""

from __future__ import annotations

from .. import verdicts as V
from .thresholds import Thresholds

STEP = 0.05  # one raise "toward the limit"

# presets that lower gpu-memory-utilization, by name, and the emergency step each one is
LOWER_PRESETS = ("gmu-0.7", "gmu-0.6")
# verdicts during which a smaller KV pool hurts: the lowering presets are refused then (no OOM)
_POOL_HUNGRY = frozenset({V.KV_PRESSURE, V.OVERLOADED, V.CONCURRENCY_CAPPED})


def ceiling(t: Thresholds, long_context: bool = False) -> float:
    """The highest value kvwatch recommends (the audit passes at or below it)."""
    return t.audit_gpu_mem_util_long if long_context else t.audit_gpu_mem_util


def within(value: float, t: Thresholds, long_context: bool = False) -> bool:
    return value <= ceiling(t, long_context) + 1e-9


def raise_to(current: float | None, t: Thresholds, long_context: bool = False) -> float | None:
    """The runbook's raise: one STEP toward the ceiling, capped at it; None at or above it."""
    top = ceiling(t, long_context)
    if current is None or current >= top - 1e-9:
        return None
    return round(min(top, current + STEP), 2)


def emergency_steps(t: Thresholds) -> tuple[float, float]:
    """emergency-mitigation.md's two steps (0.7, then 0.6), the same numbers as the ceilings."""
    return (t.audit_gpu_mem_util, t.audit_gpu_mem_util_long)


def lower_for_oom(current: float | None, t: Thresholds) -> float:
    """The OOM step: the first emergency step below the current value; below both, STEP x 2 less
    (never under 0.5: the model weights must still fit)."""
    steps = emergency_steps(t)
    if current is None:
        return steps[0]
    for step in steps:
        if step < current - 1e-9:
            return step
    return max(0.5, round(current - 2 * STEP, 2))


def preset_value(key: str, t: Thresholds) -> float:
    return emergency_steps(t)[LOWER_PRESETS.index(key)]


def preset_refusal(key: str, verdict: str, oom: bool) -> str | None:
    """Why a preset is not offered for a replica in `verdict` (None: it is offered)."""
    if key in LOWER_PRESETS and not oom and verdict in _POOL_HUNGRY:
        return (f"{verdict} without CUDA OOM: lowering gpu-memory-utilization shrinks the KV pool and makes "
                "it worse; cut max-num-seqs / max-num-batched-tokens / max-model-len instead (offered for OOM)")
    return None

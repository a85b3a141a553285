"""Every number the diagnosis compares against, in one place (overridable from the config file).

Entering a verdict and leaving it use different numbers (kv_high / kv_clear) and a verdict must
hold for `sustain_points` consecutive scrapes before it replaces the current one, so a replica
sitting on a threshold does not flicker; both are small enough that a real onset is reported
within two scrape intervals.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Thresholds:
    # -- KV pressure ---------------------------------------------------------------------------
    kv_high: float = 0.90  # KV usage at/above this is "near the ceiling" (enter kv-pressure)
    kv_clear: float = 0.85  # a kv-pressure replica leaves it only below this
    preempt_rate: float = 0.01  # preemptions per second (last interval) that count as "preempting"
    preempt_min_count: int = 2  # ... and at least this many over `recent_points` intervals:
    # a lone preemption is not thrash
    waiting_min: float = 1.0  # requests waiting that count as a queue
    queue_points: int = 3  # scrapes a queue must persist to count without preemptions (KV full)
    kv_low: float = 0.60  # below this KV has clear headroom (concurrency-capped remedy: raise cap)
    kv_room: float = 0.75  # peak KV below this leaves room to raise the cap (~15 % more sequences
    # stay under kv_high): concurrency-capped; above it a held queue is `overloaded` (scale out).
    # A concurrency-capped replica keeps its verdict while the peak stays below kv_clear; an
    # overloaded one becomes concurrency-capped only below kv_low (the remedy must not flip).
    room_points: int = 6  # scrapes the KV peak is taken over (long prompts swing KV at a cap)
    # -- GPU (runbook numbers; GPU memory is necessary evidence, never decisive) -----------------
    gpu_mem_high_pct: float = 85.0  # runbook: GPU memory > 85-90%
    gpu_util_low_pct: float = 60.0  # runbook: utilisation < 60% while traffic is present
    gpu_util_high_pct: float = 80.0  # compute-bound: utilisation > 80%
    gpu_util_clear_pct: float = 70.0  # a compute-bound replica leaves it only below this
    gpu_util_saturated_pct: float = 90.0  # a queue pinned at the cap is the GPU's limit above this
    # Throttle reasons that do not mean a sick node: idle clocks, application clocks, sync boost,
    # display clock, and the software power cap a busy healthy GPU sits on at full load.
    benign_throttle: tuple[str, ...] = (
        "gpu_idle",
        "applications_clocks_setting",
        "sync_boost",
        "display_clock_setting",
        "sw_power_cap",
    )
    # -- batching / host ---------------------------------------------------------------------
    batch_collapse: float = 2.0  # effective batch p95 at/below this = collapsed
    cpu_saturated_cores: float = 0.85  # API server near one core: host-bound
    # -- concurrency cap ---------------------------------------------------------------------
    pinned_points: int = 2  # scrapes `running` must stay flat to count as pinned at a cap
    pinned_tolerance: float = 0.05  # "flat" / "at max-num-seqs": within this fraction
    # -- stall -------------------------------------------------------------------------------
    stall_points: int = 2  # consecutive scrape intervals with no engine progress while busy
    deferred_share: float = 0.5  # waiting counts as "dominated by deferred" at/above this share
    # -- time / hysteresis ---------------------------------------------------------------------
    start_timeout_s: float = 600.0  # a pod loading (HTTP 503 / not ready) longer than this is down
    min_points: int = 2  # successful scrapes needed before any verdict but down/unknown
    sustain_points: int = 2  # scrapes a new verdict must hold before it replaces the current one
    recent_points: int = 3  # scrape intervals a kv-pressure replica must be preemption-free to leave
    # ... and while its KV stays at/above kv_high, this long since its last preemption: a burst,
    # then a quiet stretch at a full pool, is the pool still binding (the next burst comes as the
    # batch grows back), not a healthy replica between two kv-pressure verdicts
    kv_hold_s: float = 60.0
    # SGLang retracts, then tightens admission (its new-token ratio): under KV pressure its
    # retractions come every 10-20 s, so its preemption window spans at least this long
    retract_window_s: float = 30.0
    kv_idle: float = 0.25  # fleet imbalance: a replica below this KV with no queue is idle
    # -- triage / runbook / capacity ---------------------------------------------------------
    shape_shift_ratio: float = 2.0  # p95 prompt / max_tokens this many times the baseline = shift
    latency_recovered_ratio: float = 1.5  # TTFT/TPOT p95 within this factor of baseline = back
    recovery_window_s: float = 120.0  # sustained window for the runbook's recovery criteria
    burn_window_s: float = 3600.0  # a rollout this long before the incident is suspect
    capacity_headroom: float = 0.10  # KV share kept free when sizing max-num-seqs
    long_context_tokens: int = 32768  # max-model-len at/above this is "long context" (audit)
    # -- fleet alarm (queue / latency vs each replica's own baseline) -----------------------------
    alarm_ratio: float = 5.0  # this many times the baseline raises the alarm
    alarm_queue_min: float = 50.0  # ... and at least this many waiting
    alarm_queue_clear: float = 10.0  # cleared below this (and 2x the baseline)
    alarm_latency_min_s: float = 2.0  # ... and TTFT p95 at least this
    alarm_points: int = 2  # scrapes over (under) the marks to raise (clear) it
    alarm_baseline_points: int = 3  # calm scrapes a baseline is learnt from
    audit_gpu_mem_util: float = 0.70  # prevention.md: gpu-memory-utilization <= 0.7
    audit_gpu_mem_util_long: float = 0.60  # <= 0.6 for long-context or bursty workloads

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def with_overrides(self, **kw: Any) -> "Thresholds":
        """A copy with some fields replaced; unknown names or wrong types raise ValueError."""
        known = {f.name: f for f in fields(self)}
        clean = {}
        for k, v in kw.items():
            if k not in known:
                raise ValueError(f"unknown threshold {k!r} (known: {', '.join(sorted(known))})")
            cur = getattr(self, k)
            try:
                if isinstance(cur, bool):
                    raise TypeError
                if isinstance(cur, int):
                    if isinstance(v, float) and not v.is_integer():
                        raise TypeError
                    v = int(v)
                elif isinstance(cur, float):
                    v = float(v)
                elif isinstance(cur, tuple):
                    if isinstance(v, str):
                        v = tuple(x.strip() for x in v.split(",") if x.strip())
                    else:
                        v = tuple(str(x) for x in v)
            except (TypeError, ValueError):
                raise ValueError(f"threshold {k!r}: expected {type(cur).__name__}, got {v!r}") from None
            clean[k] = v
        return replace(self, **clean)

"""The range every number in the config file must fall in.

A value outside its range is refused with the file, the line and the range (config.py), rather
than accepted and failing later: `history_window = 1e300` overflowed every refresh, and
`kv_high = 1.5` silently switched kv-pressure detection off.
"""

from __future__ import annotations

from typing import Any, Callable

Check = tuple[Callable[[Any], bool], str]

WINDOW_RANGE = (1, 86400)  # [windows] rate_s, quantile_s, stale_s, hist_keep_every_s: seconds

_FRACTION = (0, 1)
_POINTS = (1, 1000)
_PCT = (0, 100)

# [thresholds], grouped by range; a threshold not listed (added later) accepts 0 to 1e9.
_BY_RANGE: dict[tuple[float, float], tuple[str, ...]] = {
    _FRACTION: ("kv_high", "kv_clear", "kv_low", "pinned_tolerance", "deferred_share", "capacity_headroom",
                "audit_gpu_mem_util", "audit_gpu_mem_util_long", "kv_idle"),
    _POINTS: ("preempt_min_count", "queue_points", "pinned_points", "stall_points", "min_points",
              "sustain_points", "recent_points"),
    _PCT: ("gpu_mem_high_pct", "gpu_util_low_pct", "gpu_util_high_pct", "gpu_util_clear_pct",
           "gpu_util_saturated_pct"),
    (0, 1e6): ("preempt_rate", "waiting_min", "batch_collapse"),
    (0, 4096): ("cpu_saturated_cores",),
    (1, 100): ("shape_shift_ratio", "latency_recovered_ratio"),
    (1, 86400): ("recovery_window_s",),
    (0, 86400): ("retract_window_s", "kv_hold_s"),
    (1, 30 * 86400): ("burn_window_s",),
    (1, 100_000_000): ("long_context_tokens",),
}
THRESHOLD_RANGES: dict[str, tuple[float, float]] = {n: r for r, names in _BY_RANGE.items() for n in names}


def in_range(lo: float, hi: float) -> Check:
    """A config check: `lo <= v <= hi`, and the message that says the range."""
    return (lambda v: lo <= v <= hi), f"must be in the range {lo:g} to {hi:g}"

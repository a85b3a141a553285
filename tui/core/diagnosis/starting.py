"""A pod loading its model is not down: vLLM answers HTTP 503 (or the pod is not ready) until the
weights are loaded and the KV pool allocated, which takes minutes on a large model. Such a
replica is `starting`, with its elapsed time, until it serves or `start_timeout_s` passes (then
it is down: "not ready after ..."). A pod that crashed (restarts, a termination reason) or that
served and then failed is down: it is no longer loading.
"""

from __future__ import annotations

from ..history import ReplicaHistory
from ..model import Evidence, Finding, PodInfo
from ..textsafe import clean
from .. import verdicts as V
from .thresholds import Thresholds


def _loading(error: str, pod: PodInfo | None) -> bool:
    if pod is not None and (pod.restarts or pod.last_termination_reason):
        return False  # a crash, not a first start
    if pod is not None and pod.phase not in (None, "Pending", "Running"):
        return False
    return error.startswith("HTTP 503") or (pod is not None and pod.ready is False)


def elapsed_text(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s} s" if s < 120 else f"{s // 60}m{s % 60:02d}s"


def starting(h: ReplicaHistory, now: float, t: Thresholds) -> Finding | None:
    """The `starting` finding of a replica that has never served and is loading; None otherwise.
    A replica loading for longer than `start_timeout_s` gets a `down` finding that says so."""
    err = h.last_error
    if err is None or h.last_ok is not None or h.first_error_ts is None:
        return None
    pod = err.pod
    if not _loading(err.error or "", pod):
        return None
    since = h.first_error_ts
    took = elapsed_text(now - since)
    phase = clean(pod.phase or "?") if pod is not None else "?"
    state = f"{phase}, not ready" if pod is not None else "pod status unknown"
    reason = clean(err.error or "")
    if now - since > t.start_timeout_s:
        return Finding(V.DOWN, (Evidence("scrape", reason, None, "info", True,
                                         f"not ready after {took} ({reason}; {state})"),),
                       since=since, summary=f"down: not ready after {took} ({reason})")
    ev = (Evidence("scrape", reason, None, "info", False, f"{reason}: loading the model ({state})"),
          Evidence("starting_s", now - since, t.start_timeout_s, "<", False,
                   f"starting for {took} (down after {elapsed_text(t.start_timeout_s)})"))
    return Finding(V.STARTING, ev, since=since, summary=f"starting for {took}: {state} ({reason})")

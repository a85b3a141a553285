"""Backoff for a source that failed to start (Prometheus down, redirecting, answering 500).

kvwatch is opened during incidents, when the metrics backend may be the thing that is broken:
the start is retried, sooner at first and then less often, and the error is said meanwhile.
"""

from __future__ import annotations

from .sources.base import SourceError

FIRST_S, MAX_S = 1.0, 10.0  # seconds to the first retry, and the most between two


class StartRetry:
    def __init__(self, first_s: float = FIRST_S, max_s: float = MAX_S) -> None:
        self.first_s, self.max_s = first_s, max_s
        self.delay = 0.0
        self.next_at = 0.0
        self.error: str | None = None

    def failed(self, now: float, e: BaseException) -> None:
        self.delay = self.first_s if not self.delay else min(self.max_s, self.delay * 2)
        self.next_at = now + self.delay
        self.error = str(e) if isinstance(e, SourceError) else f"{type(e).__name__}: {e}"

    def reset(self) -> None:
        self.delay, self.next_at, self.error = 0.0, 0.0, None

    def check(self, now: float) -> None:
        """Raise the last start error while the next try is not yet due."""
        if self.error is not None and now < self.next_at:
            raise SourceError(f"{self.error} (retrying in {self.next_at - now:.0f}s)")

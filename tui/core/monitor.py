"""The headless pipeline: source -> history -> diagnosis -> FleetState.

The Textual app, the `--json` mode and offline `diagnose` all drive this same object, so what
the screen shows and what a script sees cannot disagree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from .diagnosis import Thresholds, diagnose
from .diagnosis.alarm import FleetAlarms
from .history import SERIES, SPARK_POINTS, ReplicaHistory, Windows
from .model import FleetState, ReplicaMetrics, ReplicaView, Scrape
from .sources.base import Source
from .verdicts import SEVERITY


@dataclass(frozen=True)
class ReplicaSnapshot:
    """One replica as of the last refresh, for screens that need more than its ReplicaView.

    `history` is the Monitor's own (not copied: it carries the diagnosis' state between
    refreshes); it is handed on only to the pure report functions (triage, runbook, capacity),
    which read it. Screens draw from the frozen fields."""

    name: str
    points: tuple[tuple[float, ReplicaMetrics], ...]  # (ts, metrics) per good scrape, oldest first
    load: tuple[float, float] | None  # (running, waiting) of the last scrape if it was good
    history: ReplicaHistory


class Monitor:
    def __init__(
        self,
        source: Source | None = None,
        thresholds: Thresholds | None = None,
        windows: Windows | None = None,
        history_len: int = 600,
        on_scrapes: Callable[[list[Scrape]], None] | None = None,
    ) -> None:
        self.source = source
        self.thresholds = thresholds or Thresholds()
        self.windows = windows or Windows()
        self.history_len = history_len
        self.histories: dict[str, ReplicaHistory] = {}
        self.alarms = FleetAlarms(self.thresholds)  # queue / latency vs each replica's baseline
        self._latest: dict[str, Scrape] = {}  # last scrape of any kind, for pod/group/error
        self.on_scrapes = on_scrapes  # e.g. the recorder
        self.state = FleetState(ts=time.time(), source=getattr(source, "description", ""), replicas=())

    async def start(self, backfill_s: float | None = None) -> None:
        """Start the source; sources with history (Prometheus) back-fill the sparklines first."""
        assert self.source is not None
        await self.source.start()
        backfill = getattr(self.source, "backfill", None)
        if backfill is not None and backfill_s:
            self.ingest(await backfill(window_s=backfill_s))

    async def refresh(self) -> FleetState:
        assert self.source is not None
        scrapes = await self.source.poll()
        take_removed = getattr(self.source, "take_removed", None)  # cluster sources: deleted pods
        if take_removed is not None:
            self.forget(take_removed())
        return self.ingest(scrapes)

    def knows(self, name: str) -> bool:
        return name in self.histories

    def replica_snapshot(self, name: str) -> ReplicaSnapshot | None:
        """A frozen view of replica `name`; None when the Monitor does not know it."""
        h = self.histories.get(name)
        if h is None:
            return None
        load = None
        if h.last_ok is not None and h.last_error is None:
            m = h.latest
            if m.running is not None and m.waiting is not None:
                load = (m.running, m.waiting)
        return ReplicaSnapshot(name, tuple(h.points), load, h)

    def forget(self, names: Iterable[str]) -> None:
        """Drop replicas that no longer exist (deleted pods)."""
        for n in list(names):
            self.histories.pop(n, None)
            self._latest.pop(n, None)

    def ingest(self, scrapes: list[Scrape], now: float | None = None) -> FleetState:
        if self.on_scrapes is not None and scrapes:
            self.on_scrapes(scrapes)
        for s in scrapes:
            h = self.histories.get(s.replica)
            if h is None:
                h = self.histories[s.replica] = ReplicaHistory(s.replica, self.history_len, self.windows)
            h.add(s)
            self._latest[s.replica] = s
        if now is None:
            now = max((s.ts for s in scrapes), default=self.state.ts)
        views = [self._view(name, h, now) for name, h in self.histories.items()]
        views.sort(key=lambda v: (SEVERITY.get(v.verdict, 99), -(v.metrics.kv_usage or 0.0), v.name))
        state = FleetState(ts=now, source=getattr(self.source, "description", ""), replicas=tuple(views))
        self.state = replace(state, alarms=self.alarms.update(state, self.histories))
        return self.state

    def _view(self, name: str, h: ReplicaHistory, now: float) -> ReplicaView:
        state = h.state(now)
        # `since` is the history's own verdict state (kept by the diagnosis across refreshes)
        finding = diagnose(h, now, self.thresholds)
        if finding.since is None:  # nothing judged up to `now` yet
            finding = replace(finding, since=now)
        last = self._latest.get(name)
        ok = h.last_ok
        sample = ok.sample if ok else None
        return ReplicaView(
            name=name,
            state=state,
            finding=finding,
            metrics=h.latest,
            series={k: h.series(k, SPARK_POINTS) for k in SERIES},
            error=last.error if last is not None else None,
            group=(last.group if last is not None else None),
            pod=(last.pod if last is not None else None),
            engines={e: dict(es.values) for e, es in sample.engines.items()} if sample else {},
            generation=sample.generation if sample else "unknown",
            model_name=sample.model_name if sample else None,
            last_ok_ts=ok.ts if ok else None,
            cache_config=dict(sample.cache_config) if sample else {},
        )

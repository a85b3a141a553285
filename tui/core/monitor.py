"""The headless pipeline: source -> history -> diagnosis -> FleetState.

The Textual app, the `--json` mode and offline `diagnose` all drive this same object, so what
the screen shows and what a script sees cannot disagree.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Sequence

from .diagnosis import Thresholds, diagnose
from .finite import finite_scrape
from .diagnosis.alarm import FleetAlarms
from .diagnosis.imbalance import FleetImbalance
from .history import SPARK_POINTS, ReplicaHistory, Windows
from .model import DOWN, OK, STALE, Evidence, Finding, FleetState, ReplicaMetrics, ReplicaView, Scrape
from .retry import StartRetry
from .sources.base import Source
from .verdicts import HEALTHY, SEVERITY, UNKNOWN


@dataclass(frozen=True)
class ReplicaSnapshot:
    """One replica as of the last refresh, for screens that need more than its ReplicaView.

    `history` is the Monitor's own (not copied: it carries the diagnosis' state between
    refreshes); it is handed on only to the pure report functions (triage, runbook, capacity),
    which read it. Screens draw from the frozen fields."""

    name: str
    points: Sequence[tuple[float, ReplicaMetrics]]  # (ts, metrics) per good scrape, oldest first (a copy)
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
        self.imbalance = FleetImbalance(self.thresholds)  # a hot replica beside idle ones of its model
        self._latest: dict[str, Scrape] = {}  # last scrape of any kind, for pod/group/error
        self._invalid: dict[str, dict[str, str]] = {}  # non-finite signals of the last scrape
        self._broken: dict[str, str] = {}  # replicas whose last scrape could not be taken in
        self.on_scrapes = on_scrapes  # e.g. the recorder
        self._late: set[str] = set()  # replicas with no answer in the last refresh (source's `pending`)
        self.state = FleetState(ts=time.time(), source=getattr(source, "description", ""), replicas=())
        self.started = False  # the source started; until then each refresh retries, with backoff
        self.ok_refreshes = 0  # refreshes whose poll succeeded (the --json exit code reads it)
        self._retry = StartRetry()
        self._backfill_s: float | None = None
        # A refresh hands the event loop back this often while it takes a fleet's scrapes in
        # (1024 replicas take ~0.15 s of CPU: the screen and its keys must not wait on them all).
        self.yield_after_s = 0.01
        self._ingesting = asyncio.Lock()  # overlapping refreshes take their scrapes in in turn

    async def start(self, backfill_s: float | None = None) -> None:
        """Start the source; sources with history (Prometheus) back-fill the sparklines first.

        A failure here (Prometheus down, a redirect, an HTTP 500) raises for the caller to show,
        and is not final: each later `refresh` retries the start, with backoff."""
        assert self.source is not None
        self._backfill_s = backfill_s
        try:
            await self.source.start()
        except Exception as e:
            self._retry.failed(time.monotonic(), e)
            raise
        self.started = True
        self._retry.reset()
        backfill = getattr(self.source, "backfill", None)
        if backfill is not None and backfill_s:
            self.ingest(await backfill(window_s=backfill_s))

    async def refresh(self) -> FleetState:
        assert self.source is not None
        if not self.started:
            self._retry.check(time.monotonic())  # raises the last error until the next try is due
            await self.start(self._backfill_s)
        scrapes = await self.source.poll()
        self.ok_refreshes += 1
        take_removed = getattr(self.source, "take_removed", None)  # cluster sources: deleted pods
        if take_removed is not None:
            self.forget(take_removed())
        # Replicas still unanswered when the source published (a slow or hanging endpoint):
        # their last values are shown stale, with their age, until the answer arrives.
        answered = {s.replica for s in scrapes}
        pending = {n for n in getattr(self.source, "pending", ()) if n not in answered}
        polled_at = getattr(self.source, "polled_at", None)
        async with self._ingesting:
            self._late = pending
            clock = time.perf_counter
            t = clock()
            for _ in self._ingest_steps(scrapes, polled_at):
                if clock() - t >= self.yield_after_s:
                    await asyncio.sleep(0)
                    t = clock()
        return self.state

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
        return ReplicaSnapshot(name, h.points.frozen(), load, h)

    def forget(self, names: Iterable[str]) -> None:
        """Drop replicas that no longer exist (deleted pods)."""
        for n in list(names):
            self.histories.pop(n, None)
            self._latest.pop(n, None)
            self._invalid.pop(n, None)
            self._broken.pop(n, None)
            self._late.discard(n)

    def ingest(self, scrapes: list[Scrape], now: float | None = None) -> FleetState:
        """Take `scrapes` in and judge every replica, all at once."""
        for _ in self._ingest_steps(scrapes, now):
            pass
        return self.state

    def _ingest_steps(self, scrapes: list[Scrape], now: float | None) -> Iterator[None]:
        """`ingest`, one replica at a time: each step leaves every history whole, so the
        caller may hand the loop back between steps (a replica forgotten meanwhile is left out)."""
        if self.on_scrapes is not None and scrapes:
            self.on_scrapes(scrapes)
        for name in self._late:  # asked but never answered yet: listed (down), not left out
            if name not in self.histories:
                self.histories[name] = ReplicaHistory(name, self.history_len, self.windows)
        for s in scrapes:
            if s.raw is not None:  # the page text was for the recorder (on_scrapes) alone
                s = replace(s, raw=None)
            s, invalid = finite_scrape(s)
            h = self.histories.get(s.replica)
            if h is None:
                h = self.histories[s.replica] = ReplicaHistory(s.replica, self.history_len, self.windows)
            # One replica's odd page must never take the others down: a failure here is that
            # replica's error, reported on its row.
            try:
                h.add(s)
            except Exception as e:  # noqa: BLE001
                self._broken[s.replica] = f"cannot use this scrape ({type(e).__name__}: {e})"
            else:
                self._broken.pop(s.replica, None)
            self._latest[s.replica] = s
            self._invalid[s.replica] = invalid
            yield
        if now is None:
            now = max((s.ts for s in scrapes), default=self.state.ts)
        views = []
        for name, h in list(self.histories.items()):
            if self.histories.get(name) is h:
                views.append(self._safe_view(name, h, now))
                yield
        if len(views) != len(self.histories):  # a replica forgotten after its view was made
            views = [v for v in views if v.name in self.histories]
        views.sort(key=lambda v: (SEVERITY.get(v.verdict, 99), -(v.metrics.kv_usage or 0.0), v.name))
        state = FleetState(ts=now, source=getattr(self.source, "description", ""), replicas=tuple(views),
                           source_warnings=tuple(getattr(self.source, "warnings", ()) or ()))
        try:
            alarms = self.alarms.update(state, self.histories)
        except Exception:  # noqa: BLE001 - a fleet alarm failure must not cost the fleet its rows
            alarms = self.state.alarms
        try:
            imbalance = self.imbalance.update(state)
        except Exception:  # noqa: BLE001 - nor a fleet imbalance failure
            imbalance = self.state.imbalance
        self.state = replace(state, alarms=alarms, imbalance=imbalance)

    def _safe_view(self, name: str, h: ReplicaHistory, now: float) -> ReplicaView:
        """The replica's view; a failure in its diagnosis is its own `unknown` with the reason."""
        try:
            view = self._view(name, h, now)
        except Exception as e:  # noqa: BLE001 - isolate per replica
            why = f"diagnosis failed ({type(e).__name__}: {e})"
            last = self._latest.get(name)
            return ReplicaView(name=name, state=DOWN if h.last_ok is None else h.state(now),
                               finding=Finding("unknown", since=now, summary=why), metrics=ReplicaMetrics(),
                               series={}, error=why, group=last.group if last else None,
                               pod=last.pod if last else None, invalid=self._invalid.get(name, {}))
        broken = self._broken.get(name)
        return replace(view, error=broken) if broken and not view.error else view

    def _view(self, name: str, h: ReplicaHistory, now: float) -> ReplicaView:
        state = h.state(now)
        if state == OK and name in self._late:
            state = STALE
        # `since` is the history's own verdict state (kept by the diagnosis across refreshes)
        finding = diagnose(h, now, self.thresholds)
        if finding.since is None:  # nothing judged up to `now` yet
            finding = replace(finding, since=now)
        if finding.verdict == HEALTHY and h.last_error is not None:
            finding = _unanswered(h, now)
        last = self._latest.get(name)
        ok = h.last_ok
        sample = ok.sample if ok else None
        return ReplicaView(
            name=name,
            state=state,
            finding=finding,
            metrics=h.latest,
            series=h.all_series(SPARK_POINTS),
            error=last.error if last is not None else None,
            group=(last.group if last is not None else None),
            pod=(last.pod if last is not None else None),
            # the page's own mappings, not copies: a Sample is never changed once made, nor its
            # cache_config, nor the invalid signals of a scrape (copying them cost ~2 us a replica)
            engines={e: es.values for e, es in sample.engines.items()} if sample else {},
            generation=sample.generation if sample else "unknown",
            engine=sample.engine if sample else "",
            model_name=sample.model_name if sample else None,
            last_ok_ts=ok.ts if ok else None,
            cache_config=sample.cache_config if sample else {},
            invalid=self._invalid.get(name) or {},
            warnings=sample.warnings if sample else (),
        )


def _unanswered(h: ReplicaHistory, now: float) -> Finding:
    """A replica whose last scrape failed is never healthy: its last good values say how it was,
    not how it is (a problem verdict stands, marked stale: it is the one to act on)."""
    err = h.last_error.error if h.last_error is not None else "no answer"
    since = h.first_error_ts if h.first_error_ts is not None else now
    ok_ts = h.last_ok.ts if h.last_ok is not None else None
    age = f"healthy {max(0.0, now - ok_ts):.0f} s ago, at its last good scrape" if ok_ts is not None else "never judged"
    text = f"last scrape failed: {err} ({age})"
    return Finding(UNKNOWN, (Evidence("scrape", err, None, "info", True, text),), since=since,
                   summary=f"no answer: {err} ({age})")

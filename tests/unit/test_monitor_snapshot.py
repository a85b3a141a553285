"""Monitor.replica_snapshot: what screens read about one replica beyond its ReplicaView, frozen."""

from __future__ import annotations

import dataclasses

import pytest

from tui.core.model import EngineSample, Sample, Scrape
from tui.core.monitor import Monitor


def scrape(ts: float, running: float | None, waiting: float | None, error: str | None = None) -> Scrape:
    if error is not None:
        return Scrape(ts, "r", None, error=error)
    vals = {k: v for k, v in (("running", running), ("waiting", waiting)) if v is not None}
    return Scrape(ts, "r", Sample(engines={"0": EngineSample(vals, {})}, generation="v1"))


def test_snapshot_is_frozen_and_follows_the_last_scrape() -> None:
    m = Monitor()
    assert m.replica_snapshot("r") is None and not m.knows("r")
    m.ingest([scrape(1.0, 3, 1)])
    m.ingest([scrape(2.0, 5, 2)])
    snap = m.replica_snapshot("r")
    assert m.knows("r") and snap.load == (5, 2)
    assert [ts for ts, _ in snap.points] == [1.0, 2.0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.load = None  # type: ignore[misc]
    m.ingest([scrape(3.0, 9, 9)])
    assert snap.load == (5, 2) and len(snap.points) == 2  # taken earlier: unchanged
    m.ingest([scrape(4.0, None, None, error="connection refused")])
    assert m.replica_snapshot("r").load is None  # the last scrape failed: no load to trust


def test_no_load_when_the_engine_exposes_no_queue() -> None:
    m = Monitor()
    m.ingest([scrape(1.0, 3, None)])
    assert m.replica_snapshot("r").load is None


def test_the_monitor_keeps_no_page_text_once_the_recorder_had_it() -> None:
    # Sources that record hand each scrape's page text (~42 KB) to the Monitor for the
    # recorder; kept on the last scrape of each replica it is ~10 MB at 256 replicas.
    import sys

    recorded: list[Scrape] = []
    m = Monitor(on_scrapes=recorded.extend)
    page = "".join(["vllm:num_requests_running 3\n", "#" * 42_000])
    base = sys.getrefcount(page)
    ok = Scrape(1.0, "a", Sample(engines={"0": EngineSample({"running": 3.0}, {})}), raw=page)
    engineless = Scrape(1.0, "b", error="no vLLM metrics on page", raw=page)
    m.ingest([ok, engineless])
    assert recorded[0].raw is page  # the recorder saw it
    recorded.clear()
    del ok, engineless
    assert sys.getrefcount(page) == base

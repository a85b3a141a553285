"""Issue 10 defect 1: a non-finite value makes only its own signal invalid, and a failure in one
replica's diagnosis is that replica's `unknown`, never the fleet's."""

from __future__ import annotations

import math

import pytest

import tui.core.monitor as monitor_mod
from tests.faultserver import healthy_page, nan_inf_page
from tui.core import engines
from tui.core.export import fleet_json
from tui.core.finite import finite_scrape
from tui.core.model import EngineSample, Sample, Scrape
from tui.core.monitor import Monitor


def scrape(name: str, page: str, ts: float) -> Scrape:
    return Scrape(ts=ts, replica=name, sample=engines.parse_page(page))


def test_non_finite_values_are_dropped_with_a_reason() -> None:
    s, invalid = finite_scrape(scrape("bad", nan_inf_page(), 1.0))
    assert s.sample is not None
    assert s.sample.value("running") is None  # +Inf is not a request count
    assert s.sample.value("kv_usage") is not None and math.isfinite(s.sample.value("kv_usage"))  # engine 0 kept
    assert "+Inf" in invalid["running"] and "+Inf" in invalid["preemptions"]
    nan = Scrape(ts=1.0, replica="n", sample=Sample({"0": EngineSample({"kv_usage": math.nan, "waiting": 2.0}, {})}))
    s, invalid = finite_scrape(nan)
    assert "NaN" in invalid["kv_usage"] and s.sample.value("kv_usage") is None and s.sample.value("waiting") == 2.0
    ok, none = finite_scrape(scrape("good", healthy_page(), 1.0))
    assert none == {} and ok.sample.value("running") == 7.0


def test_inf_page_leaves_the_other_replicas_diagnosed() -> None:
    mon = Monitor()
    for i in range(5):
        state = mon.ingest([scrape("good", healthy_page(running=7 + i % 2), 100.0 + i),
                            scrape("bad", nan_inf_page(), 100.0 + i)])
    line = fleet_json(state)
    reps = {r["name"]: r for r in line["replicas"]}
    assert reps["good"]["running"] in (7.0, 8.0) and reps["good"]["invalid"] == {}
    assert reps["bad"]["running"] is None and "running" in reps["bad"]["invalid"]
    assert reps["bad"]["verdict"] != "unknown"  # the rest of the bad replica is still judged


def test_a_failing_diagnosis_is_that_replicas_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    real = monitor_mod.diagnose

    def flaky(h, now, t):
        if h.name == "bad":
            raise OverflowError("boom")
        return real(h, now, t)

    monkeypatch.setattr(monitor_mod, "diagnose", flaky)
    mon = Monitor()
    for i in range(3):
        state = mon.ingest([scrape("good", healthy_page(), 100.0 + i), scrape("bad", healthy_page(), 100.0 + i)])
    views = {v.name: v for v in state.replicas}
    assert views["bad"].verdict == "unknown" and "OverflowError: boom" in (views["bad"].error or "")
    assert views["good"].verdict != "unknown" and views["good"].metrics.running == 7.0

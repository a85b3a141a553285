"""The runbook's scale-out reads four values of every scrape of the last two minutes of every
replica of the workload: read from the packed rows (ScrapeView.values_since), exactly what the
rebuilt scrapes say, without rebuilding one Scrape per row (at 64 replicas a third of the
runbook's opening)."""

from __future__ import annotations

import math
from dataclasses import replace

import tui.core.pointlog as pointlog
from tui.core.diagnosis import Thresholds
from tui.core.diagnosis.scaleout import scale_out

from .diagnosis_helpers import history_of, series

NAMES = ("requests_success", "requests_aborted", "running", "waiting", "kv_usage", "waiting_capacity")


def _histories():
    def with_counts(h, i):
        out = []
        for k, s in enumerate(h.scrapes):
            eng = s.sample.engines["0"]
            vals = {**eng.values, "requests_success": (s.ts - 1000.0) * (1.5 + i), "requests_aborted": 0.25 * k}
            if k % 4 == 1:  # a page without a queue: the point's value and the page's differ
                vals.pop("waiting", None)
            out.append(replace(s, sample=replace(s.sample, engines={"0": replace(eng, values=vals)})))
        return history_of(out, h.name)

    return [with_counts(history_of(series(60, kv=0.85, running=32.0, waiting=lambda k: 3.0 * k,
                                          cache={"max_num_seqs": "32"}, hists=None), f"r{i}"), i)
            for i in range(3)]


def test_values_since_gives_what_the_rebuilt_scrapes_give():
    for h in _histories():
        last = h.scrapes[-1].ts
        for start, end in ((-math.inf, math.inf), (last - 120.0, last), (last - 60.0, last - 30.0), (last + 1, math.inf)):
            got = h.scrapes.values_since(start, end, NAMES)
            want = [(s.ts, tuple(s.page.value(n) for n in NAMES)) for s in h.scrapes.since(start, end)]
            assert got == want, (start, end)
        assert any(v[3] is None for _, v in h.scrapes.values_since(-math.inf, math.inf, NAMES))


def test_the_scale_out_rebuilds_no_scrape(monkeypatch):
    hs = _histories()
    now = hs[0].scrapes[-1].ts
    want = scale_out([(h, "overloaded") for h in hs], now, Thresholds())
    rebuilt: list[float] = []
    rebuild = pointlog.rebuild

    def counting(ts, *a):
        rebuilt.append(ts)
        return rebuild(ts, *a)

    monkeypatch.setattr(pointlog, "rebuild", counting)
    got = scale_out([(h, "overloaded") for h in hs], now, Thresholds())
    assert got == want and got is not None and got.arrivals_per_s > 0
    assert rebuilt == []

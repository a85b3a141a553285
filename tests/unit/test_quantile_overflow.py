"""A latency quantile in the +Inf bucket is "more than the last bucket", never an exact number
(issue 11 item 4: TTFT p95 shown as 616 s while the requests waited longer than 640 s)."""

from __future__ import annotations

from tui.core.model import AtLeast
from tui.core.diagnosis.runbook import verify
from tui.core.diagnosis import Thresholds
from widgets.format import secs

from .diagnosis_helpers import hist, history_of, scrape

B = (0.5, 1.0, 10.0, 160.0, 640.0, float("inf"))


def test_a_quantile_in_the_inf_bucket_is_at_least_the_last_bound():
    h = hist(B, [0.2] * 10 + [900.0] * 90)
    p95 = h.quantile(0.95)
    assert isinstance(p95, AtLeast) and p95 == 640.0
    assert secs(p95) == "> 640s"
    inside = hist(B, [0.2] * 10 + [300.0] * 90).quantile(0.95)
    assert not isinstance(inside, AtLeast) and secs(inside) != "> 640s"
    assert str(p95 * 2) == "1280.0"  # arithmetic gives plain numbers


def test_the_runbook_and_json_say_more_than_the_last_bucket():
    # baseline scrapes a minute apart: the history keeps one histogram a minute for baselines
    base = [scrape(1000.0 + 60 * i, kv=0.5, preempt=0.0, hists={"ttft": hist(B, [0.2] * 10 * (i + 1))})
            for i in range(3)]
    slow = [scrape(1150.0 + 5 * i, kv=0.97, preempt=float(i),
                   hists={"ttft": hist(B, [0.2] * 30 + [900.0] * (10 * (i + 1)))}) for i in range(30)]
    h = history_of(base + slow)
    v = verify(h, slow[-1].ts, Thresholds(), incident_start=1140.0)
    (ttft,) = [c for c in v.criteria if c.key == "ttft"]
    assert "TTFT p95 > 640 s" in ttft.text and ttft.met is False
    assert isinstance(h.latest.ttft_p95_s, AtLeast)

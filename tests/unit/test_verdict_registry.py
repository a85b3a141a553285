"""The verdict registry is the one place verdicts are defined: every verdict the rules reach is in
it, and every consumer (themes, widgets, Monitor order, summaries, --json) agrees with it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from themes import THEMES, VERDICT_DEFAULTS
from tui.core import verdicts as V
from tui.core.diagnosis import SUMMARY, Thresholds, diagnose
from tui.core.export import replica_json
from tui.core.model import SEVERITY, VERDICTS
from tui.core.monitor import Monitor
from widgets.verdict import colour_var, label

from .diagnosis_helpers import history_of, scrape, series

T = Thresholds()
frozen = lambda i: 100.0 * min(i, 3)  # noqa: E731

# One history per verdict, each driving the rules to it.
CASES = {
    V.HEALTHY: series(5, kv=0.05, running=1.0, util=10.0, cpu=lambda i: 0.1 * i),
    V.COMPUTE_BOUND: series(5, kv=0.6, running=60.0, util=95.0, cpu=lambda i: 2.5 * i),
    V.HOST_BOUND: series(5, kv=0.1, running=2.0, waiting=3.0, util=15.0, cpu=lambda i: 4.9 * i),
    V.NODE_FAULT: series(3, xid=79.0),
    V.KV_PRESSURE: series(4, kv=0.99, waiting=lambda i: 5.0 + i, preempt=lambda i: 3.0 * i, running=3.0),
    V.STALLED: series(8, running=12.0, waiting=5.0, gen=frozen, prompt=frozen, kv=0.6, util=100.0),
    V.CONCURRENCY_CAPPED: series(4, running=64.0, waiting=lambda i: 3.0 * (i + 1), kv=0.5,
                                 cache={"max_num_seqs": "64"}),
    V.OVERLOADED: series(8, running=32.0, waiting=lambda i: 10.0 * (i + 1), kv=0.85,
                         cache={"max_num_seqs": "32"}),
    V.LORA_CAPPED: series(5, running=16.0, waiting=31.0, wcap=3.0, wdef=28.0, kv=0.25,
                          lora=(4, ("a0", "a1", "a2", "a3"), ("a4", "a5"))),
    V.STARTING: [scrape(1000.0 + 10 * i, error="HTTP 503") for i in range(3)],
    V.UNKNOWN: series(1),
    V.DOWN: series(3) + [scrape(1015.0 + 5 * i, error="connection refused") for i in range(5)],
}


def test_the_registry_lists_each_verdict_once_with_symbols_and_a_colour_role():
    assert len(set(V.VERDICTS)) == len(V.REGISTRY) == len(CASES)
    for v in V.REGISTRY:
        assert v.symbol and v.ascii_symbol.isascii() and v.short and len(v.short) <= 12
        assert v.colour_role == f"verdict-{v.name}"


@pytest.mark.parametrize("name", list(CASES))
def test_every_verdict_the_rules_reach_is_registered_and_drawable(name):
    scr = CASES[name]
    f = diagnose(history_of(scr), scr[-1].ts, T)
    assert f.verdict == name
    v = V.BY_NAME[f.verdict]
    assert f.summary == v.summary or not v.summary  # down / unknown write their own
    for theme in THEMES.values():
        assert v.colour_role in theme.variables, f"{theme.name} has no colour for {name}"
    assert colour_var(name) == v.colour_role in VERDICT_DEFAULTS
    assert label(name) == f"{v.symbol} {v.short}" and label(name, ascii=True) == f"{v.ascii_symbol} {v.short}"


def test_consumers_read_the_registry():
    assert VERDICTS == V.VERDICTS and SEVERITY == V.SEVERITY
    assert SUMMARY == V.SUMMARY
    assert V.SEVERITY[V.DOWN] < V.SEVERITY[V.KV_PRESSURE] < V.SEVERITY[V.HEALTHY]  # worst first


def test_the_monitor_sorts_and_json_names_verdicts_as_registered():
    mon = Monitor()
    for name, scr in CASES.items():
        mon.ingest([replace(s, replica=name) for s in scr])
    st = mon.ingest([], now=1100.0)
    assert [r.verdict for r in st.replicas] == list(V.VERDICTS)
    assert [replica_json(r)["verdict"] for r in st.replicas] == list(V.VERDICTS)

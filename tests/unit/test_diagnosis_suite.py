"""The labelled scenario suite, diagnosed from scrape-log files (a fast slice of bench/)."""

from __future__ import annotations

import pytest

from tests.scenarios import sim_traces, synthetic_traces
from tui.core.offline import diagnose_file
from tui.core.record import Recorder

KEEP = ("steady.v1", "long-prompts.v0", "burst.v1-early", "compute-bound.v1", "host-bound.v0",
        "throttled-node.v1", "concurrency-capped.v1-early", "stalled.v0", "stalled-deferred.v1", "down.v1",
        "host-bound.nogpu", "long-prompts.nogpu", "steady-high-kv-no-preempt.v1", "idle-preallocated.v0",
        "pressure-then-wedge.v1", "capped-then-host.v0", "cap-raised-into-pressure.v1")
NOT_KV = ("compute", "host", "capped", "stalled", "steady", "idle", "throttled")


def scored(trace, tmp_path):
    path = tmp_path / (trace.name.replace(":", "_") + ".jsonl.gz")
    with Recorder(str(path)) as rec:
        rec.write(s for s, _ in trace.rows)
    res = diagnose_file(str(path), keep_points=True)
    assert not res.problems
    pred = dict(res.replicas[trace.rows[0][0].replica].points)
    out = []
    for s, label in trace.rows:
        last_on = max((t for t, _ in trace.onsets if t <= s.ts), default=trace.rows[0][0].ts)
        if label is not None and s.ts - last_on >= 2 * trace.interval:
            out.append((label, pred[s.ts]))
    return out, pred


def test_synthetic_slice_meets_the_targets(tmp_path):
    traces = [t for t in synthetic_traces(seed=7) if t.name in KEEP]
    assert len(traces) == len(KEEP)
    pairs = []
    for tr in traces:
        got, pred = scored(tr, tmp_path)
        pairs += got
        if any(k in tr.name for k in NOT_KV) and "pressure" not in tr.name:
            assert "kv-pressure" not in pred.values(), tr.name
        # every labelled onset is detected within two scrape intervals of the first scrape after it
        for t_on, v in tr.onsets[1:]:
            first = min(ts for ts in pred if ts >= t_on)
            hit = min((ts for ts, p in pred.items() if ts >= t_on and p == v), default=None)
            assert hit is not None and hit - first <= 2 * tr.interval, (tr.name, v)
    for v in {label for label, _ in pairs}:
        tp = sum(1 for a, b in pairs if a == v == b)
        fn = sum(1 for a, b in pairs if a == v != b)
        fp = sum(1 for a, b in pairs if b == v != a)
        target = 0.95 if v == "kv-pressure" else 0.9
        assert tp / (tp + fn) >= target and tp / (tp + fp) >= target, v


@pytest.mark.parametrize("scenario", ["long-prompts", "compute-bound", "throttled-node"])
def test_simulator_scenarios(tmp_path, scenario):
    from tests import scenarios as S

    old = S.SIM_SCENARIOS
    S.SIM_SCENARIOS = (scenario,)
    try:
        traces = sim_traces(seed=3, duration=240.0, replicas=2, v0_replicas=1)
    finally:
        S.SIM_SCENARIOS = old
    pairs = []
    for tr in traces:
        got, pred = scored(tr, tmp_path)
        pairs += got
        if scenario != "long-prompts":
            assert "kv-pressure" not in pred.values()
    right = sum(a == b for a, b in pairs)
    assert pairs and right / len(pairs) >= 0.9
    assert {a for a, _ in pairs} >= ({"kv-pressure"} if scenario == "long-prompts" else {scenario.replace(
        "throttled-node", "node-fault")})

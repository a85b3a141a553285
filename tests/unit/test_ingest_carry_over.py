"""Work the ingest carries over between refreshes instead of redoing it, each against the
definition it stands for, on the labelled scenario traces (every verdict, held and pending ones)
and on live real-size pages: the held verdict's evidence (from the checks its classification
made) and the sparkline series a view hands out (a snapshot, read when a screen draws it)."""

from __future__ import annotations

import math

import pytest

from tests.scenarios import synthetic_traces
from tui.core.diagnosis.rules import classify, diagnose, evidence_for
from tui.core.diagnosis.thresholds import Thresholds
from tui.core.history import SERIES, ReplicaHistory
from tui.core.monitor import Monitor


def _traces():
    return [tr for tr in synthetic_traces(seed=7)
            if tr.name.split(".")[0] in ("burst", "long-prompts", "pressure-then-wedge", "capped-then-host",
                                          "cap-raised-into-pressure", "stalled", "compute-bound", "down")]


def test_a_verdicts_evidence_is_its_classification_or_the_held_verdicts_case():
    t = Thresholds()
    held = judged = 0
    for tr in _traces():
        h = ReplicaHistory(tr.name)
        for s, _label in tr.rows:
            before = (h.diagnosis.state, h.diagnosis.n) if h.diagnosis is not None else None
            h.add(s)
            f = diagnose(h, s.ts, t)
            tr_ = h.diagnosis
            if before is None or tr_.last is None or not tr_.tail or f.verdict != tr_.state:
                continue
            point = tr_.tail[-1]
            # the verdict the point was judged against: the state before it (after an outage: none)
            prev = before[0] if tr_.n == before[1] + 1 else "unknown"
            v, ev, miss = classify(point, t, prev)
            if v != tr_.state:  # pending: the held verdict's case, judged afresh, then the pending line
                want, want_miss = evidence_for(tr_.state, point, t)
                assert f.evidence[:-1] == tuple(want) and f.evidence[-1].signal == "pending", (tr.name, s.ts)
                held += 1
            else:
                want, want_miss = ev, miss
                assert f.evidence == tuple(want), (tr.name, s.ts)
                judged += 1
            assert f.missing == tuple(want_miss), (tr.name, s.ts)
    assert held > 20 and judged > 500  # both kinds were checked


def _same(a, b):
    return type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


@pytest.mark.parametrize("maxlen", [5, 60, 600])
def test_a_views_series_are_the_points_values_when_it_was_made(maxlen):
    """Each refresh's views are kept and read only after later refreshes (as a screen may):
    each series is still the values of the points up to its own refresh."""
    mon = Monitor(None, history_len=maxlen)
    kept = []
    for tr in _traces()[:2]:
        for s, _label in tr.rows:
            state = mon.ingest([s], now=s.ts)
            h = mon.histories[s.replica]
            pts = h.points[max(0, len(h.points) - 60):]
            want = {k: tuple(getattr(m, k) for _, m in pts) for k in SERIES}
            kept.append((next(v for v in state.replicas if v.name == s.replica), want))
    assert len(kept) > 200
    for view, want in kept:
        got = view.series
        assert list(got) == list(SERIES) and len(got) == len(SERIES)
        assert dict(got) == {k: got[k] for k in SERIES} and got == dict(got)
        for k in SERIES:
            assert len(got[k]) == len(want[k]) and all(map(_same, got[k], want[k])), k


def test_a_cloned_monitor_carries_on_as_the_one_it_was_cloned_from():
    """The diagnosis' recent points are shared by a Monitor and its clone (replay seeks): what
    either lets go of as it moves on must not change what the other says."""
    from tui.core.export import replica_json
    from tui.core.replay import clone_monitor

    rows = sorted((s for tr in _traces()[:3] for s, _ in tr.rows), key=lambda s: s.ts)
    by_ts: dict[float, list] = {}
    for s in rows:
        by_ts.setdefault(s.ts, []).append(s)
    times = sorted(by_ts)
    a = Monitor(None)
    for ts in times[:40]:
        a.ingest(by_ts[ts], now=ts)
    b = clone_monitor(a)
    frames = []
    for ts in times[40:80]:
        st = a.ingest(by_ts[ts], now=ts)
        frames.append([(replica_json(r, ts), r.finding.summary) for r in st.replicas])
    for ts, want in zip(times[40:80], frames, strict=True):
        st = b.ingest(by_ts[ts], now=ts)
        assert [(replica_json(r, ts), r.finding.summary) for r in st.replicas] == want, ts


def _ordered_reference(v, c):
    """rules._ordered as it was written before its per-verdict sets and remembered lines."""
    from tui.core import verdicts as V
    from tui.core.diagnosis.rules import _ORDER, _fmt, _with_text

    first = tuple(k for k in c.ev if k.startswith("fault")) if v == V.NODE_FAULT else _ORDER.get(v, ())
    drop = {"util" if v == V.COMPUTE_BOUND else "util_high"} | ({"room", "queue"} - set(first))
    ev = dict(c.ev)
    wait, wcap = ev.get("waiting"), ev.get("wcap")
    if wait is not None and wcap is not None:
        if wcap.op == "missing":
            drop.add("wcap")
            if wait.op != "missing":
                ev["waiting"] = _with_text(wait, f"{wait.text} (older vLLM: not split by reason)")
        else:
            drop.add("waiting")
            if isinstance(wait.value, (int, float)) and wait.value != wcap.value:
                ev["wcap"] = _with_text(wcap, f"{wcap.text} ({_fmt(wait.value)} waiting in all)")
    keys = [k for k in first if k in ev] + [k for k in ev if k not in first]
    return [ev[k] for k in keys if k not in drop]


def test_each_verdicts_evidence_is_ordered_and_worded_as_the_plain_definition():
    from tui.core import verdicts as V
    from tui.core.diagnosis.rules import _assess, _ordered
    from tui.core.model import Evidence

    t = Thresholds()
    seen = 0
    for tr in _traces():
        h = ReplicaHistory(tr.name)
        for s, _label in tr.rows:
            h.add(s)
            diagnose(h, s.ts, t)
            trk = h.diagnosis
            if trk is None or not trk.tail or trk.last is None:
                continue
            for prev in (None, trk.state):
                _v, c = _assess(trk.tail[-1], t, prev)
                q = c.ev["queue"]  # the remembered line, as one made afresh (types too)
                fresh = Evidence("queue_run", q.value, q.threshold, ">=", q.crossed,
                                 f"queue held for {q.value} scrape(s)" + ("" if q.crossed else f" (persists at {q.threshold})"))
                assert q == fresh and type(q.value) is type(fresh.value) and type(q.threshold) is type(fresh.threshold)
                for v in (*V.VERDICTS, "no-such-verdict"):
                    got, want = _ordered(v, c), _ordered_reference(v, c)
                    assert got == want and [type(e.value) for e in got] == [type(e.value) for e in want], (tr.name, v)
                    seen += 1
    assert seen > 1000

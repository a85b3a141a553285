"""One fact, one evidence line, and one window per rate: the evidence's "preemptions/s" is the
table's (30 s, tui/core/signal_windows.py), with the count of the last intervals on the same line
once, and a queue all waiting for capacity is one line."""

from __future__ import annotations

from tui.core.diagnosis import Thresholds, diagnose

from .diagnosis_helpers import history_of, series

T = Thresholds()


def _texts(f) -> list[str]:
    return [e.text for e in f.evidence]


def test_pressure_evidence_says_each_fact_once_with_its_window():
    scr = series(6, kv=0.97, waiting=lambda i: 5.0 + i, wcap=lambda i: 5.0 + i,
                 preempt=lambda i: 3.0 * i, running=3.0, util=35.0, mem_pct=92.0)
    h = history_of(scr)
    f = diagnose(h, scr[-1].ts, T)
    assert f.verdict == "kv-pressure"
    lines = _texts(f)
    rate = next(t for t in lines if t.startswith("preemptions/s"))
    # the one window every screen shows (signal_windows), the number the table shows
    assert rate.startswith(f"preemptions/s {h.latest.preemptions_per_s:.2f} (30 s) > 0.01"), rate
    assert sum("in the last 3 intervals" in t for t in lines) == 1, lines
    waits = [t for t in lines if t.startswith("waiting")]
    assert len(waits) == 1 and "for capacity" in waits[0], lines


def test_the_detail_screen_says_the_window_of_its_rate():
    from tui.core.monitor import Monitor
    from tui.screens.detail import evidence_text

    scr = series(6, kv=0.97, preempt=lambda i: 3.0 * i, waiting=5.0, running=3.0)
    mon = Monitor()
    for s in scr:
        state = mon.ingest([s])
    text = evidence_text(state.replicas[0], state.ts, {}, rate_s=mon.windows.rate_s).plain
    assert "preempt 0.6/s (30 s)" in text, text


def test_the_api_server_cpu_says_its_window_where_it_is_shown():
    # The detail screen showed "API server CPU 0.07 cores (not >= 0.85 cores)" in the evidence
    # (the last interval's rate, which the diagnosis judges) and "CPU 0.08 cores" below it (the
    # history's 30 s rate), neither saying which: one label, two numbers.
    from tui.core.monitor import Monitor
    from tui.screens.detail import evidence_text

    # CPU seconds grow by 0.5 a second, then by 0.1 in the last interval
    cpu = [0.5 * 5 * i for i in range(7)] + [0.5 * 5 * 6 + 0.1 * 5]
    scr = series(8, kv=0.5, cpu=lambda i: cpu[i], waiting=0.0, running=3.0)
    mon = Monitor()
    for s in scr:
        state = mon.ingest([s])
    v = state.replicas[0]
    text = evidence_text(v, state.ts, {}, rate_s=mon.windows.rate_s).plain
    ev = next(line for line in text.splitlines() if "API server CPU" in line)
    assert "0.10 cores" in ev and "last interval" in ev, ev
    assert f"CPU {v.metrics.cpu_cores:.2f} cores (30 s)" in text, text
    assert f"{v.metrics.cpu_cores:.2f}" != "0.10"  # the two windows do differ here


def test_engine_progress_is_written_with_what_it_counts_and_thousands_separated():
    # "engine progress 60730 tokens/steps": a sum of prompt and generated tokens and engine steps
    scr = series(4, kv=0.5, waiting=0.0, running=3.0, gen=lambda i: 30_000.0 * i, prompt=lambda i: 30_000.0 * i)
    f = diagnose(history_of(scr), scr[-1].ts, T)
    line = next(t for t in _texts(f) if t.startswith("engine progress"))
    assert line == "engine progress 60,000 (tokens + steps) in the last interval", line

"""The logs filter and triage step 4 keep what signals trouble, not vLLM's periodic stats line
(issue 11 item 6: "235 of 240 lines" matched a kv/cache filter; "22 preemption / KV warning
line(s)" were INFO stats lines)."""

from __future__ import annotations

from tui.core.diagnosis import loglines as L
from tui.core.diagnosis.triage import _logs

STATS_V1 = ("(APIServer pid=1) INFO 11-26 07:03:10 [loggers.py:123] Engine 000: Avg prompt throughput: 5120.0 "
            "tokens/s, Avg generation throughput: 210.3 tokens/s, Running: 41 reqs, Waiting: 120 reqs, "
            "Preemptions: 12, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%")
STATS_V0 = ("INFO 11-26 07:03:10 [metrics.py:351] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: "
            "30.0 tokens/s, Running: 4 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 97.0%, "
            "CPU KV cache usage: 0.0%.")
PREEMPT = ("WARNING 11-26 07:03:11 [scheduler.py:1560] Sequence group 12 is preempted by PreemptionMode.RECOMPUTE "
           "mode because there is not enough KV cache space.")
OOM = "ERROR 11-26 07:03:12 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
ENGINE = "(APIServer pid=1) ERROR 11-26 07:03:13 [core_client.py:562] Engine core proc EngineCore_0 died unexpectedly"
STARTUP = "(APIServer pid=1) INFO 11-26 07:00:01 [kv_cache_utils.py:849] GPU KV cache size: 167,040 tokens"
TRACE = ["Traceback (most recent call last):", '  File "/usr/lib/vllm/engine.py", line 12, in step',
         "    out = self.model(x)", "RuntimeError: CUDA error: an illegal memory access was encountered"]


def test_the_filter_keeps_trouble_and_drops_the_periodic_stats_line():
    lines = [STATS_V1, STATS_V0, STARTUP, PREEMPT, OOM, ENGINE, "INFO ... GET /metrics 200", *TRACE]
    kept = L.trouble_lines(lines)
    assert STATS_V1 not in kept and STATS_V0 not in kept and STARTUP not in kept
    assert kept == [PREEMPT, OOM, ENGINE, *TRACE]  # the whole traceback, indent and all
    assert L.kind(PREEMPT) == "preemption" and L.kind(OOM) == "oom" and L.kind(ENGINE) == "engine-error"
    assert L.kind(STATS_V1) is None and L.is_stats(STATS_V1) and L.is_stats(STATS_V0)


def test_triage_step_4_counts_only_real_warnings():
    item, oom = _logs([STATS_V1] * 22 + [STARTUP])
    assert not oom and item.status == "ok" and "22" not in item.summary
    item, oom = _logs([STATS_V1] * 22 + [PREEMPT, PREEMPT])
    assert item.status == "warn" and item.summary.startswith("2 preemption")
    item, oom = _logs([STATS_V1, OOM])
    assert oom and item.status == "bad"


def test_wrapped_lines_keep_their_indent():
    from tui.screens.logs import HANG, wrap_line

    frame = '  File "/usr/lib/python3/site-packages/vllm/v1/engine/core.py", line 700, in run_engine_core_loop'
    rows = wrap_line(frame, 40)
    assert len(rows) > 1 and rows[0].startswith("  File")
    assert all(r.startswith(" " * (2 + HANG)) and not r.startswith(" " * (3 + HANG)) for r in rows[1:])
    assert "".join(r.strip() for r in rows).replace(" ", "") == frame.replace(" ", "")
    assert wrap_line("short", 40) == ["short"]


def test_triage_step_5_reads_request_shape_across_thinned_history():
    # long-prompts: request shape is the root cause; the baseline window's edge scrapes have
    # their histograms thinned by the history, which left step 5 "missing"
    from tests.gameday import SteppedDemo
    from tui.core.diagnosis.triage import triage

    g = SteppedDemo(replicas=2, interval=10.0)
    st = g.run(400)
    r = triage(g.monitor.histories[st.replicas[0].name], st.ts)
    shape = r.item("shape")
    assert shape.status == "warn" and "prompt tokens" in shape.summary


def test_triage_step_5_finds_a_baseline_in_a_thinned_hour():
    # An hour of history at 1 s keeps one point in thirty past three minutes; the baselines there
    # must stay about one a minute, or a problem that began a few minutes after the history
    # did has no request-shape baseline (seen with one per five minutes: "missing").
    from tests.gameday import SteppedDemo
    from tui.core.diagnosis.triage import triage
    from tui.core.monitor import Monitor

    g = SteppedDemo(replicas=1, interval=1.0)
    g.monitor = Monitor(None, history_len=3600)
    st = g.run(900)
    h = g.monitor.histories[st.replicas[0].name]
    assert len(h.points) < 900  # the thinned tier is in use
    shape = triage(h, st.ts).item("shape")
    assert shape.status == "warn" and "prompt tokens" in shape.summary, shape.summary

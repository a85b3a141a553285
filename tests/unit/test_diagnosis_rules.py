"""Each verdict, its evidence, hysteresis, detection delay and the absence of look-ahead."""

from __future__ import annotations

import pytest

from tui.core.diagnosis import Thresholds, diagnose
from tui.core.monitor import Monitor

from .diagnosis_helpers import history_of, scrape, series

T = Thresholds()


def verdicts(scrapes, t: Thresholds = T) -> list[str]:
    """The verdict after each scrape, computed on the growing history (as live)."""
    h = history_of([])
    out = []
    for s in scrapes:
        h.add(s)
        out.append(diagnose(h, s.ts, t).verdict)
    return out


def last(scrapes, t: Thresholds = T):
    h = history_of(scrapes)
    return diagnose(h, scrapes[-1].ts, t)


def texts(f) -> str:
    return "\n".join(e.text for e in f.evidence)


# -- each verdict ---------------------------------------------------------------------------------


def test_unknown_until_two_scrapes_then_healthy():
    v = verdicts(series(3, cpu=lambda i: i * 1.0))
    assert v[0] == "unknown"
    assert v[1:] == ["healthy", "healthy"]


def test_kv_pressure_needs_kv_high_and_preemptions_with_evidence():
    f = last(series(4, kv=0.97, waiting=lambda i: 5.0 + i, wcap=lambda i: 5.0 + i,
                    preempt=lambda i: 3.0 * i, running=3.0, util=35.0, mem_pct=92.0))
    assert f.verdict == "kv-pressure"
    ev = {e.signal: e for e in f.evidence}
    assert ev["kv_usage"].crossed and ev["kv_usage"].value == pytest.approx(0.97)
    assert ev["preemptions_per_s"].crossed and ev["preemptions_per_s"].value == pytest.approx(0.6)
    assert ev["waiting_capacity"].crossed
    # GPU memory is listed, but it is context: the verdict is led by KV and preemptions
    assert f.evidence[0].signal == "kv_usage"
    assert "necessary, not decisive" in ev["gpu_memory_pct"].text
    assert "KV usage 0.97 >= 0.90" in texts(f)


def test_kv_high_alone_is_not_pressure():
    f = last(series(6, kv=0.95, running=30.0, waiting=0.0, preempt=0.0))
    assert f.verdict == "healthy"
    kv = next(e for e in f.evidence if e.signal == "kv_usage")
    assert kv.crossed  # compared and crossed, but nothing else corroborates


def test_capacity_queue_without_preemption_needs_persistence():
    # KV full and a capacity queue that persists three scrapes: pressure, without any preemption
    v = verdicts(series(6, kv=0.96, waiting=4.0, wcap=4.0, running=lambda i: 8.0 + i % 3))
    assert v[:2] == ["unknown", "healthy"]
    assert v[2:] == ["kv-pressure"] * 4


def test_waiting_but_not_for_capacity_is_not_kv_pressure():
    f = last(series(6, kv=0.96, waiting=4.0, wcap=0.0, wdef=4.0, running=2.0, gen=lambda i: 100.0 * i))
    assert f.verdict != "kv-pressure"


def test_gpu_memory_high_and_util_low_on_a_quiet_replica_is_healthy():
    # the naive runbook signature (memory > 85-90 %, util < 60 %) on a pre-allocated idle pool
    f = last(series(5, kv=0.05, running=1.0, util=10.0, mem_pct=93.0, cpu=lambda i: 0.1 * i))
    assert f.verdict == "healthy"


def test_compute_bound():
    f = last(series(5, kv=0.6, running=60.0, util=95.0, hists=None, cpu=lambda i: 2.5 * i))
    assert f.verdict == "compute-bound"
    assert f.evidence[0].signal == "gpu_util_pct" and f.evidence[0].crossed


def test_host_bound_from_cpu_near_one_core_while_gpu_idles():
    f = last(series(5, kv=0.1, running=2.0, waiting=3.0, util=15.0, cpu=lambda i: 4.9 * i))
    assert f.verdict == "host-bound"
    cpu = f.evidence[0]
    assert cpu.signal == "cpu_cores" and cpu.value == pytest.approx(0.98) and cpu.crossed


def test_host_bound_without_gpu_data_says_so():
    f = last(series(5, kv=0.1, running=2.0, util=None, gpu=False, cpu=lambda i: 4.9 * i))
    assert f.verdict == "host-bound"
    assert "gpu" in f.missing
    assert "GPU data absent" in texts(f)


def test_node_fault_overrides_kv_pressure_and_benign_throttle_does_not():
    pressure = dict(kv=0.99, waiting=lambda i: 5.0 + i, preempt=lambda i: 3.0 * i, running=3.0)
    f = last(series(4, throttle=("hw_thermal_slowdown",), **pressure))
    assert f.verdict == "node-fault"
    assert "hw_thermal_slowdown" in texts(f)
    f = last(series(4, throttle=("sw_power_cap",), **pressure))
    assert f.verdict == "kv-pressure"


@pytest.mark.parametrize("kw,word", [({"ecc": 2.0}, "ECC"), ({"xid": 79.0}, "XID")])
def test_node_fault_from_ecc_and_xid(kw, word):
    f = last(series(3, **kw))
    assert f.verdict == "node-fault"
    assert word in texts(f)


def test_down_after_the_stale_window_with_since():
    ok = series(3)
    bad = [scrape(1015.0 + 5 * i, error="connection refused") for i in range(5)]
    h = history_of(ok + bad)
    f = diagnose(h, bad[-1].ts, T)
    assert f.verdict == "down" and f.since == bad[0].ts
    assert "connection refused" in f.summary
    # before the stale window the replica keeps its last verdict (stale, not down)
    h2 = history_of(ok + bad[:2])
    assert diagnose(h2, bad[1].ts, T).verdict == "healthy"


def test_back_after_an_outage_the_verdict_starts_afresh():
    mon = Monitor()
    pressure = series(6, kv=0.97, preempt=lambda i: 3.0 * i, waiting=5.0, running=3.0)
    outage = [scrape(1030.0 + 5 * i, error="connection refused") for i in range(6)]
    back = series(4, t0=1060.0, kv=0.3, preempt=lambda i: float(i), running=10.0)  # restarted: counters reset
    seen = [(s.ts, mon.ingest([s]).replicas[0].finding) for s in pressure + outage + back]
    assert seen[5][1].verdict == "kv-pressure"
    assert seen[11][1].verdict == "down" and seen[11][1].since == 1030.0
    assert seen[12][1].verdict == "unknown"
    assert not [f.summary for _, f in seen if "diagnosis failed" in f.summary]
    f = seen[-1][1]
    assert f.verdict == "healthy" and f.since >= 1060.0


def test_stalled_when_tokens_stop_with_requests_in_flight():
    # counters stop after scrape 3: scrape 4 is the first with an interval of no progress (onset)
    frozen = lambda i: 100.0 * min(i, 3)  # noqa: E731
    v = verdicts(series(8, running=lambda i: 12.0 + i % 3, waiting=5.0, gen=frozen, prompt=frozen, kv=0.6,
                        util=100.0))
    assert v[2:5] == ["compute-bound"] * 3  # busy GPU, tokens flowing; then one quiet interval
    assert v[5:] == ["stalled"] * 3  # one interval after onset, even at 100 % util


def test_idle_replica_without_progress_is_not_stalled():
    f = last(series(6, running=0.0, waiting=0.0, kv=0.0, gen=5.0, prompt=5.0, util=0.0))
    assert f.verdict == "healthy"


def test_stalled_when_waiting_is_dominated_by_deferred():
    frozen_ = lambda i: 100.0 * min(i, 1)  # noqa: E731
    f = last(series(5, running=2.0, waiting=12.0, wcap=0.0, wdef=12.0, kv=0.2, gen=frozen_, prompt=frozen_))
    assert f.verdict == "stalled"
    assert "deferred" in texts(f)


def test_a_deferred_queue_beside_advancing_generation_is_no_stall():
    # vLLM's "deferred" includes requests waiting on the LoRA budget: a stall needs generation
    # that does not advance
    f = last(series(5, running=2.0, waiting=12.0, wcap=0.0, wdef=12.0, kv=0.2))
    assert f.verdict != "stalled"
    lora = (4, ("a0", "a1", "a2", "a3"), ("a4", "a5"))
    f = last(series(5, running=16.0, waiting=31.0, wcap=3.0, wdef=28.0, kv=0.25, lora=lora))
    assert f.verdict == "lora-capped"
    assert "LoRA adapter slots 4/4 busy (a0, a1, a2, a3), waiting for a slot: a4, a5" in texts(f)
    assert "restart it" not in f.summary and "do not restart" in f.summary


def test_concurrency_capped_running_pinned_queue_growing_kv_headroom():
    f = last(series(6, running=64.0, waiting=lambda i: 3.0 * i, wcap=lambda i: 3.0 * i, kv=0.5, util=70.0))
    assert f.verdict == "concurrency-capped"
    assert "pinned" in texts(f)
    f = last(series(4, running=64.0, waiting=lambda i: 3.0 * (i + 1), kv=0.5, cache={"max_num_seqs": "64"}))
    assert f.verdict == "concurrency-capped"
    assert "max-num-seqs 64" in texts(f)


def test_concurrency_capped_never_becomes_kv_pressure_with_kv_headroom():
    v = verdicts(series(20, running=128.0, waiting=lambda i: 2.0 * i, wcap=lambda i: 2.0 * i, kv=0.7))
    assert "kv-pressure" not in v and v[-1] == "concurrency-capped"


def test_v0_swapped_requests_count_as_preemption():
    f = last(series(3, kv=0.98, swapped=3.0, running=4.0))
    assert f.verdict == "kv-pressure"
    assert any(e.signal == "swapped" and e.crossed for e in f.evidence)


# -- hysteresis and timing -----------------------------------------------------------------------


def test_detection_within_two_intervals_of_onset():
    onset = 6

    def pre(i):
        return 0.0 if i < onset else 2.0 * (i - onset + 1)

    v = verdicts(series(14, kv=lambda i: 0.5 if i < onset else 0.97, preempt=pre,
                        waiting=lambda i: 0.0 if i < onset else 6.0, running=lambda i: 20.0 if i < onset else 4.0))
    first = v.index("kv-pressure")
    assert onset <= first <= onset + 2


def test_no_flicker_on_a_borderline_replica():
    # KV wobbling around the threshold with preemptions every other interval: one verdict
    kv = lambda i: 0.95 if i % 2 else 0.88  # noqa: E731
    pre = lambda i: 2.0 * ((i + 1) // 2)  # noqa: E731  (preemptions in the odd intervals)
    v = verdicts(series(20, kv=kv, preempt=pre, waiting=lambda i: 2.0 if i % 3 else 0.0, running=6.0))
    after = v[v.index("kv-pressure"):]
    assert after == ["kv-pressure"] * len(after)


def test_single_scrape_blip_does_not_change_the_verdict():
    util = lambda i: 95.0 if i == 5 else 50.0  # noqa: E731
    v = verdicts(series(10, util=util, running=40.0))
    assert v[1:] == ["healthy"] * 9


def test_recovery_leaves_kv_pressure_only_when_preemptions_stop():
    n_on = 8

    def pre(i):
        return 3.0 * min(i, n_on)

    v = verdicts(series(18, kv=lambda i: 0.97 if i < n_on else 0.80, preempt=pre,
                        waiting=lambda i: 5.0 if i < n_on else 0.0, running=4.0))
    assert v[n_on - 1] == "kv-pressure"
    assert v[-1] == "healthy"
    back = v.index("healthy", n_on)
    assert back <= n_on + 3


def test_since_is_kept_by_the_monitor_while_the_verdict_holds():
    mon = Monitor()
    onset = 4
    scr = series(10, kv=lambda i: 0.5 if i < onset else 0.97,
                 preempt=lambda i: 0.0 if i < onset else 3.0 * (i - onset + 1), waiting=lambda i: 4.0 * (i >= onset))
    sinces = []
    for s in scr:
        st = mon.ingest([s])
        sinces.append((st.replicas[0].verdict, st.replicas[0].finding.since))
    kv = [since for v, since in sinces if v == "kv-pressure"]
    assert kv and len(set(kv)) == 1 and kv[0] == scr[onset].ts


def test_the_monitor_reports_the_since_of_the_histories_state():
    # compute-bound, then (between two refreshes, e.g. a back-fill) healthy and compute-bound
    # again: the verdict is the same at both refreshes, but it was re-entered in between
    mon = Monitor()
    first = series(4, util=95.0, running=40.0)
    assert mon.ingest(first).replicas[0].verdict == "compute-bound"
    util = lambda i: 50.0 if i < 4 else 95.0  # noqa: E731
    later = series(8, t0=first[-1].ts + 5.0, util=util, running=40.0)
    f = mon.ingest(later).replicas[0].finding
    assert f.verdict == "compute-bound"
    # utilisation is judged over `pinned_points` scrapes (their median): re-entered at the second busy one
    assert f.since == diagnose(mon.histories["r0"], later[-1].ts, T).since == later[5].ts


# -- no look-ahead --------------------------------------------------------------------------------


def test_verdict_at_t_is_identical_when_later_scrapes_are_appended():
    scr = series(30, kv=lambda i: 0.5 if i < 10 else 0.97, preempt=lambda i: max(0, i - 10) * 2.0,
                 waiting=lambda i: 0.0 if i < 10 else 5.0, util=lambda i: 95.0 if 20 <= i < 25 else 50.0,
                 running=lambda i: 40.0 if i >= 20 else 8.0)
    full = history_of(scr)
    live = verdicts(scr)
    for cut in (5, 11, 12, 21, 29):
        prefix = history_of(scr[: cut + 1])
        f_prefix = diagnose(prefix, scr[cut].ts, T)
        f_full_asked_then = diagnose(full, scr[cut].ts, T)  # same history, asked about the past
        assert f_prefix.verdict == live[cut] == f_full_asked_then.verdict
        assert f_prefix.since == f_full_asked_then.since


def test_counter_reset_is_not_a_preemption_spike_nor_a_stall():
    # the server restarts: counters drop to small values and carry on
    pre = lambda i: 500.0 + i if i < 5 else float(i - 5)  # noqa: E731
    gen = lambda i: 1e6 + 100.0 * i if i < 5 else 100.0 * (i - 4)  # noqa: E731
    v = verdicts(series(10, kv=0.5, preempt=pre, gen=gen, prompt=gen, running=10.0))
    assert v[1:] == ["healthy"] * 9


def test_thresholds_are_configurable_and_validated():
    t = T.with_overrides(kv_high=0.8, kv_clear=0.75)
    f = last(series(4, kv=0.85, waiting=lambda i: 5.0, preempt=lambda i: 3.0 * i), t)
    assert f.verdict == "kv-pressure"
    assert last(series(4, kv=0.85, waiting=lambda i: 5.0, preempt=lambda i: 3.0 * i)).verdict != "kv-pressure"
    with pytest.raises(ValueError, match="unknown threshold"):
        T.with_overrides(kv_hihg=0.8)
    with pytest.raises(ValueError, match="expected int"):
        T.with_overrides(min_points=2.5)
    assert T.with_overrides(benign_throttle="gpu_idle, sw_power_cap").benign_throttle == ("gpu_idle", "sw_power_cap")


def test_slow_scrape_intervals_are_not_outages():
    # a Prometheus source with 15 s scrapes: every gap is as long as the stale window
    v = verdicts(series(8, interval=15.0, kv=0.97, preempt=lambda i: 5.0 * i, waiting=6.0, running=3.0))
    assert v[1:] == ["kv-pressure"] * 7


def test_a_repeated_sample_changes_nothing():
    scr = series(5, kv=0.97, preempt=lambda i: 3.0 * i, waiting=5.0, running=3.0)
    v = verdicts(scr[:4] + [scr[3]] + scr[4:])
    assert v[1:] == ["kv-pressure"] * 5


def test_the_verdict_state_travels_with_the_history():
    import copy

    from tui.core.diagnosis import export_state, import_state
    from tui.core.history import ReplicaHistory

    # compute-bound, then util 75 %: it stays (left only below 70 %), which only the state
    # machine remembers once the short history has dropped the 95 % scrapes
    scr = series(12, util=lambda i: 95.0 if i < 4 else 75.0, running=40.0)
    h = ReplicaHistory("r0", maxlen=4)
    for i, s in enumerate(scr[:9]):
        h.add(s)
        assert diagnose(h, s.ts, T).verdict == ("unknown" if i == 0 else "compute-bound")
    assert h.diagnosis is not None  # the history holds its own state, no cache beside it
    copied, plain, restored = copy.deepcopy(h), copy.deepcopy(h), copy.deepcopy(h)
    plain.diagnosis = restored.diagnosis = None
    import_state(restored, export_state(h))
    assert diagnose(plain, scr[8].ts, T).verdict == "healthy"  # recomputed from 4 scrapes of 75 %
    for s in scr[9:]:
        for x in (h, copied, restored):
            x.add(s)
        assert diagnose(copied, s.ts, T) == diagnose(restored, s.ts, T) == diagnose(h, s.ts, T)
        assert diagnose(h, s.ts, T).verdict == "compute-bound"


def test_a_state_carried_to_another_history_is_not_confused_with_its_own():
    old = history_of(series(5, t0=5000.0, util=95.0, running=40.0))
    diagnose(old, 5020.0, T)
    new = history_of([])
    new.diagnosis = old.diagnosis  # e.g. a history rebuilt from another recording
    out = []
    for s in series(4, t0=1000.0, util=50.0, running=40.0):
        new.add(s)
        out.append(diagnose(new, s.ts, T).verdict)
    assert out == ["unknown", "healthy", "healthy", "healthy"]
    assert new.diagnosis.last_point is new.points[-1]  # the state now follows `new`
    assert old.diagnosis.last_point is old.points[-1]  # and `old` keeps its own


def test_diagnosing_leaves_no_state_in_the_rules_module():
    from collections.abc import MutableMapping, MutableSequence, MutableSet

    from tui.core.diagnosis import rules

    def containers():
        return {k: len(v) for k, v in vars(rules).items()
                if isinstance(v, (MutableMapping, MutableSequence, MutableSet))}

    before = containers()
    h = history_of(series(5, util=95.0, running=40.0))
    assert diagnose(h, h.points[-1][0], T).verdict == "compute-bound"
    assert containers() == before  # the state went to the history, not to a module-level cache


# -- a queue that persists (issue 11 item 4) --------------------------------------------------------


def test_a_persistent_queue_is_never_healthy():
    # running not pinned at any cap, KV with room, no preemption: still a queue that persists
    v = verdicts(series(12, running=lambda i: 20.0 + (i % 4) * 3, waiting=lambda i: 5.0 + i, kv=0.5))
    assert "healthy" not in v[4:] and v[-1] == "overloaded"


def test_a_queue_at_the_cap_without_kv_room_is_overloaded_not_capped():
    f = last(series(8, running=32.0, waiting=lambda i: 10.0 * (i + 1), kv=0.85, cache={"max_num_seqs": "32"}))
    assert f.verdict == "overloaded"
    assert "scale out" in f.summary


def test_kv_near_the_ceiling_while_the_cap_holds_admission_is_not_kv_pressure():
    # the cut cap holds admission (running pinned at 32), nothing preempted: KV at 0.91 does not
    # make it thrash; flapping kv-pressure <-> capped around 0.90 was the game day's complaint
    kv = lambda i: 0.91 if i % 3 == 0 else 0.84  # noqa: E731
    v = verdicts(series(20, running=32.0, waiting=lambda i: 100.0 + i, kv=kv, cache={"max_num_seqs": "32"}))
    assert "kv-pressure" not in v and set(v[3:]) == {"overloaded"}


def test_a_drained_queue_leaves_overloaded_after_the_sustain():
    w = lambda i: 50.0 if i < 10 else 0.0  # noqa: E731
    v = verdicts(series(16, running=lambda i: 32.0 if i < 10 else 12.0, waiting=w, kv=0.85,
                        cache={"max_num_seqs": "32"}))
    assert v[9] == "overloaded" and v[10] == "overloaded" and v[-1] == "healthy"


# -- starting pods (issue 11 item 5) -----------------------------------------------------------------


def _pod(ready=False, phase="Running", restarts=0, reason=None):
    from tui.core.model import PodInfo
    return PodInfo("ns", "r0", node="gpu-node-3", phase=phase, ready=ready, restarts=restarts,
                   last_termination_reason=reason)


def test_a_new_pod_answering_503_while_loading_is_starting_not_down():
    scr = [scrape(1000.0 + 10 * i, error="HTTP 503", pod=_pod()) for i in range(5)]
    f = last(scr)
    assert f.verdict == "starting"
    assert "40 s" in f.summary and "not ready" in f.summary and f.since == 1000.0


def test_a_crashed_or_long_unready_pod_is_down_not_starting():
    crashed = [scrape(1000.0 + 10 * i, error="HTTP 503", pod=_pod(phase="CrashLoopBackOff", restarts=2,
                                                                   reason="Error")) for i in range(5)]
    assert last(crashed).verdict == "down"
    forever = [scrape(1000.0 + 60 * i, error="HTTP 503", pod=_pod()) for i in range(20)]
    f = last(forever)
    assert f.verdict == "down" and "not ready after" in f.summary
    # a pod that served and then fails is down: it is no longer loading
    served = series(3) + [scrape(1015.0 + 5 * i, error="HTTP 503", pod=_pod()) for i in range(5)]
    assert last(served).verdict == "down"


def test_a_persistent_queue_outranks_a_few_busy_utilisation_samples():
    # a steady overload (queue held, KV 0.85, nothing preempted) whose GPU averages ~73% with two
    # samples in a row at 80%+: overloaded throughout, never compute-bound
    util = lambda i: 84.0 if i in (8, 9) else (73.0 + (i % 3))  # noqa: E731
    got = verdicts(series(20, running=256.0, waiting=lambda i: 64.0 + i, kv=0.85, util=util,
                          cache={"max_num_seqs": "256"}))
    assert "compute-bound" not in got and got[-1] == "overloaded", got
    # a saturated GPU over the window is still compute-bound's case, queue or not
    got = verdicts(series(12, running=64.0, waiting=0.0, kv=0.6, util=96.0))
    assert got[-1] == "compute-bound"


def test_a_quiet_stretch_at_a_full_pool_holds_kv_pressure_until_the_hold_ends():
    """A burst of preemptions, then scrapes without preemption or queue while KV stays at the
    ceiling: the pool is still what binds (the next burst comes when the batch grows again), so
    the verdict holds for `kv_hold_s`, never flipping to healthy scrapes after being judged."""
    pre = [0, 3, 6, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9]
    s = series(len(pre), interval=5.0, kv=0.97, running=40.0, waiting=0.0, preempt=lambda i: float(pre[i]))
    v = verdicts(s)
    first = v.index("kv-pressure")
    last_pre = s[3].ts  # the last scrape whose counter rose
    for sc, verdict in zip(s[first:], v[first:], strict=True):
        if sc.ts - last_pre < T.kv_hold_s:
            assert verdict == "kv-pressure", (sc.ts - last_pre, v)
    assert v[-1] == "healthy"  # 80 s quiet at a full pool: the look-alike of a pre-allocated pool
    f = last(s[:10])
    assert f.verdict == "kv-pressure"
    assert any("kv-pressure is left after" in e.text for e in f.evidence)


def test_kv_pressure_still_leaves_at_once_below_kv_clear():
    pre = [0, 3, 6, 9, 9, 9, 9]
    kv = [0.97, 0.97, 0.97, 0.97, 0.6, 0.6, 0.6]
    v = verdicts(series(len(pre), interval=5.0, kv=lambda i: kv[i], running=40.0,
                        preempt=lambda i: float(pre[i])))
    assert "kv-pressure" in v and v[-1] != "kv-pressure"


def test_a_trouble_verdict_never_steps_down_to_healthy_while_requests_wait():
    """An invariant (the state machine's guard): after a cap stops the preemptions, KV leaves the
    ceiling while requests still wait; the replica goes from kv-pressure to the queue verdict that
    explains it, never through healthy."""
    n = 14
    pre = [3.0 * min(i, 5) for i in range(n)]
    kv = [0.97] * 5 + [0.6] * (n - 5)
    waiting = [6.0] * 5 + [2.0 + i for i in range(n - 5)]
    v = verdicts(series(n, kv=lambda i: kv[i], preempt=lambda i: pre[i], waiting=lambda i: waiting[i],
                        running=lambda i: 40.0 if i < 5 else 16.0, cache={"max_num_seqs": "16"}))
    first = v.index("kv-pressure")
    assert "healthy" not in v[first:], v

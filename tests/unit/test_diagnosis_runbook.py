"""Guided runbook branches, verification and the triage report."""

from __future__ import annotations

import pytest

from tui.core.diagnosis import Thresholds
from tui.core.diagnosis.capacity import plan
from tui.core.diagnosis.runbook import Rollout, arg_changes, runbook
from tui.core.diagnosis.triage import triage
from tui.core.model import PodInfo

from .diagnosis_helpers import LAT_B, TOK_B, hist, history_of, scrape, series

T = Thresholds()
ONSET = 20  # scrape index where pressure starts (5 s apart from t=1000)
T_ON = 1000.0 + 5 * ONSET


def pressure_history(n=40, throttle=(), pod=None, cache=None, recover_at=None):
    def pressured(i):
        return i >= ONSET and (recover_at is None or i < recover_at)

    pre = [0.0]
    for i in range(1, n):
        pre.append(pre[-1] + (3.0 if pressured(i) else 0.0))
    return history_of(series(
        n, kv=lambda i: 0.97 if pressured(i) else 0.5, preempt=lambda i: pre[i],
        waiting=lambda i: 6.0 if pressured(i) else 0.0, running=lambda i: 3.0 if pressured(i) else 20.0,
        throttle=throttle, pod=pod, cache=cache or {"gpu_memory_utilization": "0.9"},
        util=lambda i: 35.0 if pressured(i) else 55.0))


def test_node_fault_diverts_and_discourages_tuning():
    h = pressure_history(throttle=("hw_thermal_slowdown",))
    rb = runbook(h, h.scrapes[-1].ts, T, rollouts=[])
    assert rb.finding.verdict == "node-fault"
    assert rb.branch == "divert" and rb.current == "node" and rb.tuning_discouraged
    node = rb.step("node")
    assert node.status == "no" and node.action == "drain" and "hw_thermal_slowdown" in node.evidence[0].text
    assert rb.step("cap").discouraged and rb.step("headroom").discouraged
    assert not rb.step("drain").discouraged


def test_oom_crashing_lowers_gpu_memory_utilization():
    pod = PodInfo("inference", "vllm-0", restarts=3, last_termination_reason="OOMKilled", last_exit_code=137)
    h = pressure_history(pod=pod)
    rb = runbook(h, h.scrapes[-1].ts, T, rollouts=[])
    assert rb.branch == "oom" and rb.current == "oom"
    oom = rb.step("oom")
    assert oom.status == "yes" and oom.action == "edit:gpu_memory_utilization"
    assert oom.suggest == {"gpu-memory-utilization": "0.7"}
    # CUDA OOM in the logs alone is enough
    h2 = pressure_history()
    rb2 = runbook(h2, h2.scrapes[-1].ts, T, rollouts=[], logs=["INFO ok", "torch.OutOfMemoryError: CUDA out of memory."])
    assert rb2.branch == "oom" and "CUDA out of memory" in rb2.step("oom").details[0]


def test_deploy_in_burn_window_offers_rollback_with_the_diff():
    h = pressure_history()
    now = h.scrapes[-1].ts
    bad = Rollout(T_ON - 600, "7", {"max-num-seqs": 128, "max-model-len": 8192},
                  {"max-num-seqs": 256, "max-model-len": 8192}, "inference/vllm")
    rb = runbook(h, now, T, rollouts=[bad])
    assert rb.branch == "rollback" and rb.current == "deploy"
    st = rb.step("deploy")
    assert st.status == "yes" and st.action == "rollback"
    assert any("--max-num-seqs: 128 -> 256" in line for line in st.details)
    # the same rollout two hours earlier is outside the burn window
    old = Rollout(T_ON - 7200, "7", bad.before, bad.after)
    assert runbook(h, now, T, rollouts=[old]).step("deploy").status == "no"
    # a rollout that lowered the cap is not a suspect
    safe = Rollout(T_ON - 600, "8", {"max-num-seqs": 256}, {"max-num-seqs": 128})
    assert runbook(h, now, T, rollouts=[safe]).step("deploy").status == "no"
    assert runbook(h, now, T, rollouts=None).step("deploy").status == "unknown"


def test_arg_changes_marks_the_runbook_causes():
    ch = {c.flag: c for c in arg_changes({"kv-cache-dtype": "fp8", "max-model-len": 8192, "block-size": 16},
                                         {"kv-cache-dtype": "auto", "max-model-len": 32768, "block-size": 16})}
    assert ch["kv-cache-dtype"].risky and ch["max-model-len"].risky and "block-size" not in ch


def test_mitigation_walks_drain_cap_headroom_scale():
    h = pressure_history(n=40, cache={"gpu_memory_utilization": "0.9", "num_gpu_blocks": "5691", "block_size": "16"})
    now = h.scrapes[-1].ts
    cap = plan(cache_config={"num_gpu_blocks": "5691", "block_size": "16"}, p95_prompt=2000, p95_output=400)
    args = {"max-num-seqs": 256}
    rb = runbook(h, now, T, rollouts=[], capacity=cap, args=args)
    assert rb.branch == "mitigate" and rb.current == "drain"
    rb = runbook(h, now, T, rollouts=[], capacity=cap, args=args, applied={"drain": T_ON + 10})
    assert rb.current == "cap"
    capstep = rb.step("cap")
    assert capstep.action == "edit:max_num_seqs" and capstep.suggest == {"max-num-seqs": "34"}
    assert any("max-num-seqs that fits" in line for line in capstep.details)
    # capped just now: give it the settle window before asking for more
    rb = runbook(h, now, T, rollouts=[], applied={"drain": T_ON, "edit:max_num_seqs": now - 10})
    assert rb.step("headroom").status == "wait" and rb.current == "verify"
    rb = runbook(h, now + 200, T, rollouts=[], applied={"drain": T_ON, "edit:max_num_seqs": now - 10},
                 finding=rb.finding)
    assert rb.current == "headroom"
    # 0.9 is above the policy ceiling (0.7, prevention.md): prefix cache / chunked prefill, no raise
    head = rb.step("headroom")
    assert "gpu-memory-utilization" not in head.suggest and "policy ceiling 0.7" in head.answer
    assert head.suggest["enable-prefix-caching"] == "true"
    rb = runbook(h, now + 400, T, rollouts=[], finding=rb.finding,
                 applied={"drain": T_ON, "edit:max_num_seqs": now - 10, "edit:gpu_memory_utilization": now + 200})
    assert rb.current == "scale" and rb.step("scale").action == "scale"


def test_recovery_confirmed_after_the_window():
    n = 80
    h = pressure_history(n=n, recover_at=40)  # pressure from scrape 20 to 39, then clean
    last_breach = 1000.0 + 5 * 39
    # just after: criteria met now, not yet held for the window
    at = last_breach + 60
    h_short = history_of([s for s in h.scrapes if s.ts <= at])
    rb = runbook(h_short, at, T, rollouts=[], applied={"edit:max_num_seqs": T_ON + 30})
    v = rb.verification
    assert v.met and not v.confirmed and rb.current == "verify"
    rb = runbook(h, h.scrapes[-1].ts, T, rollouts=[], applied={"edit:max_num_seqs": T_ON + 30})
    v = rb.verification
    assert v.confirmed and v.confirmed_at == pytest.approx(last_breach + T.recovery_window_s)
    assert rb.step("verify").status == "met"
    assert "recovery confirmed" in v.text


def test_not_recovered_names_the_failing_criteria():
    h = pressure_history(n=40)
    v = runbook(h, h.scrapes[-1].ts, T, rollouts=[]).verification
    assert not v.met and not v.confirmed
    assert "preemptions" in v.text and "KV usage" in v.text


# -- triage ------------------------------------------------------------------------------------


def shaped_history():
    """Short prompts for 5 minutes, then long ones under pressure."""
    out = []
    short = [500.0] * 20
    long = [8000.0] * 20
    prompts, maxt, ttft = [], [], []
    for i in range(90):
        shifted = i >= 60
        prompts += long if shifted else short
        maxt += [2000.0] * 20 if shifted else [200.0] * 20
        ttft += [3.0] * 20 if shifted else [0.2] * 20
        out.append(scrape(1000.0 + 5 * i, kv=0.97 if shifted else 0.4, running=2.0 if shifted else 20.0,
                          waiting=8.0 if shifted else 0.0, preempt=0.0 if not shifted else 3.0 * (i - 59),
                          util=30.0 if shifted else 60.0, mem_pct=92.0,
                          pod=PodInfo("inference", "vllm-0", restarts=1),
                          hists={"prompt_len": hist(TOK_B, prompts), "max_tokens": hist(TOK_B, maxt),
                                 "ttft": hist(LAT_B, ttft)}))
    return history_of(out)


def test_triage_steps_with_evidence_and_missing():
    h = shaped_history()
    now = h.scrapes[-1].ts
    events = [{"type": "Warning", "reason": "Evicted", "object": "Pod/other", "message": "The node was low on resource: memory."},
              {"type": "Normal", "reason": "Pulled", "message": "image pulled"}]
    logs = ["INFO: Sequence group 12 is preempted by PreemptionMode.RECOMPUTE mode",
            "INFO: GPU KV cache size: 91,056 tokens", "\x1b[31mWARNING\x1b[0m other"]
    r = triage(h, now, T, logs=logs, events=events)
    assert r.verdict == "kv-pressure"
    assert r.item("restarts").status == "warn"
    gpu = r.item("gpu")
    assert gpu.status == "warn" and "necessary, never decisive" in gpu.evidence[0].text
    lg = r.item("logs")
    assert lg.status == "warn" and any("preempted" in d for d in lg.details)
    assert all("\x1b" not in d for d in lg.details)
    shape = r.item("shape")
    assert shape.status == "warn" and "prompt tokens" in shape.summary
    ratio = next(e for e in shape.evidence if e.signal == "prompt_len_p95_ratio")
    assert ratio.crossed and ratio.value > 5
    ev = r.item("events")
    assert ev.status == "warn" and "eviction" in ev.summary
    b = r.item("batch")
    assert b.status == "bad" and "collapsed" in b.summary
    assert any(e.signal == "ttft_p95_ratio" and e.crossed for e in b.evidence)
    assert r.stage.startswith("early")
    assert r.as_dict()["items"][0]["step"] == 2


def test_triage_oom_and_what_is_missing():
    pod = PodInfo("inference", "vllm-0", restarts=4, last_termination_reason="OOMKilled", last_exit_code=137)
    h = history_of(series(4, pod=pod, gpu=False))
    r = triage(h, h.scrapes[-1].ts, T)  # no logs, no events fetched
    assert r.item("restarts").status == "bad" and "137" in r.item("restarts").summary
    assert r.stage.startswith("end-stage")
    assert r.item("logs").status == "missing" and r.item("events").status == "missing"
    assert r.item("gpu").status == "missing"
    assert any("GPU data absent" in m for m in r.missing)
    assert any("logs not fetched" in m for m in r.missing)
    assert any("baseline" in m for m in r.missing)


# -- the queue after the cap, the node fault (issue 11 items 4, 8) ---------------------------------


def overloaded_history(n=30, name="r0", completed_per_s=0.75, arrivals_per_s=1.25):
    """Cap 32 holding admission, KV with no room, nothing preempted, the queue growing."""
    return history_of(series(
        n, kv=0.85, running=32.0, waiting=lambda i: 10.0 + (arrivals_per_s - completed_per_s) * 5 * i,
        cache={"max_num_seqs": "32"}, hists=None), name)


def _with_done(h, per_s):
    from dataclasses import replace as _r
    out = []
    for s in h.scrapes:
        eng = s.sample.engines["0"]
        vals = {**eng.values, "requests_success": (s.ts - 1000.0) * per_s}
        out.append(_r(s, sample=_r(s.sample, engines={"0": _r(eng, values=vals)})))
    return history_of(out, h.name)


def test_overloaded_after_the_cap_names_scale_out_with_the_arithmetic():
    from tui.core.diagnosis.scaleout import scale_out

    hs = [_with_done(overloaded_history(name=f"r{i}"), 0.75) for i in range(4)]
    now = hs[0].scrapes[-1].ts
    so = scale_out([(h, "overloaded") for h in hs], now, T)
    # 4 x (0.75 done + 0.5 growing) = 5.0 arrivals; x1.1 + backlog/600 over 0.75 each
    backlog = 4 * (10.0 + 0.5 * 5 * 29)
    want = -(-(5.0 * 1.1 + backlog / 600) // 0.75)
    assert so.replicas == want and so.replicas_now == 4 and abs(so.arrivals_per_s - 5.0) < 1e-6
    assert any("req/s" in line for line in so.lines) and f"-> {so.replicas} replicas" in so.lines[-1]
    rb = runbook(hs[0], now, T, rollouts=[], applied={"edit:max_num_seqs": now - 600}, scale=so)
    assert rb.finding.verdict == "overloaded"
    assert rb.branch == "scale" and rb.current == "scale"
    step = rb.step("scale")
    assert step.status == "todo" and "no room to raise" in step.answer
    assert step.suggest == {"replicas": str(so.replicas)} and step.details == so.lines
    # never the opposite remedy in the same view
    assert rb.step("cap").status != "todo"


def test_node_fault_runbook_never_says_steady_preemption_and_names_the_node():
    pod = PodInfo("inference", "vllm-0", node="gpu-node-7")
    h = pressure_history(throttle=("hw_thermal_slowdown",), pod=pod)
    rb = runbook(h, h.scrapes[-1].ts, T, rollouts=[])
    words = " ".join(s.answer for s in rb.steps)
    assert "steady preemption" not in words
    assert rb.node == "gpu-node-7" and "gpu-node-7" in rb.step("node").answer


def test_scale_out_counts_requests_clients_gave_up_on_as_demand_not_as_capacity():
    """Aborted requests (clients gave up in the queue) finish in vllm:request_success_total
    too; counted as completions they made one replica look able to serve twice what it does."""
    from dataclasses import replace as _r

    from tui.core.diagnosis.scaleout import scale_out

    def with_counts(h, done_per_s, aborted_per_s):
        out = []
        for s in h.scrapes:
            eng = s.sample.engines["0"]
            k = s.ts - 1000.0
            vals = {**eng.values, "requests_success": k * (done_per_s + aborted_per_s),
                    "requests_aborted": k * aborted_per_s}
            out.append(_r(s, sample=_r(s.sample, engines={"0": _r(eng, values=vals)})))
        return history_of(out, h.name)

    hs = [with_counts(overloaded_history(name=f"r{i}", arrivals_per_s=1.25, completed_per_s=1.25), 0.7, 0.55)
          for i in range(4)]
    now = hs[0].scrapes[-1].ts
    so = scale_out([(h, "overloaded") for h in hs], now, T)
    assert abs(so.per_replica_per_s - 0.7) < 1e-6  # served, not served + abandoned
    assert abs(so.arrivals_per_s - 4 * 1.25) < 1e-6  # the abandoned ones arrived all the same
    assert any("gave up" in line for line in so.lines)

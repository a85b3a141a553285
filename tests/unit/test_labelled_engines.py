"""The labelled traces of tests/unit/data/labelled/ (pages as vLLM and SGLang write them, see
tests/labelled.py), diagnosed from the files as `kvwatch diagnose` does, and one real page."""

from __future__ import annotations

import functools
import os

import pytest

from tests.labelled import DATA, paths, precision_recall, score_file
from tui.core.offline import replay
from tui.core.record import record_to_scrape

HERE = os.path.dirname(os.path.abspath(__file__))
METAL = os.path.join(HERE, "data", "vllm-metal-v1-issue-479-elided.prom")  # from shared/reference/samples


@functools.lru_cache(maxsize=None)
def scores(name: str):
    return {s.name.split(":", 1)[1]: s for s in score_file(os.path.join(DATA, name + ".jsonl.gz"))}


def in_phase(sc, label):
    return [v for _, v, lab in sc.points if lab == label]


def evidence_text(sc) -> str:
    return "\n".join(e.text for e in sc.finding.evidence) + "\n" + sc.finding.summary


def test_livelock_page_is_a_stall_never_no_room():
    """A queue that nothing runs, KV empty (a real vLLM page): a stall with its reason, never
    `overloaded` with "KV has no room"."""
    page = open(METAL).read()
    res = replay([record_to_scrape({"ts": 1000.0 + 5 * i, "replica": "r0", "metrics": page}) for i in range(8)])
    r = res.replicas["r0"]
    assert r.verdict == "stalled", (r.verdict, r.summary)
    text = "\n".join(e.text for e in r.evidence)
    assert "nothing running" in text and "not held by KV" in text
    assert "no room" not in r.summary


def test_livelock_trace_holds_the_stall():
    sc = scores("vllm-livelock-empty-kv")["live-0"]
    got = in_phase(sc, "stalled")
    assert got.count("stalled") >= len(got) - 2 and "overloaded" not in got


def test_lora_starvation_is_lora_capped_never_stalled():
    sc = scores("vllm-lora-starved")["lora-0"]
    got = in_phase(sc, "lora-capped")
    assert "stalled" not in got
    assert got.count("lora-capped") >= len(got) - 2
    assert sc.stalled_while_advancing == 0


def test_lora_capped_evidence_names_the_adapters_and_no_restart():
    from tui.core.offline import diagnose_file

    res = diagnose_file(os.path.join(DATA, "vllm-lora-starved.jsonl.gz"), keep_points=True)
    # the finding in the middle of the capped phase: replay up to it
    sc = scores("vllm-lora-starved")["lora-0"]
    mid = [ts for ts, v, lab in sc.points if lab == "lora-capped"][30]
    from tui.core.record import read_log

    r = replay([s for s in read_log(os.path.join(DATA, "vllm-lora-starved.jsonl.gz")) if s.ts <= mid]).replicas["lora-0"]
    assert r.verdict == "lora-capped"
    text = "\n".join(e.text for e in r.evidence)
    assert "adapter-0" in text and "adapter-9" in text and "4/4" in text
    assert "--max-loras" in r.summary and "restart it" not in r.summary
    assert res.replicas["lora-0"].verdict == "healthy"


def test_dp_pod_judged_per_rank():
    hot = scores("sglang-dp-one-rank-full")["sgl-dp-hot"]
    got = in_phase(hot, "kv-pressure")
    assert got.count("kv-pressure") >= len(got) - 2, got
    ok = scores("sglang-dp-one-rank-full")["sgl-dp-ok"]
    assert {v for _, v, _ in ok.points} <= {"unknown", "healthy"}


def test_dp_rank_evidence_and_remedy_name_the_rank():
    from tui.core.record import read_log

    path = os.path.join(DATA, "sglang-dp-one-rank-full.jsonl.gz")
    sc = scores("sglang-dp-one-rank-full")["sgl-dp-hot"]
    mid = [ts for ts, v, lab in sc.points if lab == "kv-pressure"][30]
    r = replay([s for s in read_log(path) if s.ts <= mid]).replicas["sgl-dp-hot"]
    assert r.verdict == "kv-pressure"
    text = "\n".join(e.text for e in r.evidence)
    assert "dp_rank 2 of 8" in text and "the other ranks 0.2" in text
    assert r.summary.count("scale out") == r.summary.count("do not scale out") and "dp_rank 2" in r.summary


@pytest.mark.parametrize("form", ["counter", "gauge"])
def test_sglang_retractions_between_bursts_hold_kv_pressure(form):
    sc = scores(f"sglang-retract-cadence-{form}")[f"sgl-{form}"]
    got = in_phase(sc, "kv-pressure")[2:]
    assert got.count("kv-pressure") >= 0.95 * len(got), [v for v in got if v != "kv-pressure"]


@pytest.mark.parametrize("trace", ["vllm-steady-overload-util-noise", "vllm-chunked-long-prompts"])
def test_a_persistent_queue_outranks_utilisation_samples(trace):
    (sc,) = scores(trace).values()
    got = in_phase(sc, "overloaded")
    assert "compute-bound" not in got
    # the first two intervals after the onset are the verdict's to catch up; a chance two-scrape
    # run of a flat `running` may read as a cap once
    assert got.count("overloaded") >= len(got) - 4, got


def test_sglang_tokenizer_cpu_is_read():
    from tui.core.engines.sglang import parse_page

    page = ('sglang:num_running_reqs{model_name="m"} 1\n'
            'process_cpu_seconds_total{component="tokenizer"} 12.5\n'
            'process_cpu_seconds_total{component="scheduler",dp_rank="0"} 99\n')
    assert parse_page(page).process_cpu_seconds == 12.5
    sc = scores("sglang-retract-cadence-counter")["sgl-counter"]
    assert "API server CPU: not exposed" not in evidence_text(sc)


def test_overloaded_summary_agrees_with_its_room_evidence():
    """An `overloaded` replica whose own evidence shows KV room is never told KV has none."""
    from tui.core.record import read_log

    path = os.path.join(DATA, "vllm-chunked-long-prompts.jsonl.gz")
    last = replay(list(read_log(path))).replicas["chunk-0"]
    assert last.verdict == "overloaded"
    room = [e for e in last.evidence if e.signal == "kv_peak"]
    assert room and room[0].crossed  # the evidence says there is room
    assert "no room" not in last.summary


def test_labelled_suite_meets_the_targets():
    """Per-verdict precision and recall, detection within two intervals, verdict changes at most
    the labelled ones + 2 per replica, and no `stalled` while generation advances."""
    pairs, det = [], []
    for p in paths():
        for sc in score_file(p):
            pairs += sc.pairs
            det += [(lab, d / sc.interval if d is not None else None) for lab, d in sc.detections]
            assert sc.changes <= sc.labelled_changes + 2, (sc.name, sc.changes, sc.labelled_changes)
            assert sc.stalled_while_advancing == 0, sc.name
    for v, (prec, rec, n) in precision_recall(pairs).items():
        target = 0.95 if v == "kv-pressure" else 0.9
        assert prec >= target and rec >= target, (v, prec, rec, n)
    assert all(d is not None for _, d in det), det
    kv = [d for lab, d in det if lab == "kv-pressure"]
    assert max(kv) <= 2, kv
    ds = sorted(d for _, d in det)
    assert ds[len(ds) // 2] <= 2


def _history_until(name: str, replica: str, label: str, nth: int = 30):
    """The replica's history and finding as the app holds them (a Monitor fed poll by poll)."""
    from tui.core.monitor import Monitor
    from tui.core.record import read_log

    path = os.path.join(DATA, name + ".jsonl.gz")
    sc = scores(name)[replica]
    until = [ts for ts, _, lab in sc.points if lab == label][nth]
    mon = Monitor()
    state = None
    for s in read_log(path):
        if s.replica == replica and s.ts <= until:
            state = mon.ingest([s])
    view = next(v for v in state.replicas if v.name == replica)
    return mon.histories[replica], until, view.finding


@pytest.mark.parametrize("name,replica,label", [
    ("sglang-dp-one-rank-full", "sgl-dp-hot", "kv-pressure"),
    ("vllm-lora-starved", "lora-0", "lora-capped"),
])
def test_runbook_follows_the_corrected_verdict(name, replica, label):
    """`g`: a one-rank-pressured DP pod is never told to scale out; a LoRA-capped replica is
    never told to restart."""
    from tui.core.diagnosis.runbook import runbook
    from tui.screens.diagnosis_text import runbook_text

    h, now, finding = _history_until(name, replica, label)
    rb = runbook(h, now, finding=finding, rollouts=[])
    assert rb.finding.verdict == label
    text = runbook_text(rb, lambda a: ("x", None), {}).plain
    if label == "kv-pressure":
        assert rb.step("scale").status == "skip" and rb.branch == "rebalance"
        assert "rebalance" in text and "scale out to" not in text
        assert all(s.status != "todo" for s in rb.steps if s.id == "scale")
    else:
        assert "restart" not in text.replace("do not restart", "")
        assert "--max-loras" in text


# -- fleet imbalance ----------------------------------------------------------------------------


def _fleet(name):
    from tests.labelled import fleet_points

    return fleet_points(os.path.join(DATA, name + ".jsonl.gz"))


def test_fleet_imbalance_fires_beside_idle_replicas_within_two_intervals():
    pts = _fleet("vllm-fleet-imbalance")
    onset = min(ts for ts, _, lab in pts if lab == "imbalanced")
    first = min(ts for ts, g, _ in pts if g)
    assert onset <= first <= onset + 2 * 5.0
    scored = [(lab, bool(g)) for ts, g, lab in pts if lab is not None
              and not any(0 <= ts - t0 < 10.0 for t0 in (onset, 1764000305.0))]
    tp = sum(1 for lab, on in scored if lab == "imbalanced" and on)
    fp = sum(1 for lab, on in scored if lab == "balanced" and on)
    fn = sum(1 for lab, on in scored if lab == "imbalanced" and not on)
    assert tp / (tp + fp) >= 0.9 and tp / (tp + fn) >= 0.9, (tp, fp, fn)


@pytest.mark.parametrize("name", ["vllm-fleet-all-busy", "vllm-fleet-all-idle", "sglang-dp-one-rank-full"])
def test_fleet_imbalance_never_fires_when_all_busy_or_all_idle(name):
    assert not any(g for _, g, _ in _fleet(name))


def test_fleet_imbalance_in_json_names_group_spread_since_and_remedy():
    import json

    from tui.core.export import fleet_json
    from tui.core.monitor import Monitor
    from tui.core.record import read_log
    from tui.core.sources.replay import polls

    mon = Monitor()
    state = None
    for batch in polls(sorted(read_log(os.path.join(DATA, "vllm-fleet-imbalance.jsonl.gz")), key=lambda s: s.ts)):
        state = mon.ingest(batch)
        if batch[0].ts >= 1764000200.0:
            break
    obj = json.loads(json.dumps(fleet_json(state)))
    (imb,) = obj["imbalance"]
    assert imb["group"] == "meta-llama/Llama-3.1-8B-Instruct" and imb["hot"] == ["imb-0"]
    assert sorted(imb["idle"]) == ["imb-1", "imb-2", "imb-3"] and imb["replicas"] == 4
    assert imb["spread"]["kv"]["hot"][0] >= 0.9 and imb["spread"]["kv"]["idle"][1] < 0.1
    assert imb["since"] <= 1764000075.0 and "rebalance" in imb["remedy"] and "InferencePool" in imb["remedy"]
    assert "idle" in imb["text"] and "KV 0.9" in imb["text"]


def test_runbook_scale_step_agrees_with_the_room_evidence():
    from tui.core.diagnosis.runbook import runbook

    h, now, finding = _history_until("vllm-chunked-long-prompts", "chunk-0", "overloaded", nth=60)
    assert finding.verdict == "overloaded" and any(e.signal == "kv_peak" and e.crossed for e in finding.evidence)
    rb = runbook(h, now, finding=finding, rollouts=[])
    assert "no room" not in rb.step("scale").answer and "no room" not in finding.summary


def test_the_trace_files_are_what_their_generator_writes(tmp_path):
    """The committed traces are reproducible (`python -m tests.labelled`), one file per trace,
    every line a scrape-log record with its label."""
    import gzip
    import json

    from tests.labelled import write_all

    written = write_all(str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == sorted(os.path.basename(p) for p in paths())
    for p in written:
        with open(p, "rb") as a, open(os.path.join(DATA, os.path.basename(p)), "rb") as b:
            assert a.read() == b.read(), p
        with gzip.open(p, "rt") as f:
            first = json.loads(f.readline())
        assert {"ts", "replica", "metrics", "label", "trace", "interval"} <= set(first)


def test_lora_info_takes_the_newest_label_set_and_refuses_garbage():
    from tui.core.engines import parse_page

    page = ('vllm:num_requests_running{engine="0",model_name="m"} 1\n'
            'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b",waiting_lora_adapters=""} 100.0\n'
            'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b,c,d",waiting_lora_adapters="e"} 200.0\n')
    assert parse_page(page).lora == (4, ("a", "b", "c", "d"), ("e",))
    for bad in ("inf", "nan", "-3", "x"):
        p = page.replace('max_lora="4",running_lora_adapters="a,b,c,d"', f'max_lora="{bad}",running_lora_adapters="a"')
        assert parse_page(p).lora[0] is None

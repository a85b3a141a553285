"""Scrape log: writer, reader, rotation, gzip, damaged files, a writer killed mid-write."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.scenarios import Phase, Scenario, generate
from tui.core.metrics.extract import parse_vllm, to_sample
from tui.core.model import GpuDevice, GpuSample, PodInfo, Scrape
from tui.core.monitor import Monitor
from tui.core.record import Recorder, load_log, render_sample

from .diagnosis_helpers import LAT_B, hist, scrape

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def some_scrapes(n=5, dialect="v1"):
    scn = Scenario("vllm-0", (Phase("healthy", 5.0 * n),), dialect=dialect)
    return [s for s, _ in generate(scn, seed=3)]


@pytest.mark.parametrize("name", ["log.jsonl", "log.jsonl.gz"])
def test_round_trip_keeps_what_the_diagnosis_reads(tmp_path, name):
    path = str(tmp_path / name)
    scr = some_scrapes(4)
    tp = GpuSample(devices=(GpuDevice("0", memory_used_bytes=70e9, memory_total_bytes=80e9, util_pct=40.0,
                                      throttle_reasons=("hw_slowdown",)),
                            GpuDevice("1", memory_used_bytes=75e9, memory_total_bytes=80e9, util_pct=45.0)))
    extra = [
        Scrape(ts=scr[-1].ts + 5, replica="vllm-1", error="connection refused"),
        Scrape(ts=scr[-1].ts + 5, replica="vllm-2", sample=scr[0].sample, gpu=tp,
               pod=PodInfo("ns", "vllm-2", restarts=2, last_termination_reason="OOMKilled", last_exit_code=137)),
    ]
    with Recorder(path) as rec:
        rec.write(scr)
        rec.write(extra)
    if name.endswith(".gz"):
        with open(path, "rb") as f:
            assert f.read(2) == b"\x1f\x8b"
    back, problems = load_log(path)
    assert problems == []
    assert [(s.ts, s.replica) for s in back] == [(s.ts, s.replica) for s in scr + extra]
    for a, b in zip(back, scr, strict=False):
        assert a.sample.value("kv_usage") == pytest.approx(b.sample.value("kv_usage"))
        assert a.sample.value("preemptions") == b.sample.value("preemptions")
        assert a.sample.hist("ttft").counts == b.sample.hist("ttft").counts
        assert a.gpu.memory_pct == pytest.approx(b.gpu.memory_pct)
        assert a.pod is not None
    assert back[-2].error == "connection refused" and back[-2].sample is None
    tp_back = back[-1]
    assert len(tp_back.gpu.devices) == 2 and tp_back.gpu.throttle_reasons == ("hw_slowdown",)
    assert tp_back.gpu.memory_pct == pytest.approx(75e9 / 80e9 * 100)
    assert tp_back.pod.last_termination_reason == "OOMKilled" and tp_back.pod.last_exit_code == 137


def test_sample_without_page_text_is_rendered_and_parses_back(tmp_path):
    s = scrape(1000.0, kv=0.93, running=7.0, waiting=3.0, wcap=2.0, wdef=1.0, preempt=12.0, cpu=55.5,
               cache={"block_size": "16", "num_gpu_blocks": "5691"}, hists={"ttft": hist(LAT_B, [0.2, 0.3, 4.0])})
    path = str(tmp_path / "r.jsonl")
    with Recorder(path) as rec:
        rec.write([s])
    (b,), problems = load_log(path)
    assert not problems
    for name in ("kv_usage", "running", "waiting", "waiting_capacity", "waiting_deferred", "preemptions"):
        assert b.sample.value(name) == pytest.approx(s.sample.value(name)), name
    assert b.sample.process_cpu_seconds == pytest.approx(55.5)
    assert b.sample.cache_config["num_gpu_blocks"] == "5691"
    assert b.sample.hist("ttft").count == 3


@pytest.mark.parametrize("dialect,generation,kv_name", [
    ("v1", "v1", "vllm:kv_cache_usage_perc"), ("v1-early", "v1", "vllm:gpu_cache_usage_perc"),
    ("v0", "v0", "vllm:gpu_cache_usage_perc")])
def test_dialects_use_each_generation_names(dialect, generation, kv_name):
    s = some_scrapes(2, dialect)[-1]
    text = render_sample(s.sample, dialect)
    assert f"{kv_name}{{" in text
    back = to_sample(parse_vllm(text))
    assert back.generation == generation
    assert back.value("kv_usage") == pytest.approx(s.sample.value("kv_usage"))
    assert ("waiting_capacity" in next(iter(back.engines.values())).values) == (dialect == "v1")
    assert ('engine="0"' in text) == (dialect == "v1")


def test_damaged_lines_are_reported_with_line_numbers_and_skipped(tmp_path):
    good = json.dumps({"ts": 1.0, "replica": "a", "error": "timeout"})
    lines = [
        good,
        "{not json",
        json.dumps({"ts": "soon", "replica": "a", "error": "x"}),
        json.dumps({"ts": 2.0, "replica": "a"}),
        json.dumps([1, 2]),
        json.dumps({"ts": 3.0, "replica": "a", "error": "x", "future_field": {"a": 1},
                    "gpu": {"utilization_pct": "high", "memory_used_bytes": 5}}),
        "",
        json.dumps({"ts": 4.0, "replica": "b", "metrics": "<html>login</html>"}),
        '{"ts": 5.0, "replica": "a", "err',  # cut mid-line by a killed writer
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines))
    scrapes, problems = load_log(str(path))
    assert [s.ts for s in scrapes] == [1.0, 3.0, 4.0]
    msgs = {p.line: p.message for p in problems}
    assert "malformed JSON" in msgs[2]
    assert "invalid ts" in msgs[3]
    assert "neither metrics nor error" in msgs[4]
    assert "expected a JSON object" in msgs[5]
    assert "utilization_pct" in msgs[6] and scrapes[1].gpu.devices[0].util_pct is None
    assert "incomplete last line" in msgs[9]
    assert scrapes[2].error == "not a metrics page (HTML)"
    assert str(problems[0]).startswith(f"{path}:2: ")


def test_gzip_cut_short_reads_up_to_the_last_complete_line(tmp_path):
    path = str(tmp_path / "cut.jsonl.gz")
    scr = some_scrapes(6)
    with Recorder(path) as rec:
        rec.write(scr)
    data = open(path, "rb").read()
    # lose the gzip trailer and part of the last line, as a kill -9 would
    cut = tmp_path / "cut2.jsonl.gz"
    cut.write_bytes(data[: len(data) - 200])
    back, problems = load_log(str(cut))
    assert 4 <= len(back) <= 5 and [s.ts for s in back] == [s.ts for s in scr[: len(back)]]
    assert all(p.line == 0 or "incomplete" in p.message for p in problems)


def test_writer_killed_mid_write_leaves_a_readable_log(tmp_path):
    path = str(tmp_path / "killed.jsonl.gz")
    script = (
        "import sys, time\n"
        "from tui.core.record import Recorder\n"
        "from tests.scenarios import Phase, Scenario, generate\n"
        "scn = Scenario('vllm-0', (Phase('healthy', 5000.0),))\n"
        "rec = Recorder(sys.argv[1])\n"
        "for i, (s, _) in enumerate(generate(scn, 1)):\n"
        "    rec.write([s])\n"
        "    if i == 20: print('ready', flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, path], cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    with pytest.raises((EOFError, OSError)):
        with gzip.open(path, "rb") as f:  # the standard reader gives up on the missing trailer
            f.read()
    back, problems = load_log(path)
    assert len(back) > 20
    assert [s.ts for s in back] == sorted(s.ts for s in back)
    assert len(problems) <= 1


def test_rotation_bounds_the_size_and_cap_stops(tmp_path):
    path = str(tmp_path / "rot.jsonl")
    scr = some_scrapes(40)
    line = len(json.dumps({"metrics": scr[0].raw}))
    rec = Recorder(path, max_bytes=line * 5, rotate=2)
    rec.write(scr)
    rec.close()
    files = sorted(os.listdir(tmp_path))
    assert files == ["rot.jsonl", "rot.jsonl.1", "rot.jsonl.2"]
    assert all(os.path.getsize(tmp_path / f) <= line * 6 + 1000 for f in files)
    newest, _ = load_log(path)
    assert newest[-1].ts == scr[-1].ts
    capped = str(tmp_path / "cap.jsonl.gz")
    rec = Recorder(capped, max_bytes=4000, rotate=0)
    rec.write(scr)
    assert rec.capped and not rec.active and "cap" in rec.error
    kept, problems = load_log(capped)
    assert 0 < len(kept) < len(scr) and not problems
    with pytest.raises(ValueError):
        Recorder(str(tmp_path / "x"), max_bytes=0)
    with pytest.raises(OSError):
        Recorder(str(tmp_path / "no-such-dir" / "x.jsonl"))


def test_recorder_as_monitor_hook_and_append_makes_a_second_gzip_member(tmp_path):
    path = str(tmp_path / "m.jsonl.gz")
    scr = some_scrapes(6)
    with Recorder(path) as rec:
        mon = Monitor(on_scrapes=rec.write)
        for s in scr[:3]:
            mon.ingest([s])
    with Recorder(path) as rec:  # a second session appends
        mon = Monitor(on_scrapes=rec.write)
        for s in scr[3:]:
            mon.ingest([s])
    back, problems = load_log(path)
    assert [s.ts for s in back] == [s.ts for s in scr] and not problems

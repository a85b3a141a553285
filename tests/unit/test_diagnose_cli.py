"""`kvwatch diagnose` on recorded files: timelines, --json, .gz, damaged input, no look-ahead."""

from __future__ import annotations

import gzip
import json

import pytest

from tui.cli import main
from tests.scenarios import Phase, Scenario, generate
from tui.core.offline import diagnose_file, replay
from tui.core.record import Recorder, scrape_record

HEALTHY = Phase("healthy", 100)


@pytest.fixture(autouse=True)
def no_user_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # defaults, whoever runs the tests
PRESSURE = Phase("kv-pressure", 150, kv=(0.96, 0.99), running=(6, 3), waiting=(6, 25), preempt_rate=0.5,
                 gpu_util=(40, 35))


def incident(tmp_path, name="incident.jsonl.gz"):
    """Two replicas in one log: one healthy, one going into KV pressure at t0+100."""
    a = list(generate(Scenario("vllm-a", (Phase("healthy", 250),)), 1))
    b = list(generate(Scenario("vllm-b", (HEALTHY, PRESSURE), dialect="v0"), 1))
    path = tmp_path / name
    with Recorder(str(path)) as rec:
        for (sa, _), (sb, _) in zip(a, b, strict=False):
            rec.write([sa, sb])  # one poll
    return path, a[0][0].ts


def run_cli(capsys, *argv):
    code = main(["diagnose", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_timeline_per_replica(tmp_path, capsys):
    path, t0 = incident(tmp_path)
    code, out, err = run_cli(capsys, "--input", str(path), "--json")
    assert code == 0, err
    doc = json.loads(out)
    reps = doc["replicas"]
    assert set(reps) == {"vllm-a", "vllm-b"}
    assert reps["vllm-a"]["verdict"] == "healthy"
    b = reps["vllm-b"]
    assert b["verdict"] == "kv-pressure"
    assert [e["verdict"] for e in b["timeline"]] == ["unknown", "healthy", "kv-pressure"]
    onset = t0 + 100
    assert onset <= b["since"] <= onset + 10 and b["timeline"][-1]["ts"] <= onset + 10
    assert b["evidence"][0]["signal"] == "kv_usage" and b["evidence"][0]["crossed"]
    assert all({"ts", "verdict"} <= set(e) for e in b["timeline"])


def test_text_output_and_plain_file(tmp_path, capsys):
    path, _ = incident(tmp_path, "incident.jsonl")
    code, out, _ = run_cli(capsys, "--input", str(path))
    assert code == 0
    assert "vllm-b: kv-pressure since" in out
    assert "KV usage" in out and "timeline:" in out


def test_damaged_gz_reports_lines_and_keeps_going(tmp_path, capsys):
    src, _ = incident(tmp_path, "src.jsonl")
    lines = src.read_text().splitlines()
    lines.insert(3, "garbage {")
    damaged = tmp_path / "damaged.jsonl.gz"
    raw = ("\n".join(lines) + "\n").encode()
    with gzip.open(damaged, "wb") as f:
        f.write(raw[: len(raw) - 50])  # last line cut
    code, out, err = run_cli(capsys, "--input", str(damaged), "--json")
    assert code == 0
    assert f"{damaged}:4: malformed JSON" in err
    assert f"{damaged}:{len(lines)}: incomplete last line" in err
    doc = json.loads(out)
    assert doc["replicas"]["vllm-b"]["verdict"] == "kv-pressure"
    assert doc["scrapes"] == len(lines) - 2


def test_escapes_control_characters_from_the_file(tmp_path, capsys):
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps({"ts": 1.0, "replica": "x\x1b]0;pwned\x07", "error": "boom\x1b[2J"}) + "\n")
    code, out, err = run_cli(capsys, "--input", str(path))
    assert code == 0 and "\x1b" not in out + err


def test_missing_empty_and_directory_inputs_exit_2(tmp_path, capsys):
    code, _, err = run_cli(capsys, "--input", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "no such file" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = run_cli(capsys, "--input", str(empty))
    assert code == 2 and "no scrape records" in err
    code, _, err = run_cli(capsys, "--input", str(tmp_path))
    assert code == 2 and "directory" in err


def test_offline_verdict_at_t_ignores_later_scrapes(tmp_path):
    path, t0 = incident(tmp_path)
    full = diagnose_file(str(path), keep_points=True)
    records = [json.loads(x) for x in gzip.open(path, "rt")]
    for cut_at in (t0 + 95, t0 + 105, t0 + 110, t0 + 200):
        head = tmp_path / f"head{int(cut_at)}.jsonl"
        head.write_text("".join(json.dumps(r) + "\n" for r in records if r["ts"] <= cut_at))
        part = diagnose_file(str(head), keep_points=True)
        for name in ("vllm-a", "vllm-b"):
            upto = [p for p in full.replicas[name].points if p[0] <= cut_at]
            assert part.replicas[name].points == upto


def test_replay_orders_by_time_and_groups_polls(tmp_path):
    scn = Scenario("r", (HEALTHY, PRESSURE))
    rows = [s for s, _ in generate(scn, 2)]
    shuffled = rows[1::2] + rows[::2]
    a = replay(rows, keep_points=True).replicas["r"].points
    b = replay(shuffled, keep_points=True).replicas["r"].points
    assert a == b and len(a) == len(rows)
    assert scrape_record(rows[0])["metrics"] == rows[0].raw


@pytest.mark.parametrize("bad", ['{"ts": 1, "replica": "a", "metrics": 42}', '{"ts": 1, "replica": ""}'])
def test_records_that_are_not_scrapes_are_skipped(tmp_path, bad, capsys):
    path = tmp_path / "x.jsonl"
    path.write_text(bad + "\n" + json.dumps({"ts": 2.0, "replica": "b", "error": "x"}) + "\n")
    code, out, err = run_cli(capsys, "--input", str(path), "--json")
    assert code == 0 and ":1: " in err and list(json.loads(out)["replicas"]) == ["b"]

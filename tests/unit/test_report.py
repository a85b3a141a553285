"""`kvwatch report` on synthetic recordings: its numbers are diagnose's and the audit log's, the
HTML is self-contained and escaped, a damaged file reports what it read, a large fleet gets the
heat map, the window flags cut the story, and the series stays bounded."""

from __future__ import annotations

import datetime as dt
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.scenarios import Phase, Scenario, generate
from tui.cli import main
from tui.core.record import Recorder
from tui.core.report import build, build_report
from tui.core.report.build import INCIDENT
from tui.core.report.svg import when

HEALTHY = Phase("healthy", 100)
PRESSURE = Phase("kv-pressure", 150, kv=(0.96, 0.99), running=(6, 3), waiting=(6, 25), preempt_rate=0.5,
                 gpu_util=(40, 35))
CALM = Phase("healthy", 300)


@pytest.fixture(autouse=True)
def no_user_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # defaults, whoever runs the tests


def record(path: Path, scenarios: list[Scenario]) -> float:
    """One poll per interval with every scenario's replica; the first poll's time."""
    traces = [list(generate(s, 1)) for s in scenarios]
    with Recorder(str(path)) as rec:
        for polls in zip(*traces, strict=False):
            rec.write([s for s, _ in polls])
    return traces[0][0][0].ts


def incident(tmp_path: Path, name: str = "incident.jsonl.gz", names=("vllm-a", "vllm-b")) -> tuple[Path, float]:
    """vllm-a healthy; vllm-b into KV pressure at t0+100, calm again from t0+250."""
    path = tmp_path / name
    t0 = record(path, [Scenario(names[0], (Phase("healthy", 550),)),
                       Scenario(names[1], (HEALTHY, PRESSURE, CALM), dialect="v0")])
    return path, t0


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="milliseconds")


def audit_log(path: Path, t0: float) -> Path:
    """Two actions the way kvwatch logs them: one placed by wall time, one by the data clock; a
    third long before the recording; a torn line."""
    entries = [
        {"time": iso(t0 + 140), "user": "alice@example.com", "user_source": "SelfSubjectReview", "context": "prod",
         "action": "edit", "target": "deployment/llama -n inference", "diff": "-- 64\n+- 32",
         "patch": [], "result": {"ok": True, "message": "args changed; rollout started", "status": 200}},
        {"time": iso(t0 - 99999), "data_ts": t0 + 200, "user": "bob", "context": "prod", "action": "scale",
         "target": "deployment/llama -n inference", "diff": "-replicas: 2\n+replicas: 4",
         "result": {"ok": False, "message": "refused: read-only", "status": None}},
        {"time": iso(t0 - 86400), "user": "carol", "context": "prod", "action": "restart", "target": "x",
         "result": {"ok": True, "message": "old", "status": 200}},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries) + '{"time": "torn\n')
    return path


def diagnose_json(capsys, path: Path) -> dict:
    assert main(["diagnose", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def seconds_per_verdict(rep: dict) -> dict[str, float]:
    tl = rep["timeline"]
    out: dict[str, float] = {}
    for i, e in enumerate(tl):
        end = tl[i + 1]["ts"] if i + 1 < len(tl) else rep["last_ts"]
        out[e["verdict"]] = out.get(e["verdict"], 0.0) + end - e["ts"]
    return out


def test_the_numbers_are_diagnoses_and_the_audit_logs(tmp_path, capsys):
    path, t0 = incident(tmp_path)
    audit = audit_log(tmp_path / "audit.jsonl", t0)
    diag = diagnose_json(capsys, path)
    r = build_report(str(path), str(audit))
    reps = diag["replicas"]
    assert set(r.replicas) == set(reps)
    # first incident verdict per replica = the first incident entry of diagnose's timeline
    want = {n: next(((e["ts"], e["verdict"]) for e in rep["timeline"] if e["verdict"] in INCIDENT), None)
            for n, rep in reps.items()}
    assert r.first_verdict == {n: v for n, v in want.items() if v is not None}
    assert set(r.first_verdict) == {"vllm-b"} and r.first_verdict["vllm-b"][1] == "kv-pressure"
    assert t0 + 100 <= r.first_verdict["vllm-b"][0] <= t0 + 115
    for n, rep in reps.items():
        got = r.verdict_seconds(n)
        assert got == pytest.approx(seconds_per_verdict(rep)), n
    # the mitigations: the audit log's, at its times (data clock first), who / what / result
    assert [(m.ts, m.user, m.action, m.ok) for m in r.mitigations] == [
        (pytest.approx(t0 + 140, abs=0.01), "alice@example.com", "edit", True), (t0 + 200, "bob", "scale", False)]
    assert r.mitigations[0].diff == "-- 64\n+- 32" and r.audit_outside == 1
    assert any("1 unreadable audit line" in p for p in r.problems)
    assert r.first_mitigation is r.mitigations[0]
    assert r.time_to_mitigate == pytest.approx(r.mitigations[0].ts - r.fleet_onset)
    assert r.time_to_detect == r.first_detected - r.fleet_onset >= 0
    # during the pressure the fleet preempts; the figures before the edit say so
    pre_before = r.mitigations[0].before_after["preempt"][0]
    assert pre_before is not None and pre_before > 0.1
    # recovery: after the last incident verdict, by the runbook's window
    last_bad = max(e["ts"] for rep in reps.values() for e in rep["timeline"] if e["verdict"] in INCIDENT)
    end_bad = min(e["ts"] for e in reps["vllm-b"]["timeline"] if e["ts"] > last_bad)
    assert r.recovered_at is not None and r.recovered_at >= end_bad + r.thresholds.recovery_window_s - 10
    assert r.time_to_recover == r.recovered_at - r.fleet_onset
    # the Markdown says the same numbers
    md = tmp_path / "r.md"
    assert main(["report", str(path), "--audit", str(audit), "-o", str(md)]) == 0
    text = md.read_text()
    ts, v = r.first_verdict["vllm-b"]
    assert f"| vllm-b | - | {when(r.onset['vllm-b'])} | ▲ kv-pressure | {when(ts)} |" in text
    secs = seconds_per_verdict(reps["vllm-b"])
    assert f"{secs['kv-pressure'] / 60:.1f}" in text.split("## Minutes per verdict")[1].split("vllm-b |")[1]
    assert f"### 1. {when(t0 + 140)}: edit deployment/llama -n inference" in text
    assert "alice@example.com (SelfSubjectReview)" in text and "FAILED: refused: read-only" in text


def test_html_is_one_self_contained_escaped_page(tmp_path, capsys):
    path, t0 = incident(tmp_path, names=("<img src=x onerror=alert(1)>", "vllm-b"))
    out = tmp_path / "report.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    page = out.read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    import re

    low = re.sub(r"&lt;img src=x[^<]*", "", page).lower()  # the escaped name is text, not a tag
    for banned in ("<script", "<link", "<img", "@import", "url(", "<iframe", "src="):
        assert banned not in low, banned
    # the only URL is the SVG namespace, an identifier that is never fetched
    assert {u for u in _urls(page)} <= {"http://www.w3.org/2000/svg"}
    assert "prefers-color-scheme: dark" in page and "@media print" in page
    assert page.count("<svg") == 5  # lanes + four plots
    assert "No audit log given" in page


def test_markdown_escapes_names_that_would_be_html_or_table_syntax(tmp_path):
    path, t0 = incident(tmp_path, names=("a|b<script>x</script>", "vllm-b"))
    md = tmp_path / "r.md"
    assert main(["report", str(path), "-o", str(md)]) == 0
    import re

    text = md.read_text()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)  # fenced blocks are shown literally
    assert "<script>" not in prose and "a\\|b&lt;script>x&lt;/script>" in prose
    assert text.count("```") % 2 == 0


def _urls(text: str) -> list[str]:
    import re

    return re.findall(r"https?://[^\s\"'<>)]+", text)


def test_markdown_puts_valid_svg_pictures_beside_it(tmp_path):
    path, t0 = incident(tmp_path)
    md = tmp_path / "out" / "incident.md"
    md.parent.mkdir()
    assert main(["report", str(path), "-o", str(md)]) == 0
    pics = sorted(p.name for p in md.parent.glob("*.svg"))
    assert pics == ["incident-kv.svg", "incident-lanes.svg", "incident-preempt.svg", "incident-queue.svg",
                    "incident-ttft.svg"]
    text = md.read_text()
    for p in pics:
        assert f"]({p})" in text
        svg = (md.parent / p).read_text()
        ET.fromstring(svg)  # well-formed
        assert "<style>" in svg and "prefers-color-scheme" in svg  # a standalone file carries its colours


def test_a_damaged_recording_reports_what_it_read_and_says_what_it_skipped(tmp_path, capsys):
    path, t0 = incident(tmp_path)
    data = bytearray(path.read_bytes())
    cut = len(data) * 2 // 3
    data[cut:cut + 64] = b"\xff" * 64  # corrupt the gzip stream two thirds in
    path.write_bytes(bytes(data))
    out = tmp_path / "r.html"
    assert main(["report", str(path), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "corrupt gzip data" in err
    page = out.read_text()
    assert "corrupt gzip data at compressed byte offset" in page and "nothing was skipped" not in page
    r = build_report(str(path))
    assert 0 < r.scrapes < 2 * 110 and "vllm-b" in r.first_verdict  # what came before the damage


def test_a_large_fleet_gets_the_heat_map(tmp_path):
    path = tmp_path / "big.jsonl"
    scn = [Scenario(f"r{i:02d}", (Phase("healthy", 60), Phase("kv-pressure", 60, kv=(0.97, 0.99), waiting=(6, 9),
                                                             preempt_rate=0.5) if i % 3 == 0 else Phase("healthy", 60)),
                    interval=10.0) for i in range(45)]
    record(path, scn)
    md = tmp_path / "big.md"
    assert main(["report", str(path), "-o", str(md)]) == 0
    assert (tmp_path / "big-heatmap.svg").exists() and not (tmp_path / "big-lanes.svg").exists()
    svg = (tmp_path / "big-heatmap.svg").read_text()
    assert svg.count("<title>r") == 45 and 'class="v-kv-pressure"' in svg


def test_from_and_to_cut_the_window(tmp_path, capsys):
    path, t0 = incident(tmp_path)
    r = build_report(str(path), start=t0 + 300, end=t0 + 400)
    assert r.start >= t0 + 300 and r.end <= t0 + 400
    assert not r.first_verdict  # the pressure was before the window
    assert all(sum(r.verdict_seconds(n).values()) <= 100 + 1e-6 for n in r.replicas)
    assert main(["report", str(path), "--from", str(t0 + 300), "--to", iso(t0 + 400), "-o",
                 str(tmp_path / "w.html")]) == 0
    with pytest.raises(SystemExit) as e:
        main(["report", str(path), "--from", "yesterday-ish"])
    assert e.value.code == 2 and "not a time" in capsys.readouterr().err


def test_a_missing_recording_is_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "r.html")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "r.html")


def test_the_series_stays_bounded_and_keeps_the_peaks(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "MAX_POINTS", 16)
    path, t0 = incident(tmp_path)
    r = build_report(str(path))
    assert len(r.points) <= 16
    assert max(p.values["kv"] for p in r.points if p.values["kv"] is not None) >= 0.96  # the peak survived
    assert any(p.worst == "kv-pressure" for p in r.points)

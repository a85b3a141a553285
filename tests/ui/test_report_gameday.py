"""The README's game day, recorded and reported: the report's numbers are those `kvwatch diagnose
--json` gives for the recording and those the audit log holds for the two actions (the args edit
and the scale-out), and it ends in the runbook's confirmed recovery."""

from __future__ import annotations

import json

from tests.gameday_record import record_game_day
from tui.cli import main
from tui.core.report import build_report
from tui.core.report.build import INCIDENT
from tui.core.report.svg import when


async def test_the_game_day_report_agrees_with_diagnose_and_the_audit_log(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    rec, audit = await record_game_day(tmp_path / "gd", after_s=300)
    assert main(["diagnose", str(rec), "--json"]) == 0
    diag = json.loads(capsys.readouterr().out)["replicas"]
    logged = [json.loads(ln) for ln in audit.read_text().splitlines()]
    r = build_report(str(rec), str(audit))

    # verdicts: every replica diagnose knows, its first incident verdict, its time in each verdict
    assert set(r.replicas) == set(diag)
    first = {n: next(((e["ts"], e["verdict"]) for e in d["timeline"] if e["verdict"] in INCIDENT), None)
             for n, d in diag.items()}
    assert r.first_verdict == {n: v for n, v in first.items() if v is not None}
    assert {v for _, v in r.first_verdict.values()} >= {"kv-pressure"}
    for n, d in diag.items():
        tl = d["timeline"]
        want: dict[str, float] = {}
        for i, e in enumerate(tl):
            end = tl[i + 1]["ts"] if i + 1 < len(tl) else d["last_ts"]
            want[e["verdict"]] = want.get(e["verdict"], 0.0) + end - e["ts"]
        assert r.verdict_seconds(n) == want, n

    # the actions: the audit log's two, at its data clock, with who / what / result
    assert [m.action for m in r.mitigations] == ["edit", "scale"] == [e["action"] for e in logged]
    for m, e in zip(r.mitigations, logged, strict=True):
        assert (m.ts, m.user, m.target, m.ok, m.message) == (
            e["data_ts"], e["user"], e["target"], e["result"]["ok"], e["result"]["message"])
        assert m.diff == e["diff"]
    edit, scale = r.mitigations
    assert "+- 32" in edit.diff and "+replicas:" in scale.diff
    # the edit ends the preemptions (once rolled out); the scale-out drains the queue
    pre = edit.before_after["preempt"]
    assert pre[0] > 0.05 and pre[2] is not None and pre[2] < 0.1 < pre[1]
    queue = scale.before_after["queue"]
    assert queue[0] > 100 and queue[2] is not None and queue[2] < queue[0] / 2

    # the story's times
    assert r.alarm_start is not None and r.fleet_onset <= r.first_detected <= r.alarm_start
    assert r.time_to_mitigate == edit.ts - r.fleet_onset > 0
    last_bad = max(e["ts"] for d in diag.values() for e in d["timeline"] if e["verdict"] in INCIDENT)
    assert r.recovered_at is not None and r.recovered_at > last_bad and r.relapse_at is None
    assert r.time_to_recover == r.recovered_at - r.fleet_onset

    # the HTML page says the same
    out = tmp_path / "gd.html"
    assert main(["report", str(rec), "--audit", str(audit), "-o", str(out)]) == 0
    page = out.read_text()
    for m in r.mitigations:
        assert f"{when(m.ts)}: {m.action} {m.target}" in page
    assert when(r.recovered_at, True) in page and when(r.fleet_onset, True) in page

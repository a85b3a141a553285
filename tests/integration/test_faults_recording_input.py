"""Hostile lines in a recording: a deeply nested JSON line and a timestamp outside the date range
are skipped with their line number (every good record kept) by `diagnose` and `replay --json`;
a recording in milliseconds is refused with a message that says so."""

from __future__ import annotations

import json
from pathlib import Path

from tests.faultserver import healthy_page, run_cli
from tests.integration.test_faults_offline import write_recording


async def test_nested_line_and_far_timestamp_are_skipped_with_their_line(tmp_path: Path) -> None:
    rec = tmp_path / "bad.jsonl"
    write_recording(rec, {"good-0": healthy_page(), "good-1": healthy_page(seed=1)}, 6)
    with open(rec, "a") as f:
        f.write("[" * 200_000 + "]" * 200_000 + "\n")  # line 13
        f.write(json.dumps({"ts": 1e18, "replica": "good-0", "metrics": healthy_page()}) + "\n")  # line 14
    write_recording(tmp_path / "more.jsonl", {"good-0": healthy_page()}, 2, t0=1_700_000_010.0)
    with open(rec, "a") as f:
        f.write((tmp_path / "more.jsonl").read_text())
    diag = await run_cli(str(tmp_path), "diagnose", "--input", str(rec), "--json", timeout=60)
    replay = await run_cli(str(tmp_path), "replay", str(rec), "--json", timeout=60)
    for run in (diag, replay):
        assert "Traceback" not in run.err and "RecursionError" not in run.err, run.err[-1500:]
        assert run.rc == 0, run.err[-800:]
        assert ":13:" in run.err and "nested" in run.err, run.err[-800:]
        assert ":14:" in run.err and "ts" in run.err, run.err[-800:]
    assert json.loads(diag.out)["scrapes"] == 14
    assert len(replay.json_lines()) == 8


async def test_a_millisecond_recording_is_refused_clearly(tmp_path: Path) -> None:
    rec = tmp_path / "ms.jsonl"
    write_recording(rec, {"r": healthy_page()}, 4, t0=1_700_000_000_000.0)
    for argv in (("diagnose", "--input", str(rec)), ("replay", str(rec), "--json")):
        run = await run_cli(str(tmp_path), *argv, timeout=60)
        assert "Traceback" not in run.err, run.err[-1500:]
        assert run.rc in (1, 2), (argv, run.rc, run.err[-800:])  # replay: 1 for "no scrapes", as before
        assert "milliseconds" in run.err, run.err[-800:]

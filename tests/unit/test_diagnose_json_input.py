"""`kvwatch diagnose` given kvwatch's own `--json` output says what the file is, once, instead of
one "missing or invalid replica" line per snapshot."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _diagnose(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", "diagnose", str(path)], capture_output=True,
                          text=True, env=dict(os.environ, KVWATCH_CONFIG=os.devnull + ".none"), timeout=120)


def test_fleet_json_lines_are_named(tmp_path):
    path = tmp_path / "fleet.jsonl"
    snap = {"ts": 1.75e9, "source": "demo", "replicas": [{"name": "a", "verdict": "healthy"}]}
    path.write_text("".join(json.dumps(dict(snap, ts=1.75e9 + i)) + "\n" for i in range(50)))
    run = _diagnose(path)
    assert run.returncode == 2
    assert "missing or invalid replica" not in run.stderr, run.stderr
    assert "--json" in run.stderr and "--record" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) <= 2, run.stderr


def test_diagnose_json_document_is_named(tmp_path):
    path = tmp_path / "diag.json"
    path.write_text(json.dumps({"scrapes": 3, "replicas": {"a": {"verdict": "healthy"}}}, indent=2))
    run = _diagnose(path)
    assert run.returncode == 2
    assert "diagnose --json" in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) <= 2, run.stderr

"""Command-line habits: --version, quiet exit into a closed pipe, `diagnose FILE`, usage errors
for a bad --url, a non-zero --json exit when nothing could be read, the demo's own audit log."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from tests.ui.recordings import phases, write_log
from tui.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "unit", "data")


def _env(tmp_path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT, KVWATCH_CONFIG=str(tmp_path / "none.toml"),
               XDG_STATE_HOME=str(tmp_path / "state"), XDG_DATA_HOME=str(tmp_path / "data"))
    return env


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == "kvwatch 0.1.0"


def _into_head(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    """`kvwatch ARGS | head -n 1`: the reader goes away after the first line."""
    cmd = f"{sys.executable} -m tui.cli {' '.join(args)} | head -n 1"
    return subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=60)


def test_demo_json_into_head_exits_quietly(tmp_path) -> None:
    run = _into_head(["demo", "--json", "--replicas", "1", "--interval", "0.2", "--duration", "30"], tmp_path)
    assert json.loads(run.stdout.splitlines()[0])["replicas"] is not None
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr
    assert run.returncode == 141  # SIGPIPE's exit status, as `yes | head` (pipefail shows it)


def test_replay_json_into_head_exits_quietly(tmp_path) -> None:
    log = tmp_path / "rec.jsonl"
    write_log(log, phases(3000))
    run = _into_head(["replay", str(log), "--json"], tmp_path)
    assert run.stdout.count("\n") == 1
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr


class _ClosedPipe(io.StringIO):
    def write(self, s: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_audit_json_into_a_closed_pipe_exits_quietly(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["audit", "-f", os.path.join(DATA, "audit-good.yaml"), "--json"]) == 141
    assert "Traceback" not in capsys.readouterr().err


def test_diagnose_takes_the_file_positionally(tmp_path, capsys) -> None:
    log = tmp_path / "rec.jsonl"
    write_log(log, phases(40))
    assert main(["diagnose", str(log), "--json"]) == 0
    by_position = json.loads(capsys.readouterr().out)
    assert main(["diagnose", "--input", str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_position and by_position["replicas"]
    with pytest.raises(SystemExit) as e:
        main(["diagnose"])
    assert e.value.code == 2 and "FILE" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["not a url", "http://exa mple:8000", "ftp://host:21", "http://host:99999", ""])
def test_a_bad_url_is_a_usage_error(url, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--url", url, "--json", "--duration", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage:" in err and "--url" in err, err


def test_json_exits_3_when_no_endpoint_could_be_read(tmp_path) -> None:
    run = subprocess.run([sys.executable, "-m", "tui.cli", "--url", "http://127.0.0.1:9", "--json",
                          "--duration", "1.5", "--interval", "0.5", "--timeout", "0.3"],
                         cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert run.stdout.strip(), run.stderr  # it did report every refresh
    assert run.returncode == 3, (run.returncode, run.stderr)
    assert "no endpoint could be read" in run.stderr


def test_demo_audits_into_its_own_log(tmp_path, monkeypatch) -> None:
    import tui.core.cluster.audit as audit_mod
    import tui.launch

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("KVWATCH_CONFIG", str(tmp_path / "none.toml"))
    paths = []
    real = audit_mod.AuditLog

    def spy(path=None, *a, **kw):
        paths.append(path)
        return real(path, *a, **kw)

    def fake_run(args, source, on_shutdown=None):
        on_shutdown()
        return 0

    monkeypatch.setattr(audit_mod, "AuditLog", spy)
    monkeypatch.setattr(tui.launch, "run", fake_run)
    assert main(["demo", "--replicas", "1"]) == 0
    assert paths and paths[0] is not None
    assert paths[0] != audit_mod.default_path() and "demo" in os.path.basename(str(paths[0]))

"""A config file others can write (or owned by another user) that names the audit log or makes a
production context read-write: warned about, and it fails closed: the run is read-only (until
fixed, or --readwrite) and its audit_log is not used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faultserver import run_cli
from tui.core.config import load_config

RISKY = """audit_log = "{log}"
[contexts."prod-*"]
production = true
readonly = false
"""


def _write(tmp: Path, text: str) -> Path:
    p = tmp / "cfg" / "kvwatch" / "config.toml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


async def test_a_world_writable_config_that_sets_audit_log_is_warned_about_and_fails_closed(tmp_path: Path) -> None:
    evil = tmp_path / "elsewhere.jsonl"
    p = _write(tmp_path, RISKY.format(log=evil))
    os.chmod(p, 0o666)
    cfg = load_config(p)
    assert cfg.broken and cfg.audit_log is None, cfg
    assert any("writable by others" in str(x) for x in cfg.problems), cfg.problems
    run = await run_cli(str(tmp_path), "demo", "--json", "--duration", "1")
    assert "writable by others" in run.err and "read-only" in run.err, run.err[-800:]
    # the same file, private: used as written
    os.chmod(p, 0o600)
    cfg = load_config(p)
    assert not cfg.broken and cfg.audit_log == str(evil) and not cfg.problems


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_config_owned_by_another_user_fails_closed(tmp_path: Path) -> None:
    p = _write(tmp_path, RISKY.format(log=tmp_path / "x.jsonl"))
    os.chmod(p, 0o644)
    os.chown(p, 12345, 12345)
    cfg = load_config(p)
    assert cfg.broken and cfg.audit_log is None
    assert any("owned by another user" in str(x) for x in cfg.problems), cfg.problems


def test_a_world_writable_config_without_risky_settings_is_only_warned_about(tmp_path: Path) -> None:
    p = _write(tmp_path, "refresh_interval = 2.0\n")
    os.chmod(p, 0o666)
    cfg = load_config(p)
    assert not cfg.broken and cfg.refresh_interval == 2.0
    assert any("writable by others" in str(x) for x in cfg.problems), cfg.problems

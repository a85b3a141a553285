"""`kvwatch config example`, saved as the config file as-is, loads with no problem (CLI)."""

from __future__ import annotations

import os
import subprocess
import sys


def _kvwatch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_config_example_as_is_is_a_clean_config(tmp_path):
    env = dict(os.environ)
    example = _kvwatch("config", "example", env=env)
    assert example.returncode == 0
    path = tmp_path / "config.toml"
    path.write_text(example.stdout)
    env["KVWATCH_CONFIG"] = str(path)
    shown = _kvwatch("config", "show", env=env)
    assert shown.returncode == 0 and "problem" not in shown.stdout, shown.stdout + shown.stderr

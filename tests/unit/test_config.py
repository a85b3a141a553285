"""The config file: valid settings applied, every problem located by file and line, defaults kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.core.config import (Config, ContextProfile, EXAMPLE, config_path, dump_config, key_lines, load_config)
from tui.core.diagnosis import Thresholds
from tui.core.history import Windows


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_missing_file_gives_defaults_without_problems(tmp_path):
    cfg = load_config(tmp_path / "nope.toml")
    assert cfg == Config()
    assert cfg.problems == ()


def test_config_path_follows_xdg_and_ignores_relative(tmp_path):
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/h"}) == tmp_path / "kvwatch" / "config.toml"
    assert config_path({"XDG_CONFIG_HOME": "rel/dir", "HOME": "/h"}) == Path("/h/.config/kvwatch/config.toml")
    assert config_path({"HOME": "/h"}) == Path("/h/.config/kvwatch/config.toml")
    assert config_path({"KVWATCH_CONFIG": str(tmp_path / "x.toml"), "XDG_CONFIG_HOME": "/x"}) == tmp_path / "x.toml"


def test_valid_file_is_applied(tmp_path):
    p = write(tmp_path, """
refresh_interval = 2
history_window = 300.5
theme = "kvwatch-light"
screenshot_dir = "~/shots"
audit_log = "/var/log/kvwatch-audit.jsonl"
bell = false

[kubernetes]
context = "staging"
namespace = "inference"
selector = "app=vllm"
port = 8080

[thresholds]
kv_high = 0.95
kv_clear = 0.9
sustain_points = 3
benign_throttle = ["gpu_idle"]

[windows]
rate_s = 20
stale_s = 30

[keys]
pause = "space"
quit = "ctrl+q, f10"

[contexts."prod-*"]
theme = "kvwatch-high-contrast"
readonly = true
production = true

[contexts.prod-special]
theme = "kvwatch-colorblind"
""")
    cfg = load_config(p)
    assert cfg.problems == ()
    assert cfg.refresh_interval == 2.0 and isinstance(cfg.refresh_interval, float)
    assert cfg.history_window == 300.5
    assert cfg.theme == "kvwatch-light"
    assert cfg.screenshot_dir == str(Path("~/shots").expanduser())
    assert cfg.audit_log == "/var/log/kvwatch-audit.jsonl"
    assert cfg.bell is False
    assert (cfg.context, cfg.namespace, cfg.selector, cfg.port) == ("staging", "inference", "app=vllm", 8080)
    assert cfg.thresholds == Thresholds().with_overrides(kv_high=0.95, kv_clear=0.9, sustain_points=3,
                                                         benign_throttle=("gpu_idle",))
    assert cfg.windows == Windows(rate_s=20.0, quantile_s=Windows().quantile_s, stale_s=30.0)
    assert cfg.keys == {"pause": "space", "quit": "ctrl+q,f10"}
    # an exact name wins over an earlier glob; globs match; others get nothing
    assert cfg.profile_for("prod-special") == ContextProfile("prod-special", theme="kvwatch-colorblind")
    assert cfg.profile_for("prod-east") == ContextProfile("prod-*", "kvwatch-high-contrast", True, True)
    assert cfg.profile_for("staging") is None
    assert cfg.history_len(0.5) == 601


def test_syntax_error_reports_line_and_falls_back_to_defaults(tmp_path):
    p = write(tmp_path, 'refresh_interval = 2\ntheme = "kvwatch-light"\n\n[thresholds]\nkv_high = = 0.9\n')
    cfg = load_config(p)
    assert cfg.refresh_interval == Config().refresh_interval and cfg.theme is None  # nothing applied
    [problem] = cfg.problems
    assert problem.path == str(p) and problem.line == 5
    assert str(problem).startswith(f"{p}:5: TOML syntax")
    assert "using defaults" in str(problem)


def test_bad_keys_and_values_are_located_and_only_they_fall_back(tmp_path):
    p = write(tmp_path, """refresh_interval = 0
theme = "kvwatch-light"
colour = "red"

[thresholds]
kv_high = 0.95
kv_hgh = 0.5
sustain_points = 2.5
kv_low = true

[kubernetes]
port = 70000

[windows.rate_s]
x = 1

[keys]
pause = ""
""")
    cfg = load_config(p)
    got = {(pr.line, pr.message.split(":")[0]) for pr in cfg.problems}
    assert got == {(1, "refresh_interval"), (3, "colour"), (7, "thresholds.kv_hgh"),
                   (8, "thresholds.sustain_points"), (9, "thresholds.kv_low"), (12, "kubernetes.port"),
                   (14, "windows.rate_s"), (18, "keys.pause")}
    msgs = {pr.line: pr.message for pr in cfg.problems}
    assert "range 0.05 to 3600" in msgs[1]  # the allowed range, not just "> 0"
    assert "unknown key" in msgs[3] and "refresh_interval" in msgs[3]  # says what is known
    assert "expected" in msgs[8] and "2.5" in msgs[8]
    # the good settings next to the bad ones still apply; the bad ones keep their defaults
    assert cfg.theme == "kvwatch-light"
    assert cfg.thresholds.kv_high == 0.95
    assert cfg.thresholds.sustain_points == Thresholds().sustain_points
    assert cfg.thresholds.kv_low == Thresholds().kv_low
    assert cfg.refresh_interval == 1.0 and cfg.port is None and cfg.keys == {}


def test_a_context_section_with_a_problem_is_read_only(tmp_path):
    p = write(tmp_path, '[contexts."prod-*"]\nproduction = true\nreadonly = "no"\n')
    cfg = load_config(p)
    prof = cfg.profile_for("prod-1")
    assert prof.readonly is True and prof.production is True
    assert any(pr.line == 3 and "readonly" in pr.message for pr in cfg.problems)


def test_kv_clear_above_kv_high_is_refused(tmp_path):
    cfg = load_config(write(tmp_path, "[thresholds]\nkv_high = 0.8\nkv_clear = 0.9\n"))
    assert (cfg.thresholds.kv_high, cfg.thresholds.kv_clear) == (Thresholds().kv_high, Thresholds().kv_clear)
    assert [pr.line for pr in cfg.problems] == [3]


def test_not_utf8_is_reported(tmp_path):
    p = tmp_path / "config.toml"
    p.write_bytes(b'theme = "x"\nbell = \xff\n')
    cfg = load_config(p)
    assert cfg.problems[0].line == 2 and cfg.theme is None


@pytest.mark.parametrize("text,path,line", [
    ('a = 1\n[t]\nb = 2\n', ("t", "b"), 3),
    ('[t.u]\n"q k" = 1\n', ("t", "u", "q k"), 2),
    ('x.y = 1\n', ("x", "y"), 1),
    ('s = """\nfake = 1\n"""\nreal = 2\n', ("real",), 4),
    ('[contexts."prod-*"]\nreadonly = 1\n', ("contexts", "prod-*", "readonly"), 2),
])
def test_key_lines(text, path, line):
    lines = key_lines(text)
    assert lines[path] == line
    assert ("fake",) not in lines


def test_dump_round_trips_and_example_is_valid(tmp_path):
    cfg = load_config(write(tmp_path, EXAMPLE))
    assert cfg.problems == ()
    assert cfg.profile_for("prod-eu").production
    again = load_config(write(tmp_path, dump_config(cfg, {"pause": "p", "quit": "q"})))
    assert again.problems == ()
    for f in ("refresh_interval", "history_window", "theme", "screenshot_dir", "audit_log", "bell", "context",
              "namespace", "selector", "port", "thresholds", "windows", "contexts"):
        assert getattr(again, f) == getattr(cfg, f), f
    assert again.keys == {"screenshot": "ctrl+s,f12", "pause": "p", "quit": "q"}

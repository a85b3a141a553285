"""CLI wiring of the operator features: config commands, flags over config, replay errors, help."""

from __future__ import annotations

import tomllib

import pytest

from themes import THEMES
from tui.cli import THEME_NAMES, build_parser, main
from tui.core.record.writer import DEFAULT_MAX_BYTES, DEFAULT_ROTATE
from tui.launch import apply_config


@pytest.fixture
def cfg_file(tmp_path, monkeypatch):
    p = tmp_path / "config.toml"
    monkeypatch.setenv("KVWATCH_CONFIG", str(p))
    return p


def test_config_path_and_show(cfg_file, capsys):
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(cfg_file)
    cfg_file.write_text('refresh_interval = 3\n[keys]\npause = "ctrl+o"\n')  # space: the logs screen follows/pauses with it
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    data = tomllib.loads(out)  # what `show` prints is itself a valid config
    assert data["refresh_interval"] == 3.0
    assert data["keys"]["pause"] == "ctrl+o" and data["keys"]["quit"] == "q"  # every binding id listed
    assert data["thresholds"]["kv_high"] == 0.9


def test_config_show_reports_problems_with_line_and_exit_code(cfg_file, capsys):
    cfg_file.write_text('bell = true\nbell2 = 1\n')
    assert main(["config", "show"]) == 1
    cap = capsys.readouterr()
    assert f"{cfg_file}:2: bell2: unknown key" in cap.err
    assert tomllib.loads(cap.out)["bell"] is True


def test_flags_override_the_config_and_fill_in_from_it(cfg_file, tmp_path):
    cfg_file.write_text(f'refresh_interval = 5\nscreenshot_dir = "{tmp_path}/shots"\ntheme = "kvwatch-light"\n'
                        '[kubernetes]\nnamespace = "inference"\n'
                        '[contexts."prod-*"]\nreadonly = true\n')
    args = build_parser().parse_args(["demo"])
    cfg = apply_config(args)
    assert args.interval == 5.0 and args.screenshot_dir == f"{tmp_path}/shots"
    assert cfg.theme == "kvwatch-light" and args.theme is None  # the app resolves theme precedence
    args = build_parser().parse_args(["demo", "--interval", "1", "--screenshot-dir", "/x"])
    apply_config(args)
    assert args.interval == 1.0 and args.screenshot_dir == "/x"
    # Kubernetes defaults fill only what was not given; a read-only context forces --readonly
    import argparse
    ns = argparse.Namespace(namespace=None, context="prod-eu", selector="app=x", readonly=False)
    apply_config(ns)
    assert ns.namespace == "inference" and ns.selector == "app=x" and ns.readonly is True


def test_help_states_the_recording_bound_and_the_themes(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps at hyphens
    cap = DEFAULT_MAX_BYTES // (1024 * 1024)
    assert f"at {cap} MiB FILE rotates to FILE.1 and at most {DEFAULT_ROTATE} old files are kept" in out
    assert THEME_NAMES == tuple(THEMES)
    for name in THEMES:
        assert name in out


def test_replay_of_a_missing_empty_or_garbage_file_says_why(tmp_path, capsys, cfg_file):
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["replay", str(empty)]) == 1
    assert "no scrapes" in capsys.readouterr().err
    junk = tmp_path / "junk.jsonl"
    junk.write_text('not json\n{"ts": 1, "replica": "a"}\n')
    assert main(["replay", str(junk), "--json"]) == 1
    err = capsys.readouterr().err
    assert f"{junk}:1: malformed JSON" in err and f"{junk}:2:" in err
    assert main(["replay", str(junk), "--speed", "0"]) == 2


def test_record_to_an_unwritable_place_is_a_clear_error(tmp_path, capsys, cfg_file):
    bad = tmp_path / "missing-dir" / "rec.jsonl"
    assert main(["demo", "--json", "--duration", "1", "--record", str(bad)]) == 2
    assert f"cannot record to {bad}" in capsys.readouterr().err

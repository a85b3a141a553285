"""Issue 10 defects 3, 10, 12: a broken config fails closed (read-only, visibly), numbers are
checked against ranges, key remaps onto another action's key are refused, messages are inert."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tui.bindings import checked_keymap
from tui.core.config import dump_config, load_config
from tui.core.monitor import Monitor


def write(tmp: Path, text: str) -> Path:
    p = tmp / "config.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text", ['x = = 1\n[contexts."prod-*"]\nreadonly = true\n', "theme = \"\xff\"\n"])
def test_a_file_that_cannot_be_parsed_is_broken(tmp_path: Path, text: str) -> None:
    p = tmp_path / "config.toml"
    p.write_bytes(text.encode("latin-1"))
    cfg = load_config(p)
    assert cfg.broken and "read-only" in str(cfg.problems[0])
    assert not cfg.with_readwrite().broken
    assert not load_config(tmp_path / "missing.toml").broken  # no file is not a broken file


def test_an_unreadable_file_is_broken(tmp_path: Path) -> None:
    p = write(tmp_path, "")
    p.chmod(0)
    cfg = load_config(p)
    if not cfg.problems:
        pytest.skip("running as root: the file is readable anyway")
    assert cfg.broken


def test_broken_config_makes_the_run_and_the_header_readonly(tmp_path: Path, monkeypatch, capsys) -> None:
    from tui.app import KvwatchApp
    from tui.launch import apply_config

    monkeypatch.setenv("KVWATCH_CONFIG", str(write(tmp_path, "refresh_interval = = 1\n")))
    args = argparse.Namespace(readonly=False, readwrite=False, context=None)
    cfg = apply_config(args)
    assert args.readonly is True
    assert re.search(r"read-only.*--readwrite", capsys.readouterr().err)
    app = KvwatchApp(Monitor(), 1.0, readonly=args.readonly, config=cfg)
    assert any("CONFIG" in f for f in app.flags())  # the header says why
    rw = argparse.Namespace(readonly=False, readwrite=True, context=None)
    apply_config(rw)
    assert rw.readonly is False


def test_readwrite_lifts_only_a_forced_readonly(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, '[contexts."a"]\nreadonly = true\n[contexts."b"]\nproduction = 3\n'))
    rw = cfg.with_readwrite()
    assert cfg.profile_for("b").readonly and not rw.profile_for("b").readonly
    assert rw.profile_for("a").readonly  # said explicitly: stays


@pytest.mark.parametrize("key, value, line", [("history_window", "1e300", 1), ("refresh_interval", "0.001", 1),
                                              ("thresholds.kv_high", "1.5", 2), ("windows.stale_s", "1e12", 2),
                                              ("thresholds.gpu_mem_high_pct", "250", 2)])
def test_numbers_out_of_range_are_refused_with_line_and_range(tmp_path: Path, key: str, value: str,
                                                              line: int) -> None:
    table, _, name = key.rpartition(".")
    text = (f"[{table}]\n" if table else "") + f"{name} = {value}\n"
    cfg = load_config(write(tmp_path, text))
    (prob,) = cfg.problems
    assert prob.line == line and key in prob.message and re.search(r"range \S+ to \S+", prob.message)
    assert not cfg.broken
    assert cfg.history_len(1.0) < 10**6  # the bad value was not used


def test_key_remapped_onto_another_actions_key_is_refused(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, '[keys]\npause = "q"\nhelp = "h"\n'))
    keys, problems = checked_keymap(cfg)
    assert keys == {"help": "h"}
    (p,) = problems
    assert p.line == 2 and "quit" in p.message
    swap = load_config(write(tmp_path, '[keys]\ndrain = "l"\nlogs = "ctrl+d"\n'))
    assert checked_keymap(swap) == ({"drain": "l", "logs": "ctrl+d"}, [])  # a swap is fine


def test_config_messages_and_dump_are_inert(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, '"\\u001b[31mevil" = 1\n[keys]\n"x\\u001b]0;t\\u0007" = "f9"\n'))
    assert cfg.problems and not any(re.search(r"[\x1b\x07]", str(p)) for p in cfg.problems)
    assert not re.search(r"[\x1b\x07]", dump_config(cfg, {"pause": "p"}))


def test_the_default_keys_meet_no_conflict() -> None:
    from tui.actions import remap_problems

    assert remap_problems({}) == []  # the defaults alone
    assert "pause" in dict(remap_problems({"pause": "q"}))  # and the check can fire


def test_every_default_threshold_is_inside_its_range() -> None:
    from dataclasses import fields

    from tui.core.config_ranges import THRESHOLD_RANGES
    from tui.core.diagnosis import Thresholds

    t = Thresholds()
    numeric = [f.name for f in fields(Thresholds) if not isinstance(getattr(t, f.name), tuple)]
    for name in numeric:
        lo, hi = THRESHOLD_RANGES.get(name, (0, 1e9))
        assert lo <= getattr(t, name) <= hi, name

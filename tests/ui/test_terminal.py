"""Terminals: NO_COLOR emits no colour at all, TERM=linux gets ASCII glyphs (real pty runs)."""

from __future__ import annotations

import os

import pytest

from tests.ui.ptyrun import colour_sgr, run_in_pty, scripted_app
from tui.terminal import detect


@pytest.mark.parametrize("env,encoding,no_color,ascii_only", [
    ({"TERM": "xterm-256color"}, "utf-8", False, False),
    ({"TERM": "xterm-256color", "NO_COLOR": ""}, "utf-8", True, False),  # any value counts
    ({"TERM": "screen-256color", "NO_COLOR": "1"}, "UTF-8", True, False),
    ({"TERM": "tmux-256color"}, "utf-8", False, False),
    ({"TERM": "linux"}, "utf-8", False, True),
    ({"TERM": "dumb"}, "utf-8", True, True),
    ({"TERM": "vt100"}, "utf-8", True, True),
    ({"TERM": "xterm"}, "ANSI_X3.4-1968", False, True),  # C locale over SSH
])
def test_detect(env, encoding, no_color, ascii_only):
    t = detect(env, encoding)
    assert (t.no_color, t.ascii) == (no_color, ascii_only)
    assert bool(t.why) == (no_color or ascii_only)


def _env(**kw) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLORTERM", "TEXTUAL_COLOR_SYSTEM")}
    env.update(KVWATCH_CONFIG=os.devnull + ".none", LANG="C.UTF-8", **kw)
    return env


def test_no_color_emits_no_colour_escape_sequences():
    code = scripted_app(6)
    drawn = (b"kv-pressure", b"vllm-01")  # the fleet drawn with a verdict: the state waited for
    coloured = run_in_pty(code, 100, 30, 60, _env(TERM="xterm-256color"), until=drawn)
    assert coloured.exit_status == 0
    assert colour_sgr(coloured.output)  # the check can see colours when there are some
    plain = run_in_pty(code, 100, 30, 60, _env(TERM="xterm-256color", NO_COLOR="1"), until=drawn)
    assert plain.exit_status == 0
    assert b"kv-pressure" in plain.output and b"vllm-01" in plain.output  # it did draw the fleet
    assert colour_sgr(plain.output) == []
    assert b"\x1b[1;7m" in plain.output or b"\x1b[7m" in plain.output  # cursor row: reverse video


def test_term_linux_gets_ascii_glyphs_through_the_cli():
    code = 'import sys\nfrom tui.cli import main\nsys.exit(main(["demo", "--replicas", "3"]))'
    run = run_in_pty(code, 100, 30, 60, _env(TERM="linux"), until=(b"llama", b"Quit"))
    assert run.exit_status == 0
    text = run.output.decode("utf-8")
    assert "llama" in text and ("healthy" in text or "unknown" in text)
    assert sorted({ch for ch in text if ord(ch) > 126}) == []

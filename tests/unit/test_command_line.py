"""The `:` prompt parses to data (tui/command_line.py), apart from acting on it."""

from __future__ import annotations

import pytest

from tui.command_line import Command, parse_command


@pytest.mark.parametrize(("line", "want"), [
    (":ctx staging", Command("ctx", "staging", "ctx")),
    ("context", Command("ctx", None, "context")),
    ("  :NS other extra ", Command("ns", "other", "ns")),
    (":q!", Command("quit", None, "q!")),
    ("ev kube-system", Command("events", "kube-system", "ev")),
    (":rollout llama", Command("rollout", "llama", "rollout")),
    (":frobnicate x", Command("unknown", "x", "frobnicate")),
])
def test_parse_command(line: str, want: Command) -> None:
    assert parse_command(line) == want


@pytest.mark.parametrize("line", ["", "   ", ":"])
def test_an_empty_line_is_no_command(line: str) -> None:
    assert parse_command(line) is None


def test_which_commands_need_a_cluster() -> None:
    assert {n for n in ("quit", "events", "rollout", "ctx", "ns", "unknown")
            if Command(n, None, n).needs_cluster} == {"events", "rollout", "ctx", "ns"}

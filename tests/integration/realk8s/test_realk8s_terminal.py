"""kvwatch's mitigation commands on a terminal, against the real API server: the confirmation
prompt never lands in stdout (it is one JSON document with --json), and a refusal is said once."""

from __future__ import annotations

import json

from .common import Cluster, kvwatch_on_tty


def test_json_without_yes_prompts_on_the_terminal_and_keeps_stdout_one_document(cluster: Cluster) -> None:
    cluster.apply_example("llama")
    cluster.rollout_wait("deployment/llama")
    rc, tty, stdout = kvwatch_on_tty(cluster, "scale", "deployment/llama", "--replicas", "3", "--json",
                                     answer="n\n", stdout_tty=False, wait_for_text="[y/N]", timeout=30)
    assert "apply? [y/N]" in tty, (rc, tty, stdout)
    assert "[y/N]" not in stdout
    doc = json.loads(stdout)  # one JSON document, nothing before it
    assert rc == 1 and doc["refused"] == "not confirmed", doc
    assert cluster.get("deployment", "llama")["spec"]["replicas"] == 2


def test_a_refusal_is_said_once_on_a_terminal(cluster: Cluster) -> None:
    cluster.apply_example("llama")
    rc, tty, _ = kvwatch_on_tty(cluster, "scale", "deployment/llama", "--replicas", "-1", "--yes")
    assert rc == 1
    lines = [x for x in tty.splitlines() if x.startswith("refused:")]
    assert len(lines) == 1, tty

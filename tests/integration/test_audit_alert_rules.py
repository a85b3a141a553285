"""`kvwatch audit` against the cluster: a prevention finding when kvwatch's alerting rules are not installed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest_asyncio
import yaml

from tests.integration.kube_env import NS, Env, make_env
from tui.cli import main


@pytest_asyncio.fixture
async def env(tmp_path: Path):
    async for e in make_env(tmp_path):
        yield e


def _kubeconfig(env: Env, tmp_path: Path, monkeypatch) -> list[str]:
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: emu, cluster: {{server: '{str(env.srv.url).rstrip('/')}'}}}}]\n"
        "users: [{name: sre, user: {token: not-a-secret}}]\n"
        f"contexts: [{{name: emu, context: {{cluster: emu, user: sre, namespace: {NS}}}}}]\n"
        "current-context: emu\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return ["--kubeconfig", str(kc)]


async def _audit(kc: list[str], capsys, *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    rc = await asyncio.to_thread(main, ["audit", *kc, "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def _finding(doc: dict) -> dict:
    (c,) = [c for c in doc["cluster"] if c["id"] == "alert-rules"]
    return c


async def test_audit_reports_missing_alert_rules_and_sees_them_once_installed(env: Env, tmp_path, monkeypatch,
                                                                              capsys) -> None:
    kc = _kubeconfig(env, tmp_path, monkeypatch)
    # no Prometheus Operator: kvwatch cannot see a plain Prometheus' rule_files, so it says so
    rc, doc = await _audit(kc, capsys)
    assert _finding(doc)["status"] == "info" and "no PrometheusRule API" in _finding(doc)["detail"]

    env.emu.install_crd("prometheusrules")
    other = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
             "metadata": {"name": "node-rules", "namespace": "monitoring"},
             "spec": {"groups": [{"name": "node", "rules": [{"alert": "NodeDown", "expr": "up == 0"}]}]}}
    env.emu.add(other)
    rc, doc = await _audit(kc, capsys)
    assert _finding(doc)["status"] == "warn" and "kvwatch rules" in _finding(doc)["detail"]
    rc_strict, _ = await _audit(kc, capsys, "--strict")
    assert rc_strict == 1  # a prevention finding fails a strict audit

    capsys.readouterr()
    assert await asyncio.to_thread(main, ["rules", "--format", "prometheusrule", "--namespace", "monitoring",
                                          "--config", str(tmp_path / "none.toml")]) == 0
    env.emu.add(yaml.safe_load(capsys.readouterr().out))
    rc, doc = await _audit(kc, capsys)
    assert _finding(doc)["status"] == "pass" and "monitoring/kvwatch" in _finding(doc)["detail"]


async def test_a_denied_listing_is_unknown_not_missing(env: Env, tmp_path, monkeypatch, capsys) -> None:
    kc = _kubeconfig(env, tmp_path, monkeypatch)
    env.emu.install_crd("prometheusrules")
    env.emu.fail("GET", r"/prometheusrules", status=403, message="prometheusrules is forbidden")
    rc, doc = await _audit(kc, capsys)
    assert _finding(doc)["status"] == "skip" and "403" in _finding(doc)["detail"]
    out = await asyncio.to_thread(main, ["audit", *kc])
    assert out in (0, 1)
    assert "cluster: skip" in capsys.readouterr().out

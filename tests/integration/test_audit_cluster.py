"""`kvwatch audit` against Deployments in the Kubernetes emulator, through the official client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest_asyncio
from kubernetes.client.exceptions import ApiException

from tests.integration.kube_env import NS, Env, make_env
from tests.k8s_emulator import client_for, vllm_deployment
from tui.core.audit import audit_all, fetch_workloads


@pytest_asyncio.fixture
async def env(tmp_path: Path):
    async for e in make_env(tmp_path):
        good = vllm_deployment("tidy", args=["--max-num-seqs", "16", "--max-num-batched-tokens", "4096",
                                             "--max-model-len", "8192", "--gpu-memory-utilization", "0.7"])
        good["metadata"]["annotations"] = {"kvwatch.io/kv-cache-tokens": "91056",
                                           "kvwatch.io/max-input-tokens": "4096",
                                           "kvwatch.io/max-output-tokens": "1024",
                                           "kvwatch.io/concurrency-limit": "16",
                                           "kvwatch.io/gpu-memory-target": "0.7"}
        e.emu.add(good)
        e.emu.add({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": NS, "labels": {"app": "web"}},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}})
        yield e


async def test_audit_lists_and_checks_vllm_workloads(env: Env) -> None:
    api = client_for(env.srv)
    objs = await asyncio.to_thread(fetch_workloads, api, NS)
    names = {o["metadata"]["name"] for o in objs}
    assert {"llama", "tidy", "web"} <= names
    audits = {a.name: a for a in audit_all(objs, only_vllm=True)}
    assert set(audits) == {"llama", "tidy"}  # nginx is not vLLM
    assert audits["llama"].failed  # 0.9 gpu-memory-utilization, no batched-token bound
    tidy = {c.id: c.status for c in audits["tidy"].checks}
    assert tidy["gpu-memory-utilization"] == "pass" and tidy["concurrency-fits"] == "pass"
    assert not env.writes()  # the audit only reads


async def test_audit_selector_and_errors(env: Env) -> None:
    api = client_for(env.srv)
    objs = await asyncio.to_thread(fetch_workloads, api, NS, "app=tidy")
    assert [o["metadata"]["name"] for o in objs] == ["tidy"]
    env.emu.fail("GET", r"/deployments", status=403, message="deployments is forbidden")
    try:
        await asyncio.to_thread(fetch_workloads, api, NS)
    except ApiException as e:
        assert e.status == 403
    else:
        raise AssertionError("expected 403")


async def test_cli_against_the_cluster_exit_codes(env: Env, tmp_path: Path, monkeypatch, capsys) -> None:
    from tui.cli import main

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: emu, cluster: {{server: '{str(env.srv.url).rstrip('/')}'}}}}]\n"
        "users: [{name: sre, user: {token: not-a-secret}}]\n"
        f"contexts: [{{name: emu, context: {{cluster: emu, user: sre, namespace: {NS}}}}}]\n"
        "current-context: emu\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    kc = ["--kubeconfig", str(kubeconfig)]
    assert await asyncio.to_thread(main, ["audit", *kc, "-l", "app=tidy"]) == 0
    assert "Deployment/serving/tidy" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["audit", *kc]) == 1
    out = capsys.readouterr().out
    assert "Deployment/serving/llama" in out and "web" not in out
    env.emu.fail("GET", r"/deployments", status=403, message="deployments is forbidden")
    assert await asyncio.to_thread(main, ["audit", *kc]) == 2
    assert "forbidden" in capsys.readouterr().err

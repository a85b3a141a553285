"""`kvwatch audit` over realistic manifests: each check, table, --json and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.cli import main
from tui.core.audit import audit_workload, load_manifests

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def no_user_config(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def checks(a):
    return {c.id: c for c in a.checks}


def test_good_deployment_passes_every_check():
    (obj,) = load_manifests((DATA / "audit-good.yaml").read_text())  # the Service is skipped
    a = audit_workload(obj)
    assert not a.failed and a.container == "vllm"
    c = checks(a)
    assert {k for k, v in c.items() if v.status == "pass"} >= {
        "max-num-seqs-set", "max-num-batched-tokens-set", "max-model-len-set", "gpu-memory-utilization",
        "concurrency-fits", "limits-documented", "metrics-port", "readiness-probe"}
    # 91,056 x 0.9 / (4,096 + 1,024) = 16.0 -> max-num-seqs 16 fits
    assert "16 vs 16 that fit" in c["concurrency-fits"].detail


def test_bad_manifests_fail_the_right_checks():
    defaults, long = (audit_workload(o) for o in load_manifests((DATA / "audit-bad.yaml").read_text()))
    c = checks(defaults)
    assert defaults.container == "server"  # found by its command, not its name
    for k in ("max-num-seqs-set", "max-num-batched-tokens-set", "max-model-len-set", "gpu-memory-utilization",
              "metrics-port"):
        assert c[k].status == "fail", k
    assert "0.9 (engine default) > 0.7" in c["gpu-memory-utilization"].detail
    assert c["concurrency-fits"].status == "skip" and c["limits-documented"].status == "warn"
    c = checks(long)
    assert long.kind == "StatefulSet"
    assert c["max-num-seqs-set"].status == "pass" and "$MAX_SEQS" in c["max-num-seqs-set"].detail
    # long context: <= 0.6 applies
    assert c["gpu-memory-utilization"].status == "fail" and "0.65 > 0.6 (long context)" in c["gpu-memory-utilization"].detail
    assert c["prefill-features"].status == "warn"
    assert c["metrics-port"].status == "fail" and "listens on 8080" in c["metrics-port"].detail
    assert c["concurrency-fits"].status == "skip"


def test_concurrency_check_with_capacity_from_the_command_line(tmp_path, capsys):
    code = main(["audit", "--file", str(DATA / "audit-bad.yaml"), "--kv-cache-tokens", "200000", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    long = next(w for w in doc["workloads"] if w["name"] == "qwen-long")
    fit = next(c for c in long["checks"] if c["id"] == "concurrency-fits")
    # 200,000 x 0.9 / 32,000 = 5 fit, 64 configured -> fail on the documented limits
    assert fit["status"] == "fail" and "64 vs 5 that fit" in fit["detail"]


def test_capacity_from_model_config_and_gpu_memory(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                               "hidden_size": 4096, "torch_dtype": "bfloat16"}))
    code = main(["audit", "-f", str(DATA / "audit-good.yaml"), "--model-config", str(cfg)])
    assert code == 0  # annotation capacity wins; the rest passes


def test_table_output_and_exit_codes(capsys):
    assert main(["audit", "--file", str(DATA / "audit-good.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Deployment/inference/llama-chat" in out and "passed" in out and "0 failed" in out
    assert main(["audit", "--file", str(DATA / "audit-good.yaml"), "--file", str(DATA / "audit-bad.yaml")]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "3 workload(s) audited, 2 failed" in out


def test_strict_turns_warnings_into_failures(tmp_path, capsys):
    text = (DATA / "audit-good.yaml").read_text().replace("          readinessProbe:\n            httpGet: {path: /health, port: 8000}\n", "")
    f = tmp_path / "no-probe.yaml"
    f.write_text(text)
    assert main(["audit", "-f", str(f)]) == 0
    capsys.readouterr()
    assert main(["audit", "-f", str(f), "--strict", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["strict"] and doc["warnings"] and not doc["failed"] and doc["exit_code"] == 1


@pytest.mark.parametrize("content,msg", [("kind: Deployment\nmetadata: [\n", "not valid YAML"),
                                         ("kind: ConfigMap\n", "no vLLM Deployments")])
def test_unreadable_or_empty_input_exits_2(tmp_path, capsys, content, msg):
    f = tmp_path / "x.yaml"
    f.write_text(content)
    assert main(["audit", "-f", str(f)]) == 2
    assert msg in capsys.readouterr().err
    assert main(["audit", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_workload_without_vllm_is_reported_not_crashed():
    obj = {"kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}
    a = audit_workload(obj)
    assert a.failed and "no container runs vLLM" in a.error

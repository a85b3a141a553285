"""`kvwatch drain | scale | edit-args | rollout` as a black box against the emulator: --dry-run
--json prints the plan and the exact requests and sends nothing; without it the same requests are
sent (and the emulator saw exactly those); --readonly refuses with exit 1 and sends nothing; a
production context needs --confirm NAME with --yes; usage errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.integration.test_kube_cli import TOKEN, kubeconfig, kvwatch
from tests.ui.kube_app import page


async def cli(env: Env, tmp: Path, *argv: str, **extra: str) -> tuple[int, dict | None, str]:
    kc = kubeconfig(tmp / "kubeconfig", str(env.srv.url).rstrip("/"))
    rc, out, err = await kvwatch(tmp, *argv, "--kubeconfig", str(kc), "-n", NS, "--json", timeout=60, **extra)
    assert TOKEN not in out + err
    return rc, (json.loads(out.strip().splitlines()[-1]) if out.strip() else None), err


FM = "?fieldManager=kvwatch"


def audit(tmp: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp / "state" / "kvwatch" / "audit.jsonl").read_text().splitlines()]


def sent(env: Env) -> list[dict]:
    """The emulator's record of the mutating requests (dry runs excluded), as the CLI reports them."""
    return [{"method": c.method, "path": c.path, "body": c.body} for c in env.emu.mutating_calls()]


async def test_scale_dry_run_plans_then_applies_exactly_those_requests(env: Env, tmp_path: Path) -> None:
    rc, doc, err = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--dry-run")
    assert rc == 0, err
    want = [{"method": "PATCH", "path": f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale?fieldManager=kvwatch",
             "body": [{"op": "test", "path": "/spec/replicas", "value": 2}, {"op": "replace", "path": "/spec/replicas", "value": 3}]}]
    assert doc["action"] == "scale" and doc["target"] == "deployment/llama" and doc["refused"] is None
    assert doc["requests"] == want and env.emu.mutating_calls() == []
    rc, doc, err = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--yes")
    assert rc == 0 and doc["result"]["ok"], err
    assert doc["requests"] == want  # byte for byte what the dry run listed, query included
    assert [(r["method"], r["path"].split("?")[0]) for r in doc["requests"]] == [(r["method"], r["path"]) for r in sent(env)]
    assert env.deployment()["spec"]["replicas"] == 3
    assert [(a["action"], a["result"]["ok"]) for a in audit(tmp_path)] == [("scale", True)]  # the same audit log as the keys


async def test_readonly_refuses_every_action_and_sends_nothing(env: Env, tmp_path: Path) -> None:
    pod = env.pods()[0]["metadata"]["name"]
    for argv in (("scale", "deployment/llama", "--replicas", "3", "--yes"),
                 ("edit-args", "deployment/llama", "--set", "max-num-seqs=32", "--yes"),
                 ("rollout", "restart", "deployment/llama", "--yes"),
                 ("drain", pod, "--yes")):
        rc, doc, err = await cli(env, tmp_path, *argv, "--readonly")
        assert rc == 1 and doc["refused"] and "read-only" in doc["refused"], (argv, doc, err)
        assert doc["requests"] == []
    # the same flag before the subcommand counts too
    rc, doc, _ = await cli(env, tmp_path, "--readonly", "scale", "deployment/llama", "--replicas", "3", "--yes")
    assert rc == 1 and "read-only" in doc["refused"]
    assert env.emu.mutating_calls() == []
    rc, doc, _ = await cli(env, tmp_path, "rollout", "status", "deployment/llama", "--readonly")
    assert rc == 0 and doc["result"]["state"] == "done"  # reads still work


async def test_edit_args_and_rollout_undo_and_status(env: Env, tmp_path: Path) -> None:
    rc, doc, err = await cli(env, tmp_path, "edit-args", "deployment/llama", "--set", "max-num-seqs=32", "--dry-run")
    assert rc == 0 and doc["requests"][0]["method"] == "PATCH" and doc["requests"][0]["path"] == f"/apis/apps/v1/namespaces/{NS}/deployments/llama?fieldManager=kvwatch"
    assert {"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": ["--max-num-seqs", "32", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192", "--port", "8000"]} in doc["requests"][0]["body"]
    assert env.emu.mutating_calls() == []
    rc, doc, err = await cli(env, tmp_path, "edit-args", "llama", "--set", "max-num-seqs=32", "--yes")
    assert rc == 0, err
    assert env.vllm()["args"][1] == "32" and [r["path"].split("?")[0] for r in doc["requests"]] == [r["path"] for r in sent(env)]
    rc, doc, _ = await cli(env, tmp_path, "rollout", "status", "deployment/llama")
    assert rc == 0 and doc["action"] == "rollout-status" and doc["result"]["state"] == "done" and doc["requests"] == []
    rc, doc, err = await cli(env, tmp_path, "rollout", "undo", "deployment/llama", "--yes")
    assert rc == 0 and doc["action"] == "rollback", err
    assert env.vllm()["args"][1] == "256"
    # refused by the plan itself (a roll back with no earlier revision of a new Deployment): exit 1, nothing sent
    env.emu.calls.clear()
    rc, doc, _ = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "-1", "--yes")
    assert rc == 1 and "whole number" in doc["refused"] and env.emu.mutating_calls() == []


async def test_drain_cli_plan_then_done_with_every_pod_accounted_for(env: Env, tmp_path: Path) -> None:
    pods = [p["metadata"]["name"] for p in env.pods()]
    for p in pods:
        env.emu.pod_metrics[(NS, p)] = page(0, 0, 0.1)
    target = pods[0]
    rc, doc, err = await cli(env, tmp_path, "drain", target, "--dry-run")
    assert rc == 0, err
    assert doc["plan"]["data"]["mechanism"] == "scale-down" and "Service llama" in doc["plan"]["diff"]
    paths = [(r["method"], r["path"]) for r in doc["requests"]]
    assert paths == [
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale{FM}"),
        ("PATCH", f"/api/v1/namespaces/{NS}/pods/{target}{FM}"),
        ("PATCH", f"/api/v1/namespaces/{NS}/pods/{target}{FM}"),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/llama/scale{FM}"),
    ]
    planned = doc["requests"]
    assert env.emu.mutating_calls() == []
    rc, doc, err = await cli(env, tmp_path, "drain", target, "--yes", "--poll", "0.05")
    assert rc == 0, err + json.dumps(doc)
    assert doc["requests"] == planned  # byte for byte, bodies included
    assert [(r["method"], r["path"].split("?")[0]) for r in doc["requests"]] == [(m, p.split("?")[0]) for m, p in paths] == [(r["method"], r["path"]) for r in sent(env)]
    pods_after = doc["result"]["pods"]
    assert pods_after["removed"] == [target] and len(pods_after["created"]) == 1 and pods_after["replicas"] == 2
    assert env.deployment()["spec"]["replicas"] == 2 and env.emu.deleted == [(NS, target, 60)]


async def test_production_needs_confirm_with_yes_and_usage_errors_exit_2(env: Env, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg" / "kvwatch"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text('[contexts."staging"]\nproduction = true\n')
    rc, doc, _ = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--yes")
    assert rc == 1 and "--confirm llama" in doc["refused"] and env.emu.mutating_calls() == []
    rc, doc, _ = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--yes", "--confirm", "other")
    assert rc == 1 and env.emu.mutating_calls() == []
    rc, doc, err = await cli(env, tmp_path, "scale", "deployment/llama", "--replicas", "3", "--yes", "--confirm", "llama")
    assert rc == 0, err
    assert env.deployment()["spec"]["replicas"] == 3
    assert [(a["action"], a["result"]["ok"]) for a in audit(tmp_path)] == [("scale", False), ("scale", False), ("scale", True)]
    for argv in (("scale", "pod/x", "--replicas", "1"), ("edit-args", "llama", "--set", "max-num-seqs"), ("rollout", "status", "cronjob/x")):
        rc, doc, err = await cli(env, tmp_path, *argv)
        assert rc == 2 and doc is None and err.startswith("kvwatch: "), (argv, err)
    rc, _, err = await cli(env, tmp_path, "scale", "deployment/llama")
    assert rc == 2 and "--replicas" in err

"""`kvwatch` in Kubernetes mode from the command line: kubeconfig discovery, clear one-line errors
(exit 2) when there is nothing to connect to, and the headless `--json` mode over the emulator with
each replica named by its pod. The token in the kubeconfig never appears in any output."""

from __future__ import annotations

from itertools import pairwise
import asyncio
import json
import os
import sys
from pathlib import Path

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.kube_app import page

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cr3t-token-value"


def kubeconfig(path: Path, url: str) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "sre", "user": {"token": TOKEN}}],
        "contexts": [{"name": "staging", "context": {"cluster": "emu", "user": "sre", "namespace": NS}}],
        "current-context": "staging",
    }))
    return path


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
    return {**keep, "HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "cfg"), "XDG_STATE_HOME": str(tmp / "state"),
            "NO_COLOR": "1", **extra}


async def kvwatch(tmp: Path, *argv: str, timeout: float = 30.0, **env_extra: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui.cli", *argv, cwd=ROOT, env=clean_env(tmp, **env_extra),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(), err.decode()


async def test_json_mode_names_replicas_by_pod(env: Env, tmp_path: Path) -> None:
    pods = sorted(p["metadata"]["name"] for p in env.pods())
    for i, p in enumerate(pods):
        env.emu.pod_metrics[(NS, p)] = page(10 + i, i, 0.5)
    kc = kubeconfig(tmp_path / "kubeconfig", str(env.srv.url).rstrip("/"))
    rc, out, err = await kvwatch(tmp_path, "--kubeconfig", str(kc), "-n", NS, "--json", "--duration", "1.5",
                                 "--interval", "0.5")
    assert rc == 0, err
    frames = [json.loads(line) for line in out.splitlines()]
    assert frames and "staging/serving: 2 vLLM pods via proxy" in frames[-1]["source"]
    last = {r["name"]: r for r in frames[-1]["replicas"]}
    assert sorted(last) == pods
    assert [last[p]["running"] for p in pods] == [10.0, 11.0] and all(last[p]["group"] == "llama" for p in pods)
    assert any("/proxy/metrics" in c.path for c in env.emu.calls)
    assert TOKEN not in out + err


async def test_no_kubeconfig_and_bad_files_are_one_line_errors(env: Env, tmp_path: Path) -> None:
    rc, out, err = await kvwatch(tmp_path, "--json", "--duration", "1")
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "nothing to watch" in err and "kvwatch demo" in err
    rc, _, err = await kvwatch(tmp_path, "--kubeconfig", str(tmp_path / "missing"))
    assert rc == 2 and err.strip() == f"kvwatch: --kubeconfig {tmp_path / 'missing'}: no such file"
    bad = tmp_path / "bad"
    bad.write_text(f"users: [{{name: x, user: {{token: {TOKEN}}}}}]\nnot: [valid\n")
    rc, _, err = await kvwatch(tmp_path, "--kubeconfig", str(bad))
    assert rc == 2 and err.startswith("kvwatch: cannot load Kubernetes config") and len(err.strip().splitlines()) == 1
    kc = kubeconfig(tmp_path / "kubeconfig", str(env.srv.url).rstrip("/"))
    rc, _, err = await kvwatch(tmp_path, "--kubeconfig", str(kc), "--context", "nope")
    assert rc == 2 and "no context 'nope' in kubeconfig" in err
    assert TOKEN not in err


async def test_proxy_budget_flags_reach_the_scrapes(env: Env, tmp_path: Path) -> None:
    for i, p in enumerate(sorted(p["metadata"]["name"] for p in env.pods())):
        env.emu.pod_metrics[(NS, p)] = page(10 + i, i, 0.5)
    kc = kubeconfig(tmp_path / "kubeconfig", str(env.srv.url).rstrip("/"))
    rc, _, err = await kvwatch(tmp_path, "--kubeconfig", str(kc), "--proxy-rps", "0", "--json")
    assert rc == 2 and "--proxy-rps" in err
    rc, out, err = await kvwatch(tmp_path, "--kubeconfig", str(kc), "-n", NS, "--json", "--duration", "2",
                                 "--interval", "0.5", "--proxy-rps", "4", "--proxy-concurrency", "1")
    assert rc == 0, err
    starts = sorted(c.at for c in env.emu.calls if "/proxy/" in c.path)
    assert len(starts) >= 3 and min(b - a for a, b in pairwise(starts)) >= 0.2  # 1/4 s apart, with jitter
    assert env.emu.proxy_inflight_max == 1

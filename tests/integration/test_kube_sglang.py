"""SGLang in Kubernetes through the official client: discovery of an SGLang Deployment (no
selector: found by its container), and the args edit in SGLang's own knobs with an exact diff."""

from __future__ import annotations

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.k8s_emulator import vllm_deployment
from tui.core.cluster import args as A
from tui.core.cluster.base import EditArgsRequest

SG_ARGS = ["--model-path", "Qwen/Qwen3-8B", "--tp", "2", "--mem-fraction-static", "0.85",
           "--max-running-requests", "128", "--chunked-prefill-size", "8192", "--enable-metrics",
           "--port", "30000"]


def sglang_deployment(name: str = "qwen-sg", command=None) -> dict:
    d = vllm_deployment(name, command=command or ["python3", "-m", "sglang.launch_server"], args=list(SG_ARGS))
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["name"], c["image"] = "sglang", "lmsysorg/sglang:v0.5.1-cu126"
    return d


def changed_lines(diff: str) -> list[str]:
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]


async def test_discovery_finds_an_sglang_deployment_by_its_container(env: Env) -> None:
    env.emu.add(sglang_deployment())
    env.emu.add(sglang_deployment("sg-serve", command=["sglang", "serve"]))
    pods = await env.cluster().list_pods()
    owners = {(p.owner_kind, p.owner_name) for p in pods}
    assert ("Deployment", "qwen-sg") in owners and ("Deployment", "sg-serve") in owners
    assert ("Deployment", "llama") in owners  # the vLLM one beside it


async def test_the_edit_offers_sglang_knobs_with_an_exact_args_diff(env: Env) -> None:
    env.emu.add(sglang_deployment())
    c = env.cluster()
    dep = await c.get_deployment(NS, "qwen-sg")
    cmd = A.parse_container(dep.containers[0].as_dict())
    assert cmd.engine == "sglang" and cmd.form == "python -m"
    assert cmd.eng.editable[:3] == ("max-running-requests", "chunked-prefill-size", "mem-fraction-static")
    assert cmd.value("tp-size") == 2 and cmd.model == "Qwen/Qwen3-8B"
    assert set(A.presets_for(cmd)) >= {"running-50", "chunk-50", "conservative-1.3"}

    plan = await c.plan_edit_args(EditArgsRequest(NS, "qwen-sg", {"max-running-requests": "64"}))
    assert plan.ok, plan.errors
    assert changed_lines(plan.diff) == ["-- 128", "+- 64"]
    assert plan.summary == "edit deployment/qwen-sg -n serving: --max-running-requests 64"

    # presets in SGLang's words: halve chunked prefill, more conservative admission (appended)
    half = await c.plan_edit_args(EditArgsRequest(NS, "qwen-sg", {}, preset="chunk-50"))
    assert changed_lines(half.diff) == ["-- 8192", "+- 4096"]
    cons = await c.plan_edit_args(EditArgsRequest(NS, "qwen-sg", {}, preset="conservative-1.3"))
    assert changed_lines(cons.diff) == ["+- --schedule-conservativeness", "+- 1.3"]

    # vLLM's knobs are not SGLang's; SGLang's ranges hold
    bad = await c.plan_edit_args(EditArgsRequest(NS, "qwen-sg", {"max-num-seqs": "8", "mem-fraction-static": "1.2"}))
    assert not bad.ok
    assert any("does not edit --max-num-seqs" in e for e in bad.errors)
    assert any("--mem-fraction-static must be > 0 and < 1" in e for e in bad.errors)

    res = await c.apply(plan)
    assert res.ok, res.message
    args = env.deployment("qwen-sg")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == [("64" if a == "128" else a) for a in SG_ARGS]


async def test_sglang_preflight_checks_the_token_pool(env: Env) -> None:
    env.emu.add(sglang_deployment())
    c = env.cluster()
    cache = {"num_pages": "20000", "page_size": "1"}
    shrink = await c.plan_edit_args(EditArgsRequest(NS, "qwen-sg", {"mem-fraction-static": "0.6", "context-length": "32768"},
                                                    cache_config=cache, gpu_total_bytes=80 * 2**30, kv_bytes_token=2 * 131072))
    assert shrink.preflight.status == "fail", shrink.preflight.messages
    assert any("mem-fraction-static 0.85 -> 0.6 takes 20.0 GiB" in m for m in shrink.preflight.messages)


def test_the_audit_reads_an_sglang_workload_in_its_own_flags():
    from tui.core.audit import audit_workload

    a = audit_workload(sglang_deployment())
    assert a.error is None
    got = {c.id: (c.status, c.detail) for c in a.checks}
    assert got["max-running-requests-set"] == ("pass", "--max-running-requests 128")
    assert got["chunked-prefill-size-set"] == ("pass", "--chunked-prefill-size 8192")
    assert got["context-length-set"][0] == "fail"  # not set: derived from the model config
    assert "max-num-seqs-set" not in got and "gpu-memory-utilization" not in got
    assert got["metrics-port"][0] == "fail"  # --port 30000, the container declares 8000

"""API errors become clear messages (403/404/409/5xx/timeouts/API server gone), never raw
exceptions; logs filtered for KV trouble, events newest first; RBAC per key."""

from __future__ import annotations

import time

import pytest

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tui.core.cluster.base import ClusterError, EditArgsRequest, sanitize

DEP = f"/apis/apps/v1/namespaces/{NS}/deployments/llama$"


@pytest.mark.parametrize(
    "status,kind,text",
    [
        (403, "forbidden", 'forbidden: deployments.apps "llama" is forbidden: User "sre" cannot get'),
        (404, "not-found", "not found:"),
        (409, "conflict", "conflict:"),
        (500, "server", "API server error 500:"),
        (503, "server", "API server error 503:"),
        (401, "unauthorized", "expired token"),
        (429, "server", "throttled"),
    ],
)
async def test_read_errors_are_typed(env: Env, status: int, kind: str, text: str) -> None:
    env.emu.fail("GET", DEP, status, 'deployments.apps "llama" is forbidden: User "sre" cannot get' if status == 403 else "boom")
    with pytest.raises(ClusterError) as e:
        await env.cluster().get_deployment(NS, "llama")
    assert (e.value.kind, e.value.status) == (kind, status)
    assert text in e.value.message


async def test_real_not_found(env: Env) -> None:
    with pytest.raises(ClusterError) as e:
        await env.cluster().get_deployment(NS, "nope")
    assert e.value.kind == "not-found" and '"nope" not found' in e.value.message
    res = await env.cluster().scale(NS, "nope", 2)
    assert not res.ok and res.status_code == 404 and "nope" in res.message


@pytest.mark.parametrize("status,kind", [(403, "forbidden"), (409, "conflict"), (500, "server"), (422, "invalid")])
async def test_mutation_errors_become_results(env: Env, status: int, kind: str) -> None:
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 100}))
    env.emu.fail("PATCH", DEP, status, "admission webhook denied the request" if status == 422 else "nope")
    res = await c.apply(plan)
    assert not res.ok and res.status_code == status and res.details["kind"] == kind
    assert env.vllm()["args"][1] == "256"
    assert env.audit.read()[-1]["result"] == {"ok": False, "message": res.message, "status": status}


async def test_dry_run_refusal_stops_before_the_real_patch(env: Env) -> None:
    c = env.cluster()
    plan = await c.plan_edit_args(EditArgsRequest(NS, "llama", {"max-num-seqs": 100}))
    env.emu.fail("PATCH", DEP, 422, "spec.template.spec.containers[0].args: Invalid value", times=1)
    res = await c.apply(plan)
    assert not res.ok and "server-side dry run refused the change" in res.message and "Invalid value" in res.message
    assert len([w for w in env.emu.calls if w.method == "PATCH"]) == 1


async def test_timeout(env: Env) -> None:
    env.emu.fail("GET", DEP, 200, delay=2.0)
    c = env.cluster(request_timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(ClusterError) as e:
        await c.get_deployment(NS, "llama")
    assert e.value.kind == "timeout" and "timed out" in e.value.message
    assert time.monotonic() - t0 < 1.5
    plan_err = await c.restart(NS, "llama")
    assert not plan_err.ok and "timed out" in plan_err.message


async def test_api_server_gone(env: Env) -> None:
    c = env.cluster(request_timeout=1.0)
    await env.srv.__aexit__(None, None, None)  # the API server goes away
    try:
        with pytest.raises(ClusterError) as e:
            await c.list_pods()
        assert e.value.kind == "unreachable" and "unreachable" in e.value.message
        res = await c.restart(NS, "llama")
        assert not res.ok and "unreachable" in res.message
        perms = await c.permissions(NS)
        assert not perms.allowed("logs") and "unreachable" in perms.actions["logs"].reason
    finally:
        await env.srv.__aenter__()  # let the fixture close it normally


async def test_logs_filtered_previous_and_sanitised(env: Env) -> None:
    c = env.cluster()
    pod = env.pods()[0]["metadata"]["name"]
    env.emu.pod_logs[(NS, pod, "vllm", False)] = (
        "INFO 06-01 10:00:00 [api_server.py:1043] vLLM API server version 0.10.0\n"
        "INFO 06-01 10:00:05 [gpu_worker.py:276] Available KV cache memory: 11.12 GiB\n"
        "WARNING 06-01 10:01:00 [scheduler.py:1] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE\n"
        "INFO 06-01 10:01:01 [loggers.py:1] Avg prompt throughput: 100 tokens/s, GPU KV cache usage: 99.1%\n"
        "\x1b[31mERROR\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\x1b]0;pwned\x07\n"
    )
    env.emu.pod_logs[(NS, pod, "vllm", True)] = "ValueError: KV cache needed (4.00 GiB) > available (2.00 GiB)\nEngine core failed\n"
    out = await c.logs(NS, pod)
    assert out.container == "vllm" and out.total == 5 and out.filtered
    # what signals trouble: the preemption warning and the OOM, not the INFO startup / stats lines
    assert out.lines == (
        "WARNING 06-01 10:01:00 [scheduler.py:1] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE",
        "ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    assert env.emu.calls[-1].query == {"container": "vllm", "previous": "false", "tailLines": "2000"}
    everything = await c.logs(NS, pod, filtered=False, tail=2)
    assert len(everything.lines) == 2 and everything.total == 2
    prev = await c.logs(NS, pod, container="vllm", previous=True)
    assert prev.lines == ("ValueError: KV cache needed (4.00 GiB) > available (2.00 GiB)", "Engine core failed") \
        and prev.previous
    other = env.pods()[1]["metadata"]["name"]
    with pytest.raises(ClusterError) as e:
        await c.logs(NS, other, previous=True)
    assert e.value.kind == "not-found" and "no previous" in e.value.message
    assert sanitize("a\x1b[2Jb\x07c") == "ab\\x07c"


async def test_events_newest_first(env: Env) -> None:
    now = env.emu.now
    env.emu.add_event(NS, "BackOff", "Back-off restarting failed container vllm", name="llama-x", type="Warning", ts=now + 30)
    env.emu.add_event(NS, "FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", name="llama-y", type="Warning", ts=now + 60)
    env.emu.add_event(NS, "Pulled", "Successfully pulled image\x1b[31m", name="llama-x", ts=now - 300)
    c = env.cluster()
    evs = await c.events(NS)
    assert [e.reason for e in evs[:2]] == ["FailedScheduling", "BackOff"]
    assert evs[-1].reason == "Pulled" and "\x1b" not in evs[-1].message
    assert [e.ts for e in evs] == sorted((e.ts for e in evs), reverse=True)
    mine = await c.events(NS, involving="llama-x")
    assert [e.reason for e in mine] == ["BackOff", "Pulled"] and mine[0].object == "Pod/llama-x"
    assert env.emu.calls[-1].query == {"fieldSelector": "involvedObject.name=llama-x"}
    assert len(await c.events(NS, limit=1)) == 1


async def test_permissions_per_key(env: Env) -> None:
    env.emu.deny("patch", "deployments")
    env.emu.deny("get", "pods", "log")
    perms = await env.cluster().permissions(NS)
    assert not perms.allowed("edit") and not perms.allowed("restart") and not perms.allowed("rollback")
    assert "RBAC does not allow patch deployments" in perms.actions["edit"].reason
    assert not perms.allowed("logs") and "pods/log" in perms.actions["logs"].reason
    assert perms.allowed("scale") and perms.allowed("drain") and perms.allowed("events") and perms.allowed("watch")
    reviews = [x for x in env.emu.calls if x.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"]
    attrs = {tuple(x.body["spec"]["resourceAttributes"][k] for k in ("verb", "group", "resource", "subresource")) for x in reviews}
    assert ("patch", "apps", "deployments", "scale") in attrs and ("delete", "", "pods", "") in attrs
    assert all(x.body["spec"]["resourceAttributes"]["namespace"] == NS for x in reviews)

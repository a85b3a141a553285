"""Discovery of vLLM pods through the official client: selector, auto-detection, owners, watch,
metrics through the pod proxy or the pod IP, contexts and namespaces."""

from __future__ import annotations

import asyncio
import json

import aiohttp.web
import pytest

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.k8s_emulator import vllm_deployment
from tui.core.cluster.base import ClusterError
from tui.core.cluster.kube import KubeCluster


def _web(ns: str = NS) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
        },
    }


def _sts_pod(ns: str = NS) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "qwen-0",
            "namespace": ns,
            "labels": {"app": "qwen"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "qwen", "uid": "sts-1", "controller": True}],
        },
        "spec": {
            "nodeName": "gpu-node-2",
            "containers": [
                {
                    "name": "server",
                    "image": "registry.local/llm:1",
                    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    "args": ["--model", "Qwen/Qwen2.5-7B", "--port", "9000"],
                }
            ],
        },
        "status": {"phase": "Running", "podIP": "10.1.0.9", "conditions": [{"type": "Ready", "status": "True"}]},
    }


async def test_auto_detection_finds_vllm_by_command_and_maps_owners(env: Env) -> None:
    env.emu.add(_web())
    env.emu.add(_sts_pod())
    c = env.cluster()
    pods = await c.list_pods()
    got = sorted((p.name, p.owner_kind, p.owner_name) for p in pods)
    llama = [p["metadata"]["name"] for p in env.pods()]
    assert got == sorted([(n, "Deployment", "llama") for n in llama] + [("qwen-0", "StatefulSet", "qwen")])
    # no selector was sent: the namespace was listed and filtered by container command
    lists = [x for x in env.emu.calls if x.method == "GET" and x.path == f"/api/v1/namespaces/{NS}/pods"]
    assert lists and "labelSelector" not in lists[-1].query
    qwen = next(p for p in pods if p.name == "qwen-0")
    assert qwen.ready is True and qwen.node == "gpu-node-2" and qwen.pod_ip == "10.1.0.9"
    assert c.metrics_url(qwen).endswith(f"/api/v1/namespaces/{NS}/pods/qwen-0:9000/proxy/metrics")  # --port 9000


async def test_discovery_by_selector_sends_it(env: Env) -> None:
    env.emu.add(_sts_pod())
    c = env.cluster(selector="app=qwen")
    pods = await c.list_pods()
    assert [p.name for p in pods] == ["qwen-0"]
    assert env.emu.calls[-1].query == {"labelSelector": "app=qwen"}
    assert await c.list_pods(selector="app in (llama, qwen),serving!=draining") != []


async def test_restarts_and_last_termination_reason(env: Env) -> None:
    name = env.pods()[0]["metadata"]["name"]
    env.emu.crash(NS, name, "OOMKilled", 137)
    pods = {p.name: p for p in await env.cluster().list_pods()}
    p = pods[name]
    assert (p.restarts, p.last_termination_reason, p.last_exit_code, p.phase, p.ready) == (1, "OOMKilled", 137, "CrashLoopBackOff", False)


async def test_all_namespaces(env: Env) -> None:
    env.emu.add(vllm_deployment("mistral", "other", replicas=1))
    c = env.cluster(all_namespaces=True)
    names = {(p.namespace, p.owner_name) for p in await c.list_pods()}
    assert names == {(NS, "llama"), ("other", "mistral")}
    assert any(x.path == "/api/v1/pods" for x in env.emu.calls)
    assert await c.list_namespaces() == ["other", NS]


async def _next(gen, typ: str, timeout: float = 5.0):
    async def go():
        async for ev in gen:
            if ev.type == typ:
                return ev
    return await asyncio.wait_for(go(), timeout)


async def test_watch_reports_new_restarted_and_deleted_pods(env: Env) -> None:
    c = env.cluster(watch_timeout_s=2)
    gen = c.watch_pods()
    try:
        sync = await _next(gen, "SYNC")
        assert sorted(p.name for p in sync.pods) == [p["metadata"]["name"] for p in env.pods()]
        # another client scales the Deployment: the new pod shows up
        d = env.deployment()
        d["spec"]["replicas"] = 3
        env.emu._update("deployments", env.deployment(), d)
        added = await _next(gen, "ADDED")
        assert added.pod.owner_name == "llama" and added.pod.name not in {p.name for p in sync.pods}
        # a restart
        env.emu.crash(NS, added.pod.name)
        mod = await _next(gen, "MODIFIED")
        while mod.pod.restarts == 0:
            mod = await _next(gen, "MODIFIED")
        assert mod.pod.name == added.pod.name and mod.pod.last_termination_reason == "OOMKilled"
        # deletion
        env.emu._delete("pods", env.emu.get("pods", NS, added.pod.name), 30)
        gone = await _next(gen, "DELETED")
        assert gone.pod.name == added.pod.name
        # the watch outlives its server-side timeout: it resumes from its resourceVersion
        await asyncio.sleep(2.5)
        env.emu.crash(NS, sync.pods[0].name)
        later = await _next(gen, "MODIFIED")
        assert later.pod.name == sync.pods[0].name
        watches = [x for x in env.emu.calls if x.query.get("watch") == "true"]
        assert len(watches) >= 2 and watches[-1].query.get("resourceVersion")
    finally:
        await gen.aclose()


async def test_watch_survives_the_api_server_failing(env: Env) -> None:
    c = env.cluster(watch_timeout_s=1)
    env.emu.fail("GET", r"/pods$", 500, "etcd timeout", times=1)
    gen = c.watch_pods()
    try:
        err = await _next(gen, "ERROR")
        assert "etcd timeout" in err.message
        sync = await _next(gen, "SYNC", timeout=10)
        assert len(sync.pods) == 2
    finally:
        await gen.aclose()


async def test_metrics_through_the_pod_proxy(env: Env) -> None:
    c = env.cluster()
    pod = (await c.list_pods())[0]
    env.emu.pod_metrics[(NS, pod.name)] = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3\n'
    text = await c.fetch_metrics(pod)
    assert "vllm:num_requests_running" in text
    assert env.emu.calls[-1].path == f"/api/v1/namespaces/{NS}/pods/{pod.name}:8000/proxy/metrics"
    other = (await c.list_pods())[1]
    with pytest.raises(ClusterError) as e:
        await c.fetch_metrics(other)  # nothing listens: the API server says 503
    assert e.value.kind == "server" and "connection refused" in e.value.message


async def test_metrics_direct_from_the_pod_ip(env: Env) -> None:
    page = "vllm:num_requests_waiting 7\n"

    async def metrics(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=page)

    app = aiohttp.web.Application()
    app.router.add_get("/metrics", metrics)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        name = env.pods()[0]["metadata"]["name"]
        p = env.emu.get("pods", NS, name)
        p["status"]["podIP"] = "127.0.0.1"
        env.emu._update("pods", env.emu.get("pods", NS, name), p, status_only=True)
        c = env.cluster(via="direct", port=port)
        pod = next(x for x in await c.list_pods() if x.name == name)
        assert c.metrics_url(pod) == f"http://127.0.0.1:{port}/metrics"
        assert await c.fetch_metrics(pod) == page
    finally:
        await runner.cleanup()


def _kubeconfig(path, url: str) -> str:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "sre-staging", "user": {"token": "s3cr3t-token-value"}}, {"name": "sre-prod", "user": {"token": "other-s3cr3t"}}],
        "contexts": [
            {"name": "staging", "context": {"cluster": "emu", "user": "sre-staging", "namespace": NS}},
            {"name": "prod-eu", "context": {"cluster": "emu", "user": "sre-prod", "namespace": NS}},
        ],
        "current-context": "staging",
    }
    path.write_text(json.dumps(cfg))
    return str(path)


async def test_connect_from_kubeconfig_never_leaks_credentials(env: Env) -> None:
    kc = _kubeconfig(env.tmp / "kubeconfig", str(env.srv.url).rstrip("/"))
    c = KubeCluster.connect(kubeconfig=kc, audit=env.audit, policy_config={"contexts": {"prod-*": {"production": True, "readOnly": True}}})
    assert (c.context, c.user, c.namespace, c.readonly) == ("staging", "sre-staging", NS, False)
    assert len(await c.list_pods()) == 2
    assert env.emu.calls[-1].path == f"/api/v1/namespaces/{NS}/pods"
    ctxs = await c.list_contexts()
    assert [(x.name, x.user, x.current) for x in ctxs] == [("staging", "sre-staging", True), ("prod-eu", "sre-prod", False)]
    prod = c.with_context("prod-eu")
    assert (prod.context, prod.readonly, prod.production) == ("prod-eu", True, True)
    plan = await prod.plan_scale(NS, "llama", 3)
    res = await prod.apply(plan, typed_name="llama")
    assert not res.ok and "read-only" in res.message
    everything = repr(ctxs) + repr(res) + repr(plan) + env.audit.path.read_text() + repr(vars(c))
    assert "s3cr3t" not in everything
    with pytest.raises(ClusterError) as e:
        KubeCluster.connect(kubeconfig=kc, context="nope")
    assert e.value.kind == "bad-input" and "nope" in e.value.message
    with pytest.raises(ClusterError):
        KubeCluster.connect(kubeconfig=str(env.tmp / "missing"), in_cluster=False)
    assert c.with_namespace("other").namespace == "other"

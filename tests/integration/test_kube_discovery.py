"""Discovery of vLLM pods through the official client: selector, auto-detection, owners, watch,
metrics through the pod proxy or the pod IP, contexts and namespaces."""

from __future__ import annotations

import asyncio
import json

import aiohttp.web
import pytest

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.k8s_emulator import vllm_deployment
from tests.waits import eventually
from tui.core.cluster.base import ClusterError
from tui.core.cluster.kube import KubeCluster
from tui.core.sources.kube import ClusterSource

_M = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
PAGE = (  # a vLLM V1 page, trimmed to the gauges kvwatch reads first
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    f"vllm:num_requests_running{{{_M}}} 12.0\n"
    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
    "# TYPE vllm:num_requests_waiting gauge\n"
    f"vllm:num_requests_waiting{{{_M}}} 3.0\n"
    "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    f"vllm:kv_cache_usage_perc{{{_M}}} 0.97\n"
)


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
    assert env.emu.calls[-1].query == {"labelSelector": "app=qwen", "limit": "500"}  # paged (issue 13 defect 10)
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
        first = list(env.emu._watchers)
        assert first  # the watch that delivered the events above
        # the server ends that watch at its timeout (the client may open the next one at once)
        await eventually(lambda: not any(w in env.emu._watchers for w in first))
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
    page = PAGE

    async def metrics(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=page, content_type="text/plain")

    app = aiohttp.web.Application()
    app.router.add_get("/metrics", metrics)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        names = [p["metadata"]["name"] for p in env.pods()]
        for name in names:  # both pods "listen" on this machine (tests reach 127.0.0.1 only)
            p = env.emu.get("pods", NS, name)
            p["status"]["podIP"] = "127.0.0.1"
            env.emu._update("pods", env.emu.get("pods", NS, name), p, status_only=True)
        c = env.cluster(via="direct", port=port, watch_timeout_s=2)
        pod = next(x for x in await c.list_pods() if x.name == names[0])
        assert c.metrics_url(pod) == f"http://127.0.0.1:{port}/metrics"
        assert await c.fetch_metrics(pod) == page
        n_calls = len(env.emu.calls)
        src = ClusterSource(c)
        await src.start()
        try:
            scrapes = await src.poll()
            assert sorted(s.replica for s in scrapes) == names
            assert all(s.ok and s.pod is not None and s.group == "llama" for s in scrapes)
            assert not any("/proxy/" in x.path for x in env.emu.calls[n_calls:])  # not through the API server
        finally:
            await src.close()
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


async def test_cluster_source_scrapes_pods_through_the_proxy(env: Env) -> None:
    page = PAGE
    names = [p["metadata"]["name"] for p in env.pods()]
    env.emu.pod_metrics[(NS, names[0])] = page
    env.emu.pod_metrics[(NS, names[1])] = "<html>login</html>"
    src = ClusterSource(env.cluster(watch_timeout_s=2), timeout=2.0, clock=lambda: 123.0)
    await src.start()
    try:
        assert "kind-test/serving: 2 vLLM pods via proxy" in src.description
        scrapes = {s.replica: s for s in await src.poll()}
        ok, bad = scrapes[names[0]], scrapes[names[1]]
        assert ok.ok and ok.ts == 123.0 and ok.group == "llama" and ok.pod.owner_kind == "Deployment"
        assert ok.sample.value("kv_usage") == 0.97 and ok.sample.value("waiting") == 3.0 and ok.raw == page
        assert not bad.ok and bad.error and bad.pod.name == names[1]
        # a new pod that cannot be scheduled is listed, not scraped
        env.emu.pod_start = "unschedulable"
        d = env.deployment()
        d["spec"]["replicas"] = 3
        env.emu._update("deployments", env.deployment(), d)
        await eventually(lambda: len(src.pods) == 3)
        n_proxy = len([c for c in env.emu.calls if "/proxy/" in c.path])
        scrapes = {s.replica: s for s in await src.poll()}
        new = next(n for n in scrapes if n not in names)
        assert scrapes[new].error == "pod Unschedulable"
        assert len([c for c in env.emu.calls if "/proxy/" in c.path]) == n_proxy + 2
        env.emu._delete("pods", env.emu.get("pods", NS, names[1]), 30)
        await eventually(lambda: names[1] not in src.pods)
        assert src.take_removed() == {names[1]} and src.take_removed() == set()
    finally:
        await src.close()


async def test_cluster_source_without_an_api_server_says_why(env: Env) -> None:
    env.emu.fail("GET", r"/pods$", 403, 'pods is forbidden: User "sre" cannot list resource "pods"')
    src = ClusterSource(env.cluster(), first_list_timeout=0.5)
    await src.start()
    try:
        with pytest.raises(ClusterError) as e:
            await src.poll()
        assert "cannot list" in e.value.message
    finally:
        await src.close()


async def test_opt_in_nvidia_smi_in_pods_fills_gpu_without_delaying_polls(env: Env) -> None:
    """--gpu-exec: nvidia-smi output joins the pod's row; it runs at most once per interval per
    pod, in the background. The exec transport is the edge faked here (kmock has no websocket
    exec); the pods, the proxy scrape and the sampler are real."""
    from tui.core.sources.gpu.nvidia_smi import NvidiaSmiExec

    names = [p["metadata"]["name"] for p in env.pods()]
    for n in names:
        env.emu.pod_metrics[(NS, n)] = PAGE
    calls: list[tuple[str, str, tuple[str, ...]]] = []
    gate = asyncio.Event()

    async def exec_fn(ns, pod, container, argv):
        calls.append((ns, pod, tuple(argv)))
        await gate.wait()  # a slow exec must not hold the poll
        throttle = "0x0000000000000040" if pod == names[0] else "0x0000000000000000"
        return f"0, GPU-{pod}, NVIDIA H100 80GB HBM3, 74000, 81559, 31, {throttle}, 77, 0\n"

    gpu_exec = NvidiaSmiExec(exec_fn, min_interval_s=60.0)
    src = ClusterSource(env.cluster(watch_timeout_s=2), timeout=2.0, gpu_exec=gpu_exec)
    await src.start()
    try:
        first = {s.replica: s for s in await asyncio.wait_for(src.poll(), 15)}
        assert all(s.ok and s.gpu is None for s in first.values())  # exec still running: no wait
        gate.set()
        await eventually(lambda: gpu_exec.peek(NS, names[0]) is not None and gpu_exec.peek(NS, names[1]) is not None)
        second = {s.replica: s for s in await src.poll()}
        g0, g1 = second[names[0]].gpu, second[names[1]].gpu
        assert g0.source == "nvidia-smi" and g0.join == "exec in pod"
        assert round(g0.memory_pct) == round(100 * 74000 / 81559) and g0.compute_pct == 31
        assert g0.throttle_reasons == ("hw_thermal_slowdown",) and g1.throttle_reasons == ()
        await src.poll()
        assert len(calls) == 2 and calls[0][2][0] == "nvidia-smi"  # once per pod per interval
    finally:
        await src.close()


async def test_exec_in_pod_is_refused_under_readonly(env: Env) -> None:
    c = env.cluster(readonly=True)
    n_calls = len(env.emu.calls)
    with pytest.raises(ClusterError) as e:
        await c.exec_in_pod(NS, "any", None, ["nvidia-smi"])
    assert "read-only" in e.value.message
    assert len(env.emu.calls) == n_calls  # nothing was sent


async def test_prometheus_rows_join_the_pod_watch_and_carry_the_cluster(env: Env) -> None:
    """--prometheus with Kubernetes flags: rows keep Prometheus' metrics and gain the pod's
    restarts, owner and the cluster the mitigation keys act through."""
    from tui.core.sources.prom_kube import PrometheusWithCluster
    from tui.core.metrics.extract import parse_vllm, to_sample
    from tui.core.model import Scrape
    from tui.core.monitor import Monitor

    names = [p["metadata"]["name"] for p in env.pods()]
    sample = to_sample(parse_vllm(PAGE))

    class PromRows:  # stands in for PrometheusSource's output (tested against a real Prometheus elsewhere)
        description = "prometheus http://prom:9090"

        async def start(self):
            pass

        async def close(self):
            pass

        async def poll(self):
            return [Scrape(1.0, names[0], sample), Scrape(1.0, "not-a-pod-here", sample)]

        async def backfill(self, **kw):
            return [Scrape(0.5, names[0], sample)]

    n_proxy = len([c for c in env.emu.calls if "/proxy/" in c.path])
    cluster = env.cluster(watch_timeout_s=2)
    src = PrometheusWithCluster(PromRows(), ClusterSource(cluster))
    mon = Monitor(src)
    await mon.start(backfill_s=60)
    try:
        state = await mon.refresh()
        rows = {r.name: r for r in state.replicas}
        assert rows[names[0]].pod is not None and rows[names[0]].group == "llama"
        assert rows["not-a-pod-here"].pod is None  # kept, not dropped: Prometheus knows it
        assert src.cluster is cluster and "pods from" in src.description
        assert len([c for c in env.emu.calls if "/proxy/" in c.path]) == n_proxy  # no pod scraping
    finally:
        await src.close()

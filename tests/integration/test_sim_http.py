"""The simulated fleet over real HTTP on 127.0.0.1: pages, status codes, keep-alive, lifecycle."""

from __future__ import annotations

import time
import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.waits import eventually_sync as eventually
from tui.core.sim.args import EngineArgs
from tui.core.sim.fleet import SimFleet


@pytest.fixture(scope="module")
def fleet():
    f = SimFleet("long-prompts", replicas=3, v0_replicas=1, speed=20.0, seed=1)
    f.start()
    try:
        yield f
    finally:
        f.stop()


def test_metrics_served_parse_with_the_right_names(fleet):
    targets = {t.name: t for t in fleet.targets()}
    with httpx.Client(timeout=5.0) as c:
        r1 = c.get(targets["llama-8b-0"].metrics_url)
        r0 = c.get(targets["llama-8b-v0-0"].metrics_url)
    assert r1.status_code == 200 and r0.status_code == 200
    assert r1.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    v1 = {f.name: f for f in text_string_to_metric_families(r1.text)}
    v0 = {f.name: f for f in text_string_to_metric_families(r0.text)}
    (kv,) = v1["vllm:kv_cache_usage_perc"].samples
    assert kv.labels["engine"] == "0" and 0 <= kv.value <= 1
    assert "vllm:gpu_cache_usage_perc" in v0 and "vllm:kv_cache_usage_perc" not in v0
    (kv0,) = v0["vllm:gpu_cache_usage_perc"].samples
    assert "engine" not in kv0.labels
    assert [s.labels["le"] for s in v1["vllm:time_to_first_token_seconds"].samples
            if s.name.endswith("_bucket")][-3:] == ["640.0", "2560.0", "+Inf"]
    assert [s.labels["le"] for s in v0["vllm:time_to_first_token_seconds"].samples
            if s.name.endswith("_bucket")][-2:] == ["10.0", "+Inf"]


def test_health_dcgm_404_and_head(fleet):
    t = fleet.targets()[0]
    with httpx.Client(timeout=5.0) as c:
        assert c.get(t.url + "/health").status_code == 200
        assert c.get(t.url + "/nope").status_code == 404
        assert c.post(t.url + "/metrics", content=b"x").status_code == 405
        head = c.head(t.metrics_url)
        assert head.status_code == 200 and head.content == b"" and int(head.headers["content-length"]) > 30_000
        g = c.get(t.gpu_url)
    fams = {f.name: f for f in text_string_to_metric_families(g.text)}
    (used,) = fams["DCGM_FI_DEV_FB_USED"].samples
    assert used.labels["pod"] == t.name and used.value > 30_000  # MiB: weights + the whole KV pool


def test_keep_alive_reuses_one_connection(fleet):
    t = fleet.targets()[1]
    ports = set()
    with httpx.Client(timeout=5.0) as c:
        for _ in range(5):
            r = c.get(t.metrics_url, extensions={})
            assert r.status_code == 200
            ports.add(r.extensions["network_stream"].get_extra_info("client_addr")[1])
    assert len(ports) == 1


def test_counters_move_forward_between_scrapes(fleet):
    t = fleet.targets()[0]

    def gen_tokens() -> float:
        text = httpx.get(t.metrics_url, timeout=5.0).text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        return fams["vllm:generation_tokens"].samples[0].value

    a = gen_tokens()
    b = eventually(lambda: (v := gen_tokens()) > a and v)
    assert b > a


def test_loading_replica_answers_503_until_ready(fleet):
    t = fleet.add_replica("llama-8b-spare", EngineArgs(max_model_len=8192, max_num_seqs=64), "llama-8b",
                          load_delay_s=40.0)  # 2 s of wall time at 20x
    try:
        assert httpx.get(t.url + "/health", timeout=5.0).status_code == 503
        assert httpx.get(t.metrics_url, timeout=5.0).status_code == 503
        eventually(lambda: httpx.get(t.url + "/health", timeout=5.0).status_code == 200)
        assert httpx.get(t.url + "/health", timeout=5.0).status_code == 200
        assert "vllm:kv_cache_usage_perc" in httpx.get(t.metrics_url, timeout=5.0).text
    finally:
        fleet.remove_replica("llama-8b-spare")
    with pytest.raises(httpx.ConnectError):
        httpx.get(t.url + "/health", timeout=2.0)


def test_failed_replica_answers_503_with_the_reason(fleet):
    t = fleet.add_replica("llama-8b-bad", EngineArgs(max_model_len=32768, gpu_memory_utilization=0.45), "llama-8b",
                          load_delay_s=0.0)
    try:
        for _ in range(50):
            if fleet.status("llama-8b-bad").state == "failed":
                break
            time.sleep(0.1)
        r = httpx.get(t.url + "/health", timeout=5.0)
        assert r.status_code == 503 and "KV cache is needed" in r.text
    finally:
        fleet.remove_replica("llama-8b-bad")


def test_garbage_request_gets_400_and_server_survives(fleet):
    t = fleet.targets()[0]
    host, port = t.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"NONSENSE\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    assert httpx.get(t.metrics_url, timeout=5.0).status_code == 200


def test_stop_closes_every_port():
    f = SimFleet("steady", replicas=2, seed=0).start()
    urls = [t.url for t in f.targets()]
    assert all(httpx.get(u + "/health", timeout=5.0).status_code == 200 for u in urls)
    f.stop()
    for u in urls:
        with pytest.raises(httpx.ConnectError):
            httpx.get(u + "/health", timeout=2.0)


def test_fleet_can_be_restarted():
    f = SimFleet("steady", replicas=1, seed=0, speed=5.0).start()
    f.stop()
    t_stopped = f.clock()
    f.start()
    try:
        (t,) = f.targets()
        assert httpx.get(t.metrics_url, timeout=5.0).status_code == 200
        eventually(lambda: f.clock() > t_stopped)
        assert f.clock() > t_stopped
    finally:
        f.stop()

"""Recorded Prometheus answers (tests/unit/data/prometheus, see record.py there) -> Scrapes.

The fleet behind the recording: vllm-a (V1, 2 engines, KV 0.42, 2 GPUs, one idle-clocked),
vllm-b (KV 0.97, 12 waiting, 2 preemptions/s, TTFT 3 s, GPU in HW thermal slowdown),
vllm-c (V0 names, KV 0.55), vllm-d (KV 0.30, GPU without pod label on node-d), vllm-gone (404).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.core.model import Scrape
from tui.core.monitor import Monitor
from tui.core.sources.gpu import dcgm
from tui.core.sources.gpu.dcgm import GpuAllocation
from tui.core.sources.promclient import Series, series_from_data
from tui.core.sources.prommap import (
    Naming,
    build_scrapes,
    cache_configs,
    group_derived,
    group_scalars,
    pod_labels,
)

DATA = Path(__file__).parent / "data" / "prometheus"


def load(name: str) -> list[Series]:
    body = json.loads((DATA / f"{name}.json").read_text())
    assert body["status"] == "success"
    return series_from_data(body["data"])


def key(pod: str) -> tuple[str, str, str]:
    return ("pod", "inference", pod)


@pytest.fixture(scope="module")
def fleet():
    replicas = group_scalars(load("scalars_3"))
    derived, down = group_derived(load("rates") + load("quantiles"))
    naming = Naming()
    naming.observe(replicas)
    return replicas, derived, down, naming


def test_scalars_group_into_replicas_and_engines(fleet):
    replicas, *_ = fleet
    assert set(replicas) == {key(p) for p in ("vllm-a", "vllm-b", "vllm-c", "vllm-d")}
    a = replicas[key("vllm-a")]
    assert set(a.engines) == {"0", "1"}
    assert a.engines["0"]["kv_usage"][1] == pytest.approx(0.42)
    # The page splits 20 running over two engines; the pod-level value sums them again.
    from tui.core.sources.prommap import to_sample

    sa = to_sample(a)
    assert sa.value("running") == pytest.approx(20.0)
    assert sa.generation == "v1"
    assert sa.model_name == "meta-llama/Llama-3.1-8B-Instruct"


def test_v0_names_are_aliased(fleet):
    from tui.core.sources.prommap import to_sample

    replicas, *_ = fleet
    c = to_sample(replicas[key("vllm-c")])
    assert c.generation == "v0"
    assert c.value("kv_usage") == pytest.approx(0.55)  # from vllm:gpu_cache_usage_perc
    assert c.value("swapped") == 0.0
    assert set(c.engines) == {""}


def test_derived_rates_quantiles_and_down_targets(fleet):
    _, derived, down, _ = fleet
    b = derived[key("vllm-b")]
    assert b["preemptions_per_s"] == pytest.approx(2.0, rel=0.1)
    assert b["requests_per_s"] == pytest.approx(2.0, rel=0.1)
    assert b["gen_tokens_per_s"] == pytest.approx(500.0, rel=0.1)
    # every TTFT of vllm-b lies in the (2.5, 5.0] bucket
    assert 2.5 < b["ttft_p95_s"] <= 5.0
    assert 0.25 < derived[key("vllm-a")]["ttft_p95_s"] <= 0.5
    assert derived[key("vllm-a")]["preemptions_per_s"] == 0.0
    assert 0.0 < derived[key("vllm-a")]["cpu_cores"] < 1.0
    # no histogram of e2e latency on these pages: no quantile, not 0 or NaN
    assert "e2e_p95_s" not in b
    assert down == {key("vllm-gone")}
    assert key("vllm-gone") not in derived


def test_cache_config_labels_without_target_labels():
    cfg = cache_configs(load("cache_config"))
    a = cfg[key("vllm-a")]
    assert a["num_gpu_blocks"] == "27915" and a["block_size"] == "16"
    assert not {"pod", "instance", "job", "namespace", "engine", "__name__"} & set(a)
    assert key("vllm-c") in cfg  # V0: no engine label


def test_gpu_join_by_exported_pod_label(fleet):
    replicas, _, _, naming = fleet
    gpus = dcgm.join_series(load("gpu"), pod_labels(replicas, naming))
    a, b, c = gpus["vllm-a"], gpus["vllm-b"], gpus["vllm-c"]
    assert a.join == "pod label" and a.count == 2
    # worst GPU of the TP pair: 70000 MiB used of 81000
    assert a.memory_pct == pytest.approx(100 * 70000 / 81000)
    assert a.throttle_reasons == ()  # gpu_idle is benign
    assert b.throttle_reasons == ("hw_thermal_slowdown",)
    assert b.worst is not None and b.worst.uuid == "GPU-bbbb0000"
    assert c.compute_pct == pytest.approx(20.0)  # GR_ENGINE_ACTIVE preferred over GPU_UTIL (90)
    # The exporter's own pod label (dcgm-exporter-...) must not be mistaken for a replica.
    assert "vllm-d" not in gpus


def test_gpu_join_by_node_and_uuid_device_or_sole_replica(fleet):
    replicas, _, _, naming = fleet
    series = load("gpu")
    labels = pod_labels(replicas, naming)
    by_uuid = dcgm.join_series(series, labels, {"vllm-d": GpuAllocation("node-d", uuids=("GPU-dddd0000",))})
    assert by_uuid["vllm-d"].join == "node+uuid"
    assert by_uuid["vllm-d"].memory_pct == pytest.approx(100 * 40000 / 81000)
    by_dev = dcgm.join_series(series, labels, {"vllm-d": GpuAllocation("node-d", devices=("nvidia0",))})
    assert by_dev["vllm-d"].join == "node+device" and by_dev["vllm-d"].count == 1
    sole = dcgm.join_series(series, labels, {"vllm-d": GpuAllocation("node-d")})
    assert sole["vllm-d"].join == "node (only replica on it)"
    # A wrong node joins nothing rather than someone else's GPU.
    wrong = dcgm.join_series(series, labels, {"vllm-d": GpuAllocation("node-a", uuids=("GPU-dddd0000",))})
    assert "vllm-d" not in wrong
    # Two replicas on a node and no device list: ambiguous, so no join.
    two = dcgm.join_series(series, labels, {"vllm-d": GpuAllocation("node-d"), "other": GpuAllocation("node-d")})
    assert "vllm-d" not in two


def sequence(naming: Naming, derived, gpus=None) -> list[list[Scrape]]:
    """The four recorded snapshots of the scalars, 2 s apart, as polls."""
    polls = []
    for i in range(4):
        replicas = group_scalars(load(f"scalars_{i}"))
        naming.observe(replicas)
        polls.append(build_scrapes(0.0, replicas, derived, naming, gpus))
    return polls


def test_recorded_sequence_carries_scrape_times_and_cpu(fleet):
    _, derived, _, naming = fleet
    polls = sequence(naming, derived)
    a = [next(s for s in poll if s.replica == "vllm-a") for poll in polls]
    ts = [s.ts for s in a]
    assert ts == sorted(ts) and 1.5 < ts[1] - ts[0] < 3.0  # Prometheus' scrape times, not 0.0
    cpu = [s.sample.process_cpu_seconds for s in a]
    assert all(c is not None for c in cpu) and cpu[-1] > cpu[0]


def test_scrapes_through_monitor_give_node_fault_only_where_throttled(fleet):
    replicas, derived, down, naming = fleet
    gpus = dcgm.join_series(load("gpu"), pod_labels(replicas, naming))
    m = Monitor()
    for poll in sequence(naming, derived, gpus):
        state = m.ingest(poll)
    verdicts = {r.name: r.verdict for r in state.replicas}
    assert verdicts["vllm-b"] == "node-fault"
    assert verdicts["vllm-a"] == "healthy"
    assert verdicts["vllm-d"] == "healthy"
    b = next(r for r in state.replicas if r.name == "vllm-b")
    assert any("hw_thermal_slowdown" in e.text for e in b.finding.evidence)
    # server-side values reach the metrics unchanged
    assert b.metrics.preemptions_per_s == pytest.approx(derived[key("vllm-b")]["preemptions_per_s"])
    assert b.metrics.ttft_p95_s == pytest.approx(derived[key("vllm-b")]["ttft_p95_s"])
    assert b.metrics.gpu_count == 1


def test_without_gpu_fault_the_same_replica_is_kv_pressure(fleet):
    _, derived, _, naming = fleet
    m = Monitor()
    for poll in sequence(naming, derived):
        state = m.ingest(poll)
    verdicts = {r.name: r.verdict for r in state.replicas}
    assert verdicts["vllm-b"] == "kv-pressure"
    assert verdicts["vllm-a"] == "healthy"


def test_local_rates_from_raw_counters_when_no_derived_values():
    # Without the rate query, the history derives rates from the raw counters it was given.
    naming = Naming()
    m = Monitor()
    for poll in sequence(naming, {}):
        state = m.ingest(poll)
    b = next(r for r in state.replicas if r.name == "vllm-b")
    a = next(r for r in state.replicas if r.name == "vllm-a")
    assert b.metrics.preemptions_per_s == pytest.approx(2.0, rel=0.05)
    assert a.metrics.gen_tokens_per_s == pytest.approx(500.0, rel=0.05)
    assert a.metrics.ttft_p95_s is None  # quantiles only come from the server


def test_hostile_label_values_are_cleaned_and_namespaces_disambiguated():
    rows = [
        Series({"__name__": "vllm:kv_cache_usage_perc", "namespace": "a", "pod": "x\x1b[31m", "engine": "0"},
               ((1.0, 0.5),)),
        Series({"__name__": "vllm:kv_cache_usage_perc", "namespace": "a", "pod": "same"}, ((1.0, 0.1),)),
        Series({"__name__": "vllm:kv_cache_usage_perc", "namespace": "b", "pod": "same"}, ((1.0, 0.2),)),
        Series({"__name__": "vllm:kv_cache_usage_perc", "instance": "10.0.0.9:8000"}, ((1.0, 0.3),)),
        Series({"__name__": "vllm:kv_cache_usage_perc"}, ((1.0, 0.3),)),  # no identity: dropped
    ]
    replicas = group_scalars(rows)
    naming = Naming()
    naming.observe(replicas)
    names = {s.replica: s.sample.value("kv_usage") for s in build_scrapes(1.0, replicas, {}, naming)}
    assert names == {"x\\x1b[31m": 0.5, "a/same": 0.1, "b/same": 0.2, "10.0.0.9:8000": 0.3}


def test_nan_values_mean_no_data():
    rows = [
        Series({"__name__": "vllm:kv_cache_usage_perc", "pod": "p", "namespace": "n"}, ((1.0, float("nan")),)),
        Series({"__name__": "vllm:num_requests_waiting", "pod": "p", "namespace": "n"}, ((1.0, 3.0),)),
        Series({"kvw": "ttft_p95_s", "pod": "p", "namespace": "n"}, ((1.0, float("nan")),)),
    ]
    replicas = group_scalars(rows[:2])
    derived, _ = group_derived(rows[2:])
    naming = Naming()
    naming.observe(replicas)
    (s,) = build_scrapes(1.0, replicas, derived, naming)
    assert isinstance(s, Scrape) and s.ok
    assert s.sample.value("kv_usage") is None and s.sample.value("waiting") == 3.0
    assert s.derived == {}

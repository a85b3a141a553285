"""The Prometheus source against a real Prometheus (Debian's binary, a child process on 127.0.0.1).

Prometheus scrapes simulated vLLM pages and a DCGM-exporter page every second; kvwatch must read
the same per-replica numbers through Prometheus as by scraping the pages itself, back-fill its
history from a TSDB loaded by promtool, and turn a throttled GPU into `node-fault` for that
replica only.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.promharness import (
    MISSING,
    Gpu,
    PageServer,
    Prometheus,
    Replica,
    ScrapeTarget,
    create_blocks,
    dcgm_page,
    have_prometheus,
    om_line,
    vllm_page,
)
from tui.core.monitor import Monitor
from tui.core.sources.base import SourceError
from tui.core.sources.direct import DirectSource, Target
from tui.core.sources.gpu.dcgm import SPARK_FIELDS, gpu_query
from tui.core.sources.promclient import PromClient
from tui.core.sources.prometheus import PrometheusSource
from tui.core.sources.promql import FleetQueries, quantiles_query, rates_query

pytestmark = [pytest.mark.prometheus, pytest.mark.skipif(not have_prometheus(), reason=MISSING)]

MATCH = '{namespace="inference"}'
WINDOW_S = 5.0  # rate window: several 1 s scrapes
FLEET = ("vllm-a", "vllm-b", "vllm-c")


class Live:
    def __init__(self, tmp):
        self.replicas = {
            "vllm-a": Replica("vllm-a", kv_usage=0.42, running=20, waiting=0, engines=2),
            "vllm-b": Replica("vllm-b", kv_usage=0.97, running=3, waiting=12, preempt_per_s=2.0, ttft_s=3.0),
            "vllm-c": Replica("vllm-c", kv_usage=0.35, running=8, waiting=0, v0=True),
            "vllm-x": Replica("vllm-x", kv_usage=0.10, running=1),  # goes away in the last test
        }
        self.gpus = {
            "vllm-a": [Gpu("GPU-a0", "0", "node-a", "vllm-a", "inference", fb_used_mib=70000, gr_active=0.5),
                       Gpu("GPU-a1", "1", "node-a", "vllm-a", "inference", fb_used_mib=61000, gr_active=0.52,
                           throttle_mask=0x1)],
            "vllm-b": [Gpu("GPU-b0", "0", "node-b", "vllm-b", "inference", fb_used_mib=76000, gr_active=0.3)],
            "vllm-c": [Gpu("GPU-c0", "1", "node-b", "vllm-c", "inference", fb_used_mib=50000, gr_active=0.4)],
        }
        routes = {f"/{n}/metrics": (lambda r=r: vllm_page(r)) for n, r in self.replicas.items()}
        routes["/dcgm"] = lambda: dcgm_page(g for gs in self.gpus.values() for g in gs)
        self.pages = PageServer(routes).start()
        targets = [ScrapeTarget(self.pages.url(f"/{n}/metrics"), {"pod": n, "namespace": "inference"})
                   for n in self.replicas]
        targets.append(ScrapeTarget(self.pages.url("/dcgm"), {}, honor_labels=True))
        self.prom = Prometheus(tmp, targets, interval="1s")

    def direct_targets(self, names=FLEET):
        return [Target(name=n, url=self.pages.url(f"/{n}/metrics"), gpu_url=self.pages.url("/dcgm"), gpu_pod=n)
                for n in names]


def _ready(url: str) -> bool:
    async def check() -> bool:
        c = PromClient(url)
        try:
            rows = await c.query(f"count by (pod) (count_over_time(vllm:num_requests_running{MATCH}"
                                 f"[{int(WINDOW_S) + 2}s]) > {WINDOW_S + 1})")
        finally:
            await c.close()
        return len(rows) >= 4

    return asyncio.run(check())


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    lv = Live(tmp_path_factory.mktemp("prom-live"))
    lv.prom.start()
    try:
        deadline = time.monotonic() + 40
        while not _ready(lv.prom.url):  # every replica scraped for longer than the rate window
            if time.monotonic() > deadline:
                raise RuntimeError("Prometheus did not scrape the pages: " + lv.prom.log.read_text()[-2000:])
            time.sleep(0.5)
        yield lv
    finally:
        lv.prom.stop()
        lv.pages.stop()


async def refresh_until(monitor: Monitor, pred, timeout: float = 30.0, pause: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        state = await monitor.refresh()
        if pred(state) or time.monotonic() > deadline:
            return state
        await asyncio.sleep(pause)


def by_name(state):
    return {r.name: r for r in state.replicas}


async def test_every_query_is_accepted_by_real_prometheus(live):
    match = 'namespace="inference",pod=~"vllm-.*",job!="nope"'
    q = FleetQueries.build(match, WINDOW_S)
    c = PromClient(live.prom.url)
    try:
        got = {name: await c.query(text) for name, text in
               (("scalars", q.scalars), ("rates", q.rates), ("quantiles", q.quantiles),
                ("cache_config", q.cache_config), ("gpu", gpu_query()))}
        now = time.time()
        for text in (q.scalars, rates_query(match, WINDOW_S, ("preemptions_per_s",)),
                     quantiles_query(match, WINDOW_S, ("ttft_p95_s",)), gpu_query("", SPARK_FIELDS)):
            assert await c.query_range(text, now - 5, now, 1)
    finally:
        await c.close()
    assert {s.labels.get("pod") for s in got["scalars"]} >= set(FLEET)
    assert {s.labels.get("kvw") for s in got["rates"]} >= {"preemptions_per_s", "requests_per_s", "cpu_cores"}
    assert {s.labels.get("kvw") for s in got["quantiles"]} >= {"ttft_p50_s", "ttft_p95_s", "ttft_p99_s"}
    assert len(got["cache_config"]) == 5  # 2 engines of vllm-a, b, c (V0), x
    assert len({s.labels["UUID"] for s in got["gpu"]}) == 4


async def test_bad_match_is_a_clear_source_error(live):
    src = PrometheusSource(live.prom.url, '{pod=~"("}')
    with pytest.raises(SourceError) as ei:
        await src.poll()
    await src.close()
    assert "rejected the query (bad_data)" in str(ei.value)


async def test_prometheus_matches_direct_scrape(live):
    prom = PrometheusSource(live.prom.url, MATCH, rate_window_s=WINDOW_S)
    direct = DirectSource(live.direct_targets(), timeout=2.0)
    mp, md = Monitor(prom), Monitor(direct)
    await prom.start()
    await direct.start()
    try:
        for _ in range(4):
            sp, sd = await mp.refresh(), await md.refresh()
            await asyncio.sleep(1.05)
        sp, sd = await mp.refresh(), await md.refresh()
    finally:
        await prom.close()
        await direct.close()
    p, d = by_name(sp), by_name(sd)
    assert set(FLEET) <= set(p)
    for name in FLEET:
        mp_, md_ = p[name].metrics, d[name].metrics
        assert mp_.kv_usage == pytest.approx(md_.kv_usage), name
        assert mp_.waiting == pytest.approx(md_.waiting), name
        assert mp_.running == pytest.approx(md_.running), name
        assert mp_.preemptions_per_s == pytest.approx(md_.preemptions_per_s, rel=0.15, abs=0.05), name
        assert mp_.gen_tokens_per_s == pytest.approx(md_.gen_tokens_per_s, rel=0.15), name
        assert mp_.gpu_memory_pct == pytest.approx(md_.gpu_memory_pct), name
        assert mp_.gpu_util_pct == pytest.approx(md_.gpu_util_pct), name
        assert mp_.gpu_count == md_.gpu_count, name
        assert p[name].generation == d[name].generation, name
    assert p["vllm-b"].metrics.preemptions_per_s == pytest.approx(2.0, rel=0.15)
    assert p["vllm-a"].metrics.gpu_count == 2
    assert p["vllm-b"].metrics.ttft_p95_s is not None and 2.5 < p["vllm-b"].metrics.ttft_p95_s <= 5.0
    assert p["vllm-b"].pod.namespace == "inference"
    assert p["vllm-a"].cache_config.get("num_gpu_blocks") == "27915"


async def test_throttled_gpu_makes_only_its_replica_node_fault(live):
    src = PrometheusSource(live.prom.url, MATCH, rate_window_s=WINDOW_S)
    m = Monitor(src)

    def settled(state):
        v = {r.name: r.verdict for r in state.replicas}
        return all(v.get(n) not in (None, "unknown") for n in FLEET)

    try:
        before = {n: r.verdict for n, r in by_name(await refresh_until(m, settled)).items() if n in FLEET}
        assert before["vllm-b"] == "kv-pressure" and before["vllm-a"] == "healthy"
        live.gpus["vllm-a"][1].throttle_mask = 0x1 | 0x40  # HW thermal slowdown on one GPU of the pair
        after = by_name(await refresh_until(m, lambda s: by_name(s)["vllm-a"].verdict == "node-fault"))
    finally:
        live.gpus["vllm-a"][1].throttle_mask = 0x1
        await src.close()
    assert after["vllm-a"].verdict == "node-fault"
    assert any("hw_thermal_slowdown" in e.text for e in after["vllm-a"].finding.evidence)
    assert {n: after[n].verdict for n in ("vllm-b", "vllm-c")} == {n: before[n] for n in ("vllm-b", "vllm-c")}


async def test_polls_faster_than_scrapes_do_not_repeat_samples(live):
    src = PrometheusSource(live.prom.url, MATCH, rate_window_s=WINDOW_S)
    try:
        first = {s.replica: s.ts for s in await src.poll()}
        again = await src.poll()  # well within the 1 s scrape interval
    finally:
        await src.close()
    assert set(FLEET) <= set(first)
    assert all(s.ts > first.get(s.replica, 0) for s in again)
    assert len(again) < len(first)


async def test_a_replica_that_stops_answering_is_reported(live):
    src = PrometheusSource(live.prom.url, MATCH, rate_window_s=WINDOW_S)
    try:
        assert "vllm-x" in {s.replica for s in await src.poll()}
        del live.pages.routes["/vllm-x/metrics"]  # 404 from now on: up == 0, its series go stale
        deadline = time.monotonic() + 30
        gone = None
        while gone is None and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            gone = next((s for s in await src.poll() if s.replica == "vllm-x" and not s.ok), None)
    finally:
        await src.close()
    assert gone is not None and gone.error == "Prometheus cannot scrape it (up == 0)"


# -- back-fill from a TSDB loaded by promtool ------------------------------------------------------


def history(start: int, end: int, step: int) -> str:
    """20 minutes of two replicas: vllm-0 calm, vllm-1 climbing into KV pressure at 3 preemptions/s
    after minute 10; DCGM series without pod labels (joined by node + UUID)."""
    by_name: dict[str, list[str]] = {}

    def add(name, labels, v, t):
        by_name.setdefault(name, []).append(om_line(name, labels, v, t))

    for i, pod in enumerate(("vllm-0", "vllm-1")):
        base = {"namespace": "inference", "pod": pod, "instance": f"10.0.0.{i}:8000", "job": "vllm",
                "engine": "0", "model_name": "m"}
        gpu = {"gpu": "0", "UUID": f"GPU-{i}", "Hostname": f"node-{i}", "job": "gpu", "instance": f"10.1.0.{i}:9400"}
        pre = 0.0
        for t in range(start, end + 1, step):
            late = i == 1 and t - start >= 600
            if late and t > start:
                pre += 3.0 * step
            add("vllm:kv_cache_usage_perc", base, 0.97 if late else 0.40, t)
            add("vllm:num_requests_waiting", base, 9.0 if late else 0.0, t)
            add("vllm:num_requests_running", base, 4.0 if late else 16.0, t)
            add("vllm:num_preemptions_total", base, pre, t)
            add("vllm:generation_tokens_total", base, 400.0 * (t - start), t)
            add("DCGM_FI_DEV_FB_USED", gpu, 72000.0, t)
            add("DCGM_FI_DEV_FB_FREE", gpu, 9559.0, t)
            add("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu, 0.3 if late else 0.7, t)
    return "\n".join(line for lines in by_name.values() for line in lines) + "\n# EOF\n"


async def test_backfill_draws_the_last_minutes(tmp_path):
    end = int(time.time()) - 30
    start = end - 1200
    create_blocks(history(start, end, 10), tmp_path / "data", tmp_path)
    with Prometheus(tmp_path, [], data_dir=tmp_path / "data") as prom:
        from tui.core.sources.gpu.dcgm import GpuAllocation

        alloc = {"vllm-0": GpuAllocation("node-0", uuids=("GPU-0",)),
                 "vllm-1": GpuAllocation("node-1", uuids=("GPU-1",))}
        src = PrometheusSource(prom.url, MATCH, rate_window_s=60, clock=lambda: float(end),
                               gpu_allocations=lambda: alloc)
        try:
            scrapes = await src.backfill(600, 10)
            after = await src.poll()
        finally:
            await src.close()
    assert [s.ts for s in scrapes] == sorted(s.ts for s in scrapes)
    per = {n: [s for s in scrapes if s.replica == n] for n in ("vllm-0", "vllm-1")}
    assert all(55 <= len(v) <= 61 for v in per.values())
    assert per["vllm-1"][-1].ts == pytest.approx(end)
    m = Monitor(src)
    state = m.ingest(scrapes)
    r = by_name(state)
    kv1 = [v for v in r["vllm-1"].series["kv_usage"] if v is not None]
    assert len(kv1) == 60 and kv1[-1] == pytest.approx(0.97) and min(kv1) == pytest.approx(0.97)
    assert r["vllm-1"].metrics.preemptions_per_s == pytest.approx(3.0, rel=0.05)
    assert r["vllm-1"].metrics.gpu_memory_pct == pytest.approx(100 * 72000 / 81559)
    assert r["vllm-1"].metrics.gpu_util_pct == pytest.approx(30.0)
    assert r["vllm-1"].verdict == "kv-pressure" and r["vllm-0"].verdict == "healthy"
    # nothing newer than the last back-filled sample in the TSDB: the first poll adds nothing
    assert after == []


# -- the simulator through Prometheus --------------------------------------------------------------


async def test_simulated_throttled_node_through_prometheus_and_direct_agree(tmp_path):
    """kvwatch's own simulator (scenario throttled-node: gpu-node-1's GPU starts HW thermal
    slowdown 60 s in) scraped by Prometheus: the replica on that node becomes node-fault through
    Prometheus as through direct scraping, the others do not, and the numbers agree."""
    from tui.core.sim.fleet import SimFleet

    lead_s = 49.0  # simulated seconds run before serving: the fault comes ~11 s after start
    fleet = SimFleet("throttled-node", replicas=3, speed=1.0, seed=1, start_time=time.time() - lead_s)
    fleet.advance(lead_s)
    fleet.start()
    sick = next(n for n in fleet.replica_names() if fleet.replica(n).node.name == "gpu-node-1")
    targets = [ScrapeTarget(t.metrics_url, {"pod": t.name, "namespace": "inference"}) for t in fleet.targets()]
    targets += [ScrapeTarget(t.gpu_url, {}, honor_labels=True) for t in fleet.targets()]
    prom = Prometheus(tmp_path, targets, interval="1s").start()
    psrc = PrometheusSource(prom.url, MATCH, rate_window_s=WINDOW_S)
    dsrc = DirectSource([Target(t.name, t.metrics_url, gpu_url=t.gpu_url, gpu_pod=t.name) for t in fleet.targets()],
                        timeout=2.0)
    mp, md = Monitor(psrc), Monitor(dsrc)
    seen_before_fault: dict[str, set[str]] = {}
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            p, d = by_name(await mp.refresh()), by_name(await md.refresh())
            if not fleet.replica(sick).node.throttle_mask:
                for n, r in p.items():
                    seen_before_fault.setdefault(n, set()).add(r.verdict)
            if len(p) == 3 and p[sick].verdict == "node-fault" and d[sick].verdict == "node-fault":
                break
            await asyncio.sleep(1.0)
    finally:
        await psrc.close()
        await dsrc.close()
        prom.stop()
        fleet.stop()
    assert p[sick].verdict == "node-fault" and d[sick].verdict == "node-fault"
    assert any("hw_thermal_slowdown" in e.text for e in p[sick].finding.evidence)
    for n in p:
        if n != sick:
            assert p[n].verdict != "node-fault" and d[n].verdict != "node-fault", n
    assert seen_before_fault.get(sick) and "node-fault" not in seen_before_fault[sick]
    for n in p:
        a, b = p[n].metrics, d[n].metrics
        assert a.kv_usage == pytest.approx(b.kv_usage, abs=0.1), n  # sampled up to 1 s apart
        assert a.gpu_memory_pct == pytest.approx(b.gpu_memory_pct, abs=1.0), n
        assert a.gpu_count == b.gpu_count == 1, n
        assert p[n].generation == d[n].generation, n

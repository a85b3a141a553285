"""Re-record the Prometheus answers the unit tests map (run from the repo root; needs prometheus).

    .venv/bin/python tests/unit/data/prometheus/record.py

A real Prometheus scrapes four simulated replicas for ~15 s, then each kvwatch query's JSON
answer is saved next to this file (the scalars also as four snapshots 2 s apart). The fleet:
  vllm-a  V1, 2 engines, KV 0.42, 2 GPUs (one reports the benign gpu_idle clock event)
  vllm-b  V1, KV 0.97, 12 waiting, 2 preemptions/s, GPU throttled by HW thermal slowdown
  vllm-c  V0 names, KV 0.55
  vllm-d  V1, KV 0.30, its GPU not pod-labelled by the exporter (node+UUID join)
  vllm-gone  a target that answers 404 (up == 0)
The DCGM exporter is scraped without honor_labels and with its own pod/namespace target labels,
so Prometheus renames the GPU's pod labels to exported_pod/exported_namespace, as it does in
most kube-prometheus installs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from tests.promharness import Gpu, PageServer, Prometheus, Replica, ScrapeTarget, dcgm_page, vllm_page  # noqa: E402
from tui.core.sources.gpu.dcgm import gpu_query  # noqa: E402
from tui.core.sources.promql import FleetQueries  # noqa: E402

HERE = Path(__file__).parent
MATCH = 'namespace="inference"'
RATE_WINDOW_S = 5.0

REPLICAS = [
    Replica("vllm-a", kv_usage=0.42, running=20, waiting=0, engines=2),
    Replica("vllm-b", kv_usage=0.97, running=3, waiting=12, preempt_per_s=2.0, ttft_s=3.0),
    Replica("vllm-c", kv_usage=0.55, running=8, waiting=1, v0=True),
    Replica("vllm-d", kv_usage=0.30, running=5, waiting=0),
]
GPUS = [
    Gpu("GPU-aaaa0000", "0", "node-a", pod="vllm-a", namespace="inference", throttle_mask=0x1),
    Gpu("GPU-aaaa0001", "1", "node-a", pod="vllm-a", namespace="inference", fb_used_mib=60000.0, fb_free_mib=21000.0),
    Gpu("GPU-bbbb0000", "0", "node-b", pod="vllm-b", namespace="inference", throttle_mask=0x40, util=100.0),
    Gpu("GPU-cccc0000", "1", "node-b", pod="vllm-c", namespace="inference", gr_active=0.2),
    Gpu("GPU-dddd0000", "0", "node-d", fb_used_mib=40000.0, fb_free_mib=41000.0, gr_active=0.1, util=30.0),
]


async def record(url: str) -> None:
    import httpx

    q = FleetQueries.build(MATCH, RATE_WINDOW_S)
    queries = {"rates": q.rates, "quantiles": q.quantiles,
               "cache_config": q.cache_config, "gpu": gpu_query()}
    async with httpx.AsyncClient() as c:
        # the scalars four times, 2 s apart: a sequence of scrapes for the history and diagnosis
        for i in range(4):
            r = await c.post(url + "/api/v1/query", data={"query": q.scalars})
            r.raise_for_status()
            (HERE / f"scalars_{i}.json").write_text(json.dumps(r.json(), indent=1, sort_keys=True) + "\n")
            await asyncio.sleep(2.0)
        for name, expr in queries.items():
            r = await c.post(url + "/api/v1/query", data={"query": expr})
            r.raise_for_status()
            body = r.json()
            (HERE / f"{name}.json").write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
            print(name, len(body["data"]["result"]), "series")


def main() -> None:
    routes = {f"/{r.pod}/metrics": (lambda r=r: vllm_page(r)) for r in REPLICAS}
    routes["/dcgm"] = lambda: dcgm_page(GPUS)
    server = PageServer(routes).start()
    targets = [ScrapeTarget(server.url(f"/{r.pod}/metrics"), {"pod": r.pod, "namespace": r.namespace})
               for r in REPLICAS]
    targets.append(ScrapeTarget(server.url("/vllm-gone/metrics"), {"pod": "vllm-gone", "namespace": "inference"}))
    targets.append(ScrapeTarget(server.url("/dcgm"), {"pod": "dcgm-exporter-x7k2p", "namespace": "gpu-operator"},
                                job="gpu"))
    with tempfile.TemporaryDirectory() as tmpdir:
        prom = Prometheus(Path(tmpdir), targets).start()
        try:
            time.sleep(15)
            asyncio.run(record(prom.url))
        finally:
            prom.stop()
            server.stop()


if __name__ == "__main__":
    main()

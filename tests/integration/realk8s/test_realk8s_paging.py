"""Listing more pods than one page (kubectl's chunk size, 500): every pod comes back, through
`limit` and `continue` requests the real API server answers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .common import Cluster, connect

N = 520


def _pod(i: int) -> dict:
    # never scheduled (no such scheduler): no GPU, no address, no work for the node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"vllm-{i:04d}", "labels": {"app": "many"}},
            "spec": {"schedulerName": "kvwatch-test-none", "containers": [
                {"name": "vllm", "image": "vllm/vllm-openai:v0.10.0", "command": ["vllm", "serve", "m"]}]}}


async def test_listing_520_pods_pages_through_continue(cluster: Cluster) -> None:
    kc = connect(cluster)
    from kubernetes import client

    core = client.CoreV1Api(kc.api)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: core.create_namespaced_pod(cluster.ns, _pod(i), _preload_content=False), range(N)))
    try:
        mark = cluster.audit_mark()
        pods = await kc.list_pods(cluster.ns)
        assert len(pods) == N and len({p.name for p in pods}) == N
        uris = [e["requestURI"] for e in cluster.audit_after(mark)
                if e["verb"] == "list" and (e.get("objectRef") or {}).get("resource") == "pods"
                and not e.get("userAgent", "").startswith("kubectl/")]
        assert len(uris) == 2 and all("limit=500" in u for u in uris) and "continue=" in uris[1], uris
    finally:
        core.delete_collection_namespaced_pod(cluster.ns, grace_period_seconds=0, _preload_content=False)

"""`kvwatch drain` against the real control plane: the real ReplicaSet, EndpointSlice and
disruption controllers decide what happens, and the simulated node's engines serve traffic only
while an EndpointSlice lists them."""

from __future__ import annotations

from pathlib import Path

from .common import Cluster, from_kvwatch, wait_for, writes


def _llama(c: Cluster) -> list[str]:
    c.apply_example("llama")
    c.rollout_wait("deployment/llama")
    return wait_for("2 llama pods", lambda: (p := c.live_pods("app=llama")) and len(p) == 2 and p)


def test_drain_that_cannot_read_the_load_stops_and_keeps_the_pod(cluster: Cluster) -> None:
    """Through the pod proxy (which this API server refuses for loopback pods) every load read
    fails: the drain must not remove the pod as if it were idle."""
    pods = _llama(cluster)
    target = pods[0]
    rc, doc, _, err = cluster.kvwatch("drain", target, "--yes", "--via", "proxy", "--idle-timeout", "6", "--poll", "0.5", timeout=180)
    assert rc == 1, (doc, err)
    steps = [(s["step"], s["status"]) for s in doc["result"]["steps"]]
    assert ("wait-idle", "failed") in steps, steps
    assert "cannot read" in doc["result"]["message"] and "not removed" in doc["result"]["message"], doc["result"]
    pod = cluster.get("pod", target)
    assert not pod["metadata"].get("deletionTimestamp") and pod["metadata"]["labels"].get("app") == "llama"
    wait_for("llama back at 2 replicas", lambda: cluster.get("deployment", "llama")["spec"]["replicas"] == 2)
    assert target in cluster.live_pods("app=llama")


def test_drain_via_direct_before_the_subcommand_is_honoured(cluster: Cluster) -> None:
    pods = _llama(cluster)
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("--via", "direct", "drain", pods[0], "--yes", "--idle-timeout", "60", "--poll", "0.5", timeout=180)
    assert rc == 0, (doc, err)
    evs = from_kvwatch(cluster.audit_after(mark))
    assert not [e for e in evs if "/proxy" in e["requestURI"]], "no pod-proxy request with --via direct"
    assert ("create", "pods/eviction", pods[0], 201, False) in writes(evs) or ("patch", "deployments/scale", "llama", 200, False) in writes(evs)
    wait_for(f"{pods[0]} gone", lambda: pods[0] not in cluster.live_pods("app=llama"))


def test_drain_spare_first_quarantine_accounts_for_every_pod(cluster: Cluster) -> None:
    """llama's Service selects exactly the Deployment's labels: the pod is quarantined (detached
    from its ReplicaSet by relabelling: its replacement is the spare), waited idle off every
    EndpointSlice, evicted with its own grace period; `created` names only pods still there."""
    pods = _llama(cluster)
    target = pods[0]
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("drain", target, "--yes", "--via", "direct", "--poll", "0.5", "--idle-timeout", "60", timeout=180)
    assert rc == 0, (doc, err)
    assert doc["plan"]["data"]["mechanism"] == "quarantine", doc["plan"]
    steps = [(s["step"], s["status"]) for s in doc["result"]["steps"] if s["status"] in ("ok", "failed")]
    assert steps == [("cordon", "ok"), ("endpoints", "ok"), ("wait-idle", "ok"), ("evict", "ok"), ("done", "ok")], steps
    acct = doc["result"]["pods"]
    assert acct["removed"] == [target] and acct["detached"] == [target] and acct["replicas"] == 2
    live = wait_for("2 live llama pods", lambda: (p := cluster.live_pods("app=llama")) and len(p) == 2 and p)
    assert set(acct["created"]) <= set(live), (acct["created"], live)
    assert target not in live
    w = writes(from_kvwatch(cluster.audit_after(mark)))
    evict = [x for x in w if x[1] == "pods/eviction" and not x[4]]
    assert evict == [("create", "pods/eviction", target, 201, False)]
    # the pod's own terminationGracePeriodSeconds (45): the eviction carries no shorter one
    assert "45s" in next(s["message"] for s in doc["result"]["steps"] if s["step"] == "evict" and s["status"] == "ok")


def _pdb(c: Cluster, name: str, app: str, rule: str) -> None:
    c.apply(f"""apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}, namespace: llm}}
spec: {{{rule}, selector: {{matchLabels: {{app: {app}}}}}}}
""")
    wait_for(f"PDB {name} observed", lambda: "disruptionsAllowed" in (cluster_pdb := c.get("pdb", name)).get("status", {})
             and cluster_pdb["status"].get("observedGeneration") == cluster_pdb["metadata"]["generation"])


def test_drain_quarantine_refused_when_a_pdb_allows_no_disruption(cluster: Cluster) -> None:
    """Detaching a pod from its ReplicaSet would bypass the budget: refused before any write."""
    pods = _llama(cluster)
    cluster.apply((Path(cluster.info["REALK8S_MANIFESTS"]) / "pdb-variants" / "llama-blocking.yaml").read_text())
    wait_for("PDB observed", lambda: "disruptionsAllowed" in cluster.get("pdb", "llama-pdb").get("status", {}))
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("drain", pods[0], "--yes", "--via", "direct")
    assert rc == 1 and "blocked by PDB llama-pdb" in (doc["refused"] or ""), (doc, err)
    assert writes(from_kvwatch(cluster.audit_after(mark))) == []


def test_drain_by_eviction_honours_the_pdb_429_then_201(cluster: Cluster) -> None:
    """gemma (rotation by its serving label) under a PDB drains by eviction with a spare first.
    maxUnavailable 0: the API server answers 429, the pod is put back and the spare scaled away
    (exit 1). minAvailable 2: with the spare ready one eviction is allowed (201)."""
    cluster.apply_example("gemma-serving-label")
    cluster.rollout_wait("deployment/gemma")
    target = wait_for("2 gemma pods", lambda: (p := cluster.live_pods("app=gemma")) and len(p) == 2 and p)[0]
    _pdb(cluster, "gemma-pdb", "gemma", "maxUnavailable: 0")
    argv = ("drain", target, "--yes", "--via", "direct", "--poll", "0.5", "--idle-timeout", "60", "--spare-timeout", "90")
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch(*argv, timeout=240)
    assert rc == 1, (doc, err)
    assert doc["plan"]["data"]["mechanism"] == "evict", doc["plan"]
    last = doc["result"]["steps"][-1]
    assert (last["step"], last["status"]) == ("evict", "failed") and last["data"]["pdb_blocked"], last
    assert "gemma-pdb" in last["message"] and "put back in rotation" in last["message"], last
    evictions = [w for w in writes(from_kvwatch(cluster.audit_after(mark))) if w[1] == "pods/eviction"]
    assert evictions == [("create", "pods/eviction", target, 429, True)]  # the server-side dry run said 429: nothing more
    assert not cluster.get("pod", target)["metadata"].get("deletionTimestamp")
    assert cluster.get("pod", target)["metadata"]["labels"].get("serving") == "true"
    wait_for("gemma at 2", lambda: cluster.get("deployment", "gemma")["spec"]["replicas"] == 2 and len(cluster.live_pods("app=gemma")) == 2)

    cluster.kubectl("delete", "pdb", "gemma-pdb", "-n", cluster.ns)
    _pdb(cluster, "gemma-pdb", "gemma", "minAvailable: 2")
    rc, doc, _, err = cluster.kvwatch(*argv, timeout=240)
    assert rc == 0, (doc, err)
    steps = [s["step"] for s in doc["result"]["steps"] if s["status"] == "ok"]
    assert steps[:2] == ["scale-up", "wait-spare"] and "evict" in steps and steps[-1] == "done", steps
    acct = doc["result"]["pods"]
    live = wait_for("2 live gemma pods", lambda: (p := cluster.live_pods("app=gemma")) and len(p) == 2 and p)
    assert target not in live and set(acct["created"]) <= set(live), (acct, live)


def test_drain_of_a_statefulset_pod_it_cannot_detach_is_refused(cluster: Cluster) -> None:
    cluster.apply_example("mistral-statefulset", "pdb-mistral")
    wait_for("mistral-0", lambda: any(p["metadata"]["name"] == "mistral-0" for p in cluster.pods("app=mistral")))
    mark = cluster.audit_mark()
    rc, doc, _, err = cluster.kvwatch("drain", "mistral-0", "--yes", "--via", "direct")
    assert rc == 1 and "StatefulSet pod cannot be detached" in (doc["refused"] or ""), (doc, err)
    assert writes(from_kvwatch(cluster.audit_after(mark))) == []


def test_drain_with_a_grace_period_evicts_with_it(cluster: Cluster) -> None:
    """A grace period other than the pod's own (45 s) can only be set by an eviction."""
    cluster.apply_example("gemma-serving-label")
    cluster.rollout_wait("deployment/gemma")
    target = wait_for("2 gemma pods", lambda: (p := cluster.live_pods("app=gemma")) and len(p) == 2 and p)[0]
    rc, doc, _, err = cluster.kvwatch("drain", target, "--yes", "--via", "direct", "--grace-period", "3", "--poll", "0.5",
                                      "--idle-timeout", "60", timeout=180)
    assert rc == 0, (doc, err)
    assert doc["plan"]["data"]["mechanism"] == "evict" and doc["plan"]["data"]["grace_s"] == 3, doc["plan"]
    ev = [r for r in doc["requests"] if r["path"].split("?")[0].endswith(f"/pods/{target}/eviction")]
    assert len(ev) == 1 and ev[0]["body"]["deleteOptions"]["gracePeriodSeconds"] == 3, ev
    wait_for(f"{target} gone", lambda: target not in cluster.live_pods("app=gemma"))

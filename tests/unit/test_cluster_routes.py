"""How a drain takes a pod out of every route without detaching it from its controller (pure)."""

from __future__ import annotations

from tui.core.cluster.routes import blocked_message, budgets_for, choose_rotation, endpoint_listing, routes_to

LABELS = {"app": "llama", "serving": "true", "pod-template-hash": "abc"}


def svc(name: str, selector: dict) -> dict:
    return {"metadata": {"name": name}, "spec": {"selector": selector}}


def test_routes_are_services_and_inference_pools_that_select_the_pod() -> None:
    pools = [{"metadata": {"name": "p1"}, "spec": {"selector": {"app": "llama"}}},  # v1alpha2: a plain map
             {"metadata": {"name": "p2"}, "spec": {"selector": {"matchLabels": {"app": "other"}}}}]  # v1: a LabelSelector
    routes = routes_to(LABELS, [svc("llama", {"app": "llama"}), svc("none", {}), svc("x", {"app": "x"})], pools)
    assert [str(r) for r in routes] == ["Service llama", "InferencePool p1"]


def test_a_label_the_controller_does_not_select_is_chosen() -> None:
    routes = routes_to(LABELS, [svc("llama", {"app": "llama", "serving": "true"})])
    rot = choose_rotation(LABELS, routes, "Deployment", {"matchLabels": {"app": "llama"}}, "draining")
    assert (rot.key, rot.mechanism) == ("serving", "label")


def test_helm_create_service_needs_a_quarantine_for_a_deployment() -> None:
    routes = routes_to(LABELS, [svc("llama", {"app": "llama"})])
    rot = choose_rotation(LABELS, routes, "Deployment", {"matchLabels": {"app": "llama"}}, "draining")
    assert (rot.key, rot.mechanism) == ("app", "quarantine")


def test_match_expressions_protect_a_statefulset_pod() -> None:
    sel = {"matchLabels": {"app": "llama"}, "matchExpressions": [{"key": "serving", "operator": "In", "values": ["true"]}]}
    routes = routes_to(LABELS, [svc("llama", {"app": "llama", "serving": "true"})])
    rot = choose_rotation(LABELS, routes, "StatefulSet", sel, "draining")
    assert rot.mechanism == "refused" and rot.key is None and "cannot be detached" in rot.error


def test_every_route_must_be_broken_by_the_one_label() -> None:
    routes = routes_to(LABELS, [svc("a", {"serving": "true"}), svc("b", {"app": "llama"})], [])
    rot = choose_rotation(LABELS, routes, "Deployment", {"matchLabels": {"app": "llama"}}, "draining")
    assert rot.mechanism == "refused" and rot.key is None  # neither label alone leaves both Services
    cfg = choose_rotation(LABELS, routes, "Deployment", {"matchLabels": {"app": "llama"}}, "draining", configured="serving")
    assert cfg.mechanism == "refused" and "Service b" in cfg.error


def test_budgets_endpoints_and_the_blocked_message() -> None:
    pdbs = [{"metadata": {"name": "llama"}, "spec": {"selector": {"matchLabels": {"app": "llama"}}},
             "status": {"disruptionsAllowed": 0, "desiredHealthy": 2, "currentHealthy": 2, "expectedPods": 2}},
            {"metadata": {"name": "empty"}, "spec": {"selector": {}}, "status": {}}]
    b = budgets_for(LABELS, pdbs)
    assert [x.name for x in b] == ["llama"]  # an empty selector matches nothing (eviction.go)
    assert blocked_message(b[0]).startswith("blocked by PDB llama: 0 disruptions allowed")
    slices = [{"metadata": {"name": "s1"}, "endpoints": [{"addresses": ["10.0.0.1"]}]},
              {"metadata": {"name": "s2"}, "endpoints": [{"addresses": ["10.0.0.2"], "targetRef": {"uid": "u1"}}]}]
    assert endpoint_listing(slices, "10.0.0.1", "u9") == ["s1"] and endpoint_listing(slices, "10.9.9.9", "u1") == ["s2"]
    assert endpoint_listing(slices, "10.9.9.9", "u9") == []

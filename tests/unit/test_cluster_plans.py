"""The pure plan builders on literal API objects: no client, no server (what a scriptable action
CLI or a separate executor would build the same plans with)."""

from __future__ import annotations

import copy

import jsonpatch

from tui.core.cluster.base import Target
from tui.core.cluster.plans import (
    DEFAULT_ROTATION_LABEL,
    ROTATION_ANNOTATION,
    bad_replicas,
    build_cordon_plan,
    build_drain_plan,
    build_scale_plan,
    build_uncordon_plan,
    rotation_label,
)

POD = {
    "metadata": {
        "namespace": "llm",
        "name": "llama-7f9c-abcde",
        "uid": "u-1",
        "labels": {"app": "llama", "serving": "true"},
        "annotations": {"note": "x"},
    }
}


def test_cordon_then_uncordon_restores_the_label_and_drops_the_record() -> None:
    out = build_cordon_plan(POD, "serving", "draining", ["a note"], context="kind")
    assert out.ok and out.patch_type == "json" and out.warnings == ("a note",)
    cordoned = jsonpatch.apply_patch(copy.deepcopy(POD), out.patch)
    assert cordoned["metadata"]["labels"]["serving"] == "draining"
    assert ROTATION_ANNOTATION in cordoned["metadata"]["annotations"]

    again = build_cordon_plan(cordoned, "serving", "draining")
    assert again.errors == ("llama-7f9c-abcde is already out of rotation (serving=draining)",)

    back = build_uncordon_plan(cordoned)
    assert back.ok and back.data == {"label": "serving", "value": "true", "undo": True}
    restored = jsonpatch.apply_patch(cordoned, back.patch)
    assert restored == POD


def test_uncordon_refuses_a_pod_kvwatch_did_not_take_out() -> None:
    plan = build_uncordon_plan(POD)
    assert plan.errors == ("the pod was not taken out of rotation by kvwatch",)


def test_scale_plan_and_its_refusal() -> None:
    t = Target("Deployment", "llm", "llama")
    assert bad_replicas(t, 3) is None
    for bad in (-1, True, "2"):
        refused = bad_replicas(t, bad, readonly=False)
        assert refused is not None and not refused.ok
    plan = build_scale_plan(t, 2, 3, ["slow"], requires_typed_name=True)
    assert plan.subresource == "scale" and plan.requires_typed_name
    assert jsonpatch.apply_patch({"spec": {"replicas": 2}}, plan.patch) == {"spec": {"replicas": 3}}
    # the test op guards against a count that changed since it was read
    try:
        jsonpatch.apply_patch({"spec": {"replicas": 4}}, plan.patch)
    except jsonpatch.JsonPatchTestFailed:
        pass
    else:
        raise AssertionError("a stale scale patch applied")


def test_drain_plan_starts_a_spare_only_with_a_known_owner() -> None:
    t = Target("Pod", "llm", "p-1")
    with_owner = build_drain_plan(t, "llama", 2, "serving", "draining", 30)
    assert with_owner.diff.splitlines()[0] == "1. scale deployment/llama 2 -> 3; wait until the spare is ready"
    assert with_owner.diff.splitlines()[-1] == "then: restore deployment/llama to 2 replicas (restore key)"
    no_owner = build_drain_plan(t, None, None, "serving", "draining", 30, errors=["cannot read"])
    assert no_owner.diff.splitlines()[0].startswith("2. label pod/p-1 serving=draining")
    assert not no_owner.ok and no_owner.data["owner"] is None


def test_rotation_label_is_one_the_service_selects_and_the_owner_does_not() -> None:
    pod = copy.deepcopy(POD)
    pod["metadata"]["labels"]["pod-template-hash"] = "7f9c"
    pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "llama-7f9c", "controller": True}]
    svc = {"metadata": {"name": "llama"}, "spec": {"selector": {"app": "llama", "serving": "true"}}}
    other = {"metadata": {"name": "other"}, "spec": {"selector": {"app": "qwen"}}}
    assert rotation_label(pod, {"app": "llama"}, [other, svc]) == ("serving", ["Service llama selects serving=true"])
    # a Service that selects only on the owner's labels: changing one would orphan the pod
    key, notes = rotation_label(pod, {"app": "llama", "serving": "true"}, [svc])
    assert key == DEFAULT_ROTATION_LABEL and "configure a rotation label" in notes[0] and "Deployment" in notes[0]
    key, notes = rotation_label(pod, {}, [other])
    assert key == DEFAULT_ROTATION_LABEL and notes[0].startswith("no Service selects this pod")

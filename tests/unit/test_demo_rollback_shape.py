"""The demo's roll back sends the same JSON Patch as the real cluster's (`build_rollback_plan`,
`kubectl rollout undo` client side): the whole pod template tested and replaced, the previous args
recorded in an annotation. A demo that rehearses a different patch rehearses the wrong thing."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_cluster_sim import DEP, make, until_done
from tui.core.cluster.base import PREVIOUS_ARGS_ANNOTATION, EditArgsRequest
from tui.core.cluster.plans import build_rollback_plan


def _shape(ops: list[dict]) -> list[tuple[str, str]]:
    return [(op["op"], op["path"]) for op in ops]


async def test_demo_rollback_patch_has_the_real_shape(tmp_path: Path) -> None:
    f, c = make(tmp_path, replicas=2)
    ns = f.namespace
    assert (await c.apply(await c.plan_edit_args(EditArgsRequest(ns, DEP, {"max-num-seqs": 16})))).ok
    await until_done(c, ns)
    plan = await c.plan_rollback(ns, DEP)
    assert plan.patch_type == "json"
    test, replace_ = plan.patch[0], plan.patch[1]
    assert _shape(plan.patch[:2]) == [("test", "/spec/template"), ("replace", "/spec/template")]
    for op in (test, replace_):  # a pod template, as the API server holds it
        assert set(op["value"]) >= {"metadata", "spec"}, op["value"]
        assert op["value"]["spec"]["containers"][0]["name"] == "vllm"
    assert "16" in test["value"]["spec"]["containers"][0]["args"]
    assert "16" not in replace_["value"]["spec"]["containers"][0]["args"]
    recorded = [op for op in plan.patch[2:] if PREVIOUS_ARGS_ANNOTATION.replace("/", "~1") in op["path"]
                or PREVIOUS_ARGS_ANNOTATION in str(op.get("value"))]
    assert recorded, plan.patch
    # the same operations, in the same order, as the real builder makes from the same Deployment
    real = build_rollback_plan(*c.rollback_inputs(ns, DEP))
    assert _shape(plan.patch) == _shape(real.patch) and plan.patch == real.patch
    assert plan.data["to_revision"] == 1 and (await c.apply(plan)).ok

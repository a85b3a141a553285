"""One gpu-memory-utilization policy: the runbook's raise and OOM steps, `kvwatch audit`'s
headroom rule and the edit form's presets agree (issue 11 item 3)."""

from __future__ import annotations

import pytest

from tui.core.audit import audit_workload
from tui.core.cluster.args.changes import preset
from tui.core.cluster.args.parse import parse_container
from tui.core.diagnosis import Thresholds
from tui.core.diagnosis import gmu_policy as P
from tui.core.diagnosis.runbook import runbook
from tui.core.model import PodInfo

from .diagnosis_helpers import history_of, series

T = Thresholds()


def deployment(gmu: float | None, mml: int = 8192) -> dict:
    args = ["--model", "m", "--max-num-seqs", "16", "--max-num-batched-tokens", "8192", "--max-model-len", str(mml)]
    if gmu is not None:
        args += ["--gpu-memory-utilization", f"{gmu:g}"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "ns"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1", "command": ["vllm", "serve"], "args": args}]}}}}


def audit_passes(gmu: float, mml: int = 8192) -> bool:
    (check,) = [c for c in audit_workload(deployment(gmu, mml), T).checks if c.id == "gpu-memory-utilization"]
    return check.status == "pass"


def pressured(gmu: float, pod=None, n: int = 40):
    pre = [0.0]
    for i in range(1, n):
        pre.append(pre[-1] + (3.0 if i >= 20 else 0.0))
    return history_of(series(n, kv=lambda i: 0.97 if i >= 20 else 0.5, preempt=lambda i: pre[i],
                             waiting=lambda i: 6.0 if i >= 20 else 0.0, running=lambda i: 3.0 if i >= 20 else 20.0,
                             pod=pod, cache={"gpu_memory_utilization": f"{gmu:g}"}))


@pytest.mark.parametrize("long_ctx", [False, True])
def test_the_audit_passes_exactly_up_to_the_policy_ceiling(long_ctx):
    mml = 65536 if long_ctx else 8192
    top = P.ceiling(T, long_ctx)
    assert top == (0.6 if long_ctx else 0.7)  # prevention.md
    assert audit_passes(top, mml) and not audit_passes(round(top + 0.05, 2), mml)


@pytest.mark.parametrize("now", [0.5, 0.6, 0.65, 0.7, 0.8, 0.9])
def test_the_runbook_raises_toward_not_past_the_ceiling_and_the_audit_agrees(now):
    h = pressured(now)
    end = h.scrapes[-1].ts
    rb = runbook(h, end, T, rollouts=[], applied={"edit:max_num_seqs": end - 600}, args={"gpu-memory-utilization": now})
    head = rb.step("headroom")
    want = P.raise_to(now, T)
    if want is None:  # at or above the ceiling: the supply side is done, no raise offered
        assert "gpu-memory-utilization" not in head.suggest and "ceiling" in head.answer
    else:
        got = float(head.suggest["gpu-memory-utilization"])
        assert got == want and now < got <= P.ceiling(T) and audit_passes(got)


@pytest.mark.parametrize("now", [0.6, 0.7, 0.8, 0.9, 0.95])
def test_oom_steps_and_presets_are_the_emergency_steps_and_pass_the_audit(now):
    pod = PodInfo("ns", "p", restarts=2, last_termination_reason="OOMKilled", last_exit_code=137)
    h = pressured(now, pod=pod)
    rb = runbook(h, h.scrapes[-1].ts, T, rollouts=[], args={"gpu-memory-utilization": now})
    lower = float(rb.step("oom").suggest["gpu-memory-utilization"])
    assert lower == P.lower_for_oom(now, T) and lower < now and audit_passes(lower)
    cmd = parse_container(deployment(now)["spec"]["template"]["spec"]["containers"][0])
    for key, step in zip(("gmu-0.7", "gmu-0.6"), P.emergency_steps(T), strict=False):
        assert preset(cmd, key)["gpu-memory-utilization"] == step and audit_passes(step)


def test_lowering_gpu_memory_utilization_is_offered_for_oom_only():
    assert P.preset_refusal("gmu-0.7", "kv-pressure", oom=False)  # shrinks the pool: worse thrash
    assert P.preset_refusal("gmu-0.6", "overloaded", oom=False)
    assert P.preset_refusal("gmu-0.7", "kv-pressure", oom=True) is None
    assert P.preset_refusal("seqs-50", "kv-pressure", oom=False) is None
    assert P.preset_refusal("gmu-0.7", "healthy", oom=False) is None  # no incident: prevention

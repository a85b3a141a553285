"""Pure parts of the cluster core: context policy, audit log, pod/owner translation, rollout
verdicts, grace-period arithmetic, text sanitising."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tui.core.cluster.audit import AuditLog, default_path
from tui.core.cluster.base import Condition, ContextPolicy, DeploymentInfo, PodRef, ReplicaSetInfo, policy_for, sanitize
from tui.core.cluster.plans import compute_rollout, grace_warnings, owner_of, pod_info, prestop_sleep_s


@pytest.mark.parametrize(
    "context,expected",
    [
        ("prod-eu-1", ContextPolicy(readonly=True, production=True)),
        ("prod-us-canary", ContextPolicy(readonly=False, production=True)),
        ("staging", ContextPolicy(readonly=False, production=False)),
        ("kind-dev", ContextPolicy()),
    ],
)
def test_policy_for_most_specific_pattern(context: str, expected: ContextPolicy) -> None:
    cfg = {"contexts": {"prod-*": {"readOnly": True, "production": True}, "prod-us-canary": {"production": True}, "staging": {"readonly": False}}}
    assert policy_for(context, cfg) == expected
    assert policy_for(context, None) == ContextPolicy()


def test_audit_log_lines_and_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "kvwatch" / "audit.jsonl"
    log = AuditLog()
    log.record(user="sre", context="prod", action="scale", target="deployment/x -n y", diff="-replicas: 1\n+replicas: 2", ok=True, message="scaled", status=200, patch=[{"op": "replace"}])
    log.record(user="sre", context="prod", action="edit", target="deployment/x -n y", ok=False, message="refused: read-only")
    lines = log.path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert set(first) == {"time", "user", "context", "action", "target", "diff", "patch", "result"}
    assert first["result"] == {"ok": True, "message": "scaled", "status": 200} and first["time"].endswith("+00:00")
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600
    assert [e["action"] for e in log.read()] == ["scale", "edit"]


def test_audit_log_failure_is_kept_not_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = AuditLog(blocker / "audit.jsonl")  # parent is a file: cannot be created
    entry = log.record(user="u", context="c", action="scale", target="t", ok=True, message="m")
    assert entry["action"] == "scale" and log.last_error and "audit log" in log.last_error
    assert log.read() == []


def _pod(**status) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"pod-template-hash": "abc12"}, "ownerReferences": [{"kind": "ReplicaSet", "name": "llama-abc12", "controller": True}]},
        "spec": {"containers": [{"name": "sidecar", "image": "envoy"}, {"name": "vllm", "command": ["vllm", "serve", "m"]}], "nodeName": "n1"},
        "status": status,
    }


def test_pod_info_reads_the_vllm_container_status() -> None:
    p = _pod(
        phase="Running",
        podIP="10.0.0.5",
        conditions=[{"type": "Ready", "status": "False"}],
        containerStatuses=[
            {"name": "sidecar", "restartCount": 9, "state": {"running": {}}},
            {"name": "vllm", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}},
        ],
    )
    info = pod_info(p)
    assert (info.restarts, info.last_termination_reason, info.last_exit_code, info.phase, info.ready) == (4, "OOMKilled", 137, "CrashLoopBackOff", False)
    assert (info.owner_kind, info.owner_name, info.node, info.pod_ip) == ("Deployment", "llama", "n1", "10.0.0.5")
    pending = pod_info(_pod(phase="Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]))
    assert pending.phase == "Unschedulable"


def test_owner_of() -> None:
    assert owner_of(_pod()) == ("Deployment", "llama")
    bare_rs = _pod()
    bare_rs["metadata"]["labels"] = {}
    assert owner_of(bare_rs) == ("ReplicaSet", "llama-abc12")
    sts = _pod()
    sts["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "qwen", "controller": True}]
    assert owner_of(sts) == ("StatefulSet", "qwen")
    orphan = _pod()
    orphan["metadata"]["ownerReferences"] = []
    assert owner_of(orphan) == (None, None)


@pytest.mark.parametrize(
    "pre,expected",
    [
        ({"exec": {"command": ["sleep", "20"]}}, 20),
        ({"exec": {"command": ["/bin/sh", "-c", "sleep 45 && kill -TERM 1"]}}, 45),
        ({"sleep": {"seconds": 15}}, 15),
        ({"httpGet": {"path": "/drain", "port": 8000}}, 0),
    ],
)
def test_prestop_sleep(pre: dict, expected: int) -> None:
    assert prestop_sleep_s({"lifecycle": {"preStop": pre}}) == expected


def test_grace_warnings_arithmetic() -> None:
    spec = {"terminationGracePeriodSeconds": 100, "containers": [{"name": "vllm", "command": ["vllm", "serve", "m", "--shutdown-timeout", "90"], "lifecycle": {"preStop": {"sleep": {"seconds": 10}}}}]}
    assert grace_warnings({"spec": spec}, 100) == []
    w = grace_warnings({"spec": spec}, 99)
    assert len(w) == 1 and w[0].startswith("the delete grace period (99s) is shorter than vLLM's --shutdown-timeout (90s) + preStop sleep (10s)")
    spec["terminationGracePeriodSeconds"] = None  # absent: Kubernetes' default 30 s
    assert any("terminationGracePeriodSeconds (30s)" in x for x in grace_warnings({"spec": spec}, 200))


def _info(**kw) -> DeploymentInfo:
    base = dict(name="d", namespace="ns", replicas=2, ready=2, updated=2, available=2, current=2, generation=3, observed_generation=3)
    base.update(kw)
    return DeploymentInfo(**base)


def _rs(*pods: PodRef) -> ReplicaSetInfo:
    return ReplicaSetInfo("d-new", 3, 2, 0, 0, tuple(pods), "", 100.0)


PENDING = {"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}}
DEADLINE = (Condition("Progressing", "False", "ProgressDeadlineExceeded", "timed out"),)


@pytest.mark.parametrize(
    "info,pods,refs,state,reason",
    [
        (_info(), [], (), "done", "successfully rolled out: 2/2 available"),
        (_info(observed_generation=2), [], (), "progressing", "waiting for the Deployment spec update to be observed"),
        (_info(updated=1, current=3), [], (), "progressing", "1 of 2 new replicas updated"),
        (_info(current=3), [], (), "progressing", "1 old replicas pending termination"),
        (_info(available=1), [], (), "progressing", "1 of 2 updated replicas available (model loading)"),
        (_info(updated=1), [PENDING], (), "stuck", "1/2 updated; waiting for GPUs: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
        (_info(updated=1, conditions=DEADLINE), [], (), "stuck", "progress deadline exceeded: timed out"),
        (_info(updated=1), [], (PodRef("p", "CrashLoopBackOff", False, restarts=3),), "failed", "p is CrashLoopBackOff (3 restarts): check its logs (--previous)"),
        (_info(updated=1, conditions=(Condition("ReplicaFailure", "True", "FailedCreate", "exceeded quota: gpu"),)), [], (), "failed", "replica failure: exceeded quota: gpu"),
    ],
)
def test_rollout_verdicts(info: DeploymentInfo, pods: list, refs: tuple, state: str, reason: str) -> None:
    st = compute_rollout(info, _rs(*refs), (), pods, now=160.0)
    assert (st.state, st.reason) == (state, reason)
    assert st.elapsed_s == 60.0
    assert st.finished == (state in ("done", "failed"))


def test_sanitize_drops_colours_and_shows_other_controls() -> None:
    assert sanitize("\x1b[1;31mERROR\x1b[0m CUDA out of memory") == "ERROR CUDA out of memory"
    assert sanitize("title\x1b]0;evil\x07 done") == "title done"
    assert sanitize("bell\x07 nul\x00") == "bell\\x07 nul\\x00"


def test_policy_from_kvwatch_config() -> None:
    from tui.core.config import Config, ContextProfile

    cfg = Config(contexts=(ContextProfile("prod-*", readonly=True, production=True), ContextProfile("prod-canary", production=True)))
    assert policy_for("prod-canary", cfg) == ContextPolicy(readonly=False, production=True)  # exact name first
    assert policy_for("prod-eu", cfg) == ContextPolicy(readonly=True, production=True)
    assert policy_for("dev", cfg) == ContextPolicy()

"""The audit's "limits documented" warning names the annotation keys it looks for."""

from __future__ import annotations

from pathlib import Path

from tui.core.audit import audit_workload, load_manifests

DATA = Path(__file__).parent / "data"


def test_missing_limit_annotations_are_named():
    defaults, _long = (audit_workload(o) for o in load_manifests((DATA / "audit-bad.yaml").read_text()))
    check = next(c for c in defaults.checks if c.id == "limits-documented")
    assert check.status == "warn"
    for key in ("max-input-tokens", "concurrency-limit", "gpu-memory-target"):
        assert key in check.detail, check.detail

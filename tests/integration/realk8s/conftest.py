"""One real Kubernetes control plane (shared/realk8s: etcd, kube-apiserver, the controllers, the
scheduler and a simulated node) for the whole test session, started once with its own state dir
under pytest's tmp dir and always stopped. Each test works in its own namespace."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from .common import Cluster, find_realk8s


HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`, as .ci/test runs it) every test here goes to one
    worker, so the session's control plane starts once, not once per worker."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("realk8s"))


@pytest.fixture(scope="session")
def realk8s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home, why = find_realk8s()
    if home is None:
        if os.environ.get("REALK8S_REQUIRED"):
            pytest.fail(why)
        pytest.skip(why)
    state = tmp_path_factory.mktemp("realk8s")
    env = {**os.environ, "PYTHON": sys.executable, "REALK8S_DIR": str(state)}  # its kubelet needs our packages
    up = subprocess.run(["bash", str(home / "up.sh")], env=env, capture_output=True, text=True, timeout=300)
    try:
        if up.returncode != 0:
            last = (up.stderr.strip().splitlines() or ["no output"])[-1]
            if up.returncode == 3 and not os.environ.get("REALK8S_REQUIRED"):
                pytest.skip(f"realk8s cannot run here: {last}")
            pytest.fail(f"realk8s up.sh failed (exit {up.returncode}):\n{up.stderr[-4000:]}")
        info = dict(shlex.split(line)[1].split("=", 1) for line in up.stdout.splitlines() if line.startswith("export "))
        info["REALK8S_HOME"] = str(home)
        info["REALK8S_MANIFESTS"] = str(home / "manifests")
        yield info
    finally:
        # up.sh stops what it started on failure; down.sh is harmless then
        subprocess.run(["bash", str(home / "down.sh")], env=env, capture_output=True, timeout=120)


@pytest.fixture
def cluster(realk8s: dict[str, str], tmp_path: Path) -> Iterator[Cluster]:
    """A fresh namespace on the shared control plane; deleted afterwards. Its workloads and pods
    go at once (no grace period), so the next test has the node's GPUs to itself."""
    c = Cluster(realk8s, f"t-{uuid.uuid4().hex[:8]}", tmp_path)
    c.kubectl("create", "namespace", c.ns)
    try:
        yield c
    finally:
        c.kubectl("delete", "deployments,statefulsets,replicasets,horizontalpodautoscalers", "--all", "-n", c.ns, "--wait=false", check=False)
        c.kubectl("delete", "pods", "--all", "-n", c.ns, "--grace-period=0", "--force", check=False)
        c.kubectl("delete", "namespace", c.ns, "--wait=false", check=False)

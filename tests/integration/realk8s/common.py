"""Helpers for the tests against the real control plane: where shared/realk8s is, kubectl and
kvwatch as subprocesses, the example manifests in a test's own namespace, and the API server's
audit log (what a client really sent)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[3]
READ_VERBS = ("get", "list", "watch")


def find_realk8s() -> tuple[Path | None, str]:
    """(the realk8s folder, "") or (None, why not): $REALK8S_HOME, else shared/ beside the
    checkout (../shared in CI), else two levels up (a worktree under wt/)."""
    tried = []
    env = os.environ.get("REALK8S_HOME")
    candidates = [Path(env)] if env else [ROOT.parent / "shared" / "realk8s", ROOT.parent.parent / "shared" / "realk8s"]
    for c in candidates:
        if (c / "up.sh").is_file():
            return c.resolve(), ""
        tried.append(str(c))
    return None, f"realk8s not found (tried {', '.join(tried)}; set REALK8S_HOME)"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Poll until check() is truthy; its value. Fails with `what` after `timeout`."""
    end = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {v!r})")
        time.sleep(every)


class Cluster:
    """One test's view of the shared control plane: its namespace, kubectl, kvwatch, audit log."""

    def __init__(self, info: dict[str, str], ns: str, tmp: Path) -> None:
        self.info, self.ns, self.tmp = info, ns, tmp
        self.kubeconfig = info["KUBECONFIG"]
        self.audit_log = info["REALK8S_AUDIT_LOG"]

    # -- kubectl ------------------------------------------------------------------------------
    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        r = subprocess.run([self.info["REALK8S_KUBECTL"], *args], env={**os.environ, "KUBECONFIG": self.kubeconfig},
                           capture_output=True, text=True, input=stdin, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def get(self, kind: str, name: str = "", *, ns: bool = True) -> dict:
        args = ["get", kind, *([name] if name else []), "-o", "json", *(["-n", self.ns] if ns else [])]
        return json.loads(self.kubectl(*args).stdout)

    def apply(self, manifest: str) -> None:
        """Apply a YAML text; `namespace: llm` in it becomes this test's namespace."""
        self.kubectl("apply", "-f", "-", stdin=re.sub(r"\bnamespace: llm\b", f"namespace: {self.ns}", manifest))

    def apply_example(self, *names: str) -> None:
        """shared/realk8s/manifests/<name>.yaml in this namespace."""
        for n in names:
            self.apply((Path(self.info["REALK8S_MANIFESTS"]) / f"{n}.yaml").read_text())

    def rollout_wait(self, target: str, timeout: int = 90) -> None:
        self.kubectl("rollout", "status", "-n", self.ns, target, f"--timeout={timeout}s", timeout=timeout + 30)

    def pods(self, selector: str = "") -> list[dict]:
        sel = ["-l", selector] if selector else []
        return json.loads(self.kubectl("get", "pods", "-n", self.ns, *sel, "-o", "json").stdout)["items"]

    def live_pods(self, selector: str) -> list[str]:
        """Names of the pods not being deleted, sorted."""
        return sorted(p["metadata"]["name"] for p in self.pods(selector) if not p["metadata"].get("deletionTimestamp"))

    # -- kvwatch ------------------------------------------------------------------------------
    def kvwatch(self, *argv: str, json_out: bool = True, timeout: float = 120, ns: bool = True,
                env: dict[str, str] | None = None) -> tuple[int, dict | None, str, str]:
        """Run `kvwatch ARGV --kubeconfig ... -n NS [--json]`: (exit, the JSON document or None, stdout, stderr)."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
        e = {**keep, "HOME": str(self.tmp / "home"), "XDG_CONFIG_HOME": str(self.tmp / "cfg"),
             "XDG_STATE_HOME": str(self.tmp / "state"), "NO_COLOR": "1", **(env or {})}
        cmd = [sys.executable, "-m", "tui.cli", *argv, "--kubeconfig", self.kubeconfig,
               *(["-n", self.ns] if ns else []), *(["--json"] if json_out else [])]
        r = subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        doc = None
        if json_out and r.stdout.strip():
            doc = json.loads(r.stdout)
        return r.returncode, doc, r.stdout, r.stderr

    # -- the API server's audit log -----------------------------------------------------------
    def audit_mark(self) -> int:
        return os.path.getsize(self.audit_log)

    def audit_after(self, offset: int, until: Callable[[list[dict]], bool] | None = None, timeout: float = 10.0) -> list[dict]:
        """Audit events (stage ResponseComplete) of this namespace's and cluster-scoped requests
        written after byte `offset`; polls until `until(events)` holds or `timeout` passes.
        Without `until`: until a marker request sent now is in the log, so that every request
        that finished before this call is there too."""
        end = time.monotonic() + timeout
        if until is None:
            marker = f"audit-marker-{uuid.uuid4().hex[:10]}"
            self.kubectl("get", "configmaps", "-n", self.ns, "--field-selector", f"metadata.name={marker}")

            def until(evs: list[dict]) -> bool:
                return any(marker in e.get("requestURI", "") for e in evs)
        while True:
            with open(self.audit_log, "rb") as f:
                f.seek(offset)
                evs = [json.loads(line) for line in f.read().splitlines() if line.strip()]
            evs = [e for e in evs if e.get("stage") == "ResponseComplete"
                   and (e.get("objectRef") or {}).get("namespace") in (None, self.ns)]
            if until(evs) or time.monotonic() > end:
                return evs
            time.sleep(0.1)


def writes(evs: list[dict]) -> list[tuple]:
    """(verb, resource[/subresource], name, HTTP status, server-side dry run?) of each non-read request."""
    out = []
    for e in evs:
        if e["verb"] in READ_VERBS:
            continue
        o = e.get("objectRef") or {}
        res = o.get("resource", "") + ("/" + o["subresource"] if o.get("subresource") else "")
        out.append((e["verb"], res, o.get("name"), e["responseStatus"]["code"], "dryRun=All" in e["requestURI"]))
    return out


def by_user(evs: list[dict], user: str) -> list[dict]:
    return [e for e in evs if (e.get("user") or {}).get("username") == user]


def from_kvwatch(evs: list[dict]) -> list[dict]:
    """The events of kvwatch's requests (the Python client), not the test's own kubectl."""
    return [e for e in evs if not str(e.get("userAgent", "")).startswith("kubectl/")]


def connect(c: Cluster, **kw: Any):
    """kvwatch's own Kubernetes adapter on this test's namespace (audit log in the test's tmp)."""
    from tui.core.cluster.audit import AuditLog
    from tui.core.cluster.kube import KubeCluster

    return KubeCluster.connect(kubeconfig=c.kubeconfig, namespace=c.ns, via="direct",
                               audit=AuditLog(c.tmp / "audit.jsonl"), **kw)


def kvwatch_on_tty(c: Cluster, *argv: str, answer: str = "", stdout_tty: bool = True,
                   wait_for_text: str = "", timeout: float = 90) -> tuple[int | None, str, str]:
    """Run kvwatch with a terminal as stdin and stderr (and stdout unless `stdout_tty` is
    False: then stdout is a pipe, as in `kvwatch ... --json | jq`). `answer` is typed once
    `wait_for_text` shows on the terminal. Returns (exit or None when it was still running at
    `timeout`: then it is killed, terminal transcript, piped stdout)."""
    import os as _os
    import pty
    import select

    master, slave = pty.openpty()
    keep = {k: v for k, v in _os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
    e = {**keep, "HOME": str(c.tmp / "home"), "XDG_CONFIG_HOME": str(c.tmp / "cfg"),
         "XDG_STATE_HOME": str(c.tmp / "state"), "NO_COLOR": "1", "TERM": "dumb"}
    out_path = c.tmp / "stdout.txt"
    with open(out_path, "wb") as out_file:
        proc = subprocess.Popen([sys.executable, "-m", "tui.cli", *argv, "--kubeconfig", c.kubeconfig, "-n", c.ns],
                                cwd=ROOT, env=e, stdin=slave, stderr=slave, stdout=slave if stdout_tty else out_file,
                                start_new_session=True)
        _os.close(slave)
        buf, sent, end = b"", not answer, time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                r, _, _ = select.select([master], [], [], 0.2)
                if r:
                    try:
                        chunk = _os.read(master, 4096)
                    except OSError:  # EIO: every holder of the terminal closed it
                        break
                    if not chunk:
                        break
                    buf += chunk
                if not sent and wait_for_text.encode() in buf:
                    _os.write(master, answer.encode())
                    sent = True
                if proc.poll() is not None and not r:
                    break
            rc = proc.wait(timeout=max(1.0, end - time.monotonic())) if proc.poll() is None and time.monotonic() < end else proc.poll()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _os.close(master)
    return rc, buf.decode("utf-8", "replace").replace("\r\n", "\n"), out_path.read_text()

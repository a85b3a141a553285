"""In-pod commands through the exec API (read-only ones: nvidia-smi).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from ..values import ClusterError, sanitize
from .transport import KubeTransport


class KubeExec(KubeTransport):
    """Read-only commands inside pods."""

    async def exec_in_pod(self, namespace: str, pod: str, container: str | None, argv: Sequence[str]) -> str:
        """Run a read-only command (nvidia-smi) in a pod through the exec API; its stdout+stderr.

        pods/exec is a `create` verb, so it is refused under --readonly like any other write."""
        if self.readonly:
            raise ClusterError("readonly", "read-only: pods/exec (in-pod nvidia-smi) is not sent")
        from kubernetes import client
        from kubernetes.stream import stream

        kw: dict[str, Any] = {"command": list(argv), "stderr": True, "stdin": False, "stdout": True, "tty": False}
        if container:
            kw["container"] = container

        def run() -> str:
            # kubernetes/stream/stream.py _websocket_request swaps `call_api` on the ApiClient it is given for the
            # whole exec (and two overlapping execs can leave it swapped for good): each exec gets its own client
            # over the same Configuration, so scrapes, lists and patches on the shared one stay plain HTTP
            api = client.ApiClient(self.api.configuration)
            try:
                out: str = stream(client.CoreV1Api(api).connect_get_namespaced_pod_exec, pod, namespace, **kw)
                return out
            finally:
                api.close()

        try:
            return await asyncio.to_thread(run)
        except Exception as e:  # noqa: BLE001 - the transport's failure becomes the sampler's message
            raise ClusterError("server", f"exec in {pod}: {type(e).__name__}: {sanitize(str(e))[:160]}") from None

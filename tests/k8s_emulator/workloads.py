"""Realistic vLLM workloads and an official client pointed at the emulator."""

from __future__ import annotations

from typing import Any

import kmock


def vllm_deployment(
    name: str = "llama",
    ns: str = "serving",
    replicas: int = 2,
    *,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: list[dict] | None = None,
    labels: dict[str, str] | None = None,
    grace: int | None = 60,
    prestop_sleep: int | None = None,
    strategy: dict | None = None,
    progress_deadline: int = 600,
) -> dict:
    sel = {"app": name}
    pod_labels = {**sel, "serving": "true", **(labels or {})}
    container: dict[str, Any] = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.10.0",
        "command": command if command is not None else ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"],
        "args": args if args is not None else ["--max-num-seqs", "256", "--gpu-memory-utilization", "0.9", "--max-model-len", "8192", "--port", "8000"],
        "ports": [{"containerPort": 8000, "name": "http"}],
        "resources": {"limits": {"nvidia.com/gpu": "1"}},
    }
    if env:
        container["env"] = env
    if prestop_sleep:
        container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", str(prestop_sleep)]}}}
    spec: dict[str, Any] = {"containers": [container, {"name": "log-shipper", "image": "fluent/fluent-bit:3.0"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": sel},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": sel},
            "strategy": strategy or {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "progressDeadlineSeconds": progress_deadline,
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
    }


def vllm_service(name: str = "llama", ns: str = "serving") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": {"app": name, "serving": "true"}, "ports": [{"port": 80, "targetPort": 8000}]},
    }


def client_for(server: kmock.Server, timeout_retries: int = 0) -> Any:
    """An official `kubernetes` ApiClient pointed at the emulator (no credentials)."""
    from kubernetes import client

    cfg = client.Configuration(host=str(server.url).rstrip("/"))
    cfg.retries = timeout_retries
    return client.ApiClient(cfg)



def vllm_statefulset(name: str = "qwen", ns: str = "serving", replicas: int = 3, **spec: Any) -> dict:
    """The vLLM pod template as a StatefulSet (headless Service `name`); `spec` adds or overrides fields."""
    sts = vllm_deployment(name, ns, replicas)
    sts["kind"] = "StatefulSet"
    for k in ("strategy", "progressDeadlineSeconds"):
        sts["spec"].pop(k)
    sts["spec"].update(serviceName=name, **spec)
    return sts

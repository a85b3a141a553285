"""The metrics port read from a pod spec: --port (expanded $(VAR)), named containerPorts, KServe."""

from __future__ import annotations

from tui.core.cluster.args import is_vllm_container
from tui.core.cluster.convert import metrics_port


def pod(command: list[str], args: list[str], env: list[dict] | None = None, ports: list[dict] | None = None) -> dict:
    c = {"name": "server", "image": "registry.example.com/serve:1", "command": command, "args": args, "env": env or [], "ports": ports or []}
    return {"spec": {"containers": [c]}}


def test_inline_port_with_an_env_reference() -> None:
    p = pod(["vllm", "serve", "m"], ["--port=$(PORT)"], env=[{"name": "PORT", "value": "9200"}])
    assert metrics_port(p) == 9200


def test_port_in_a_shell_script_with_shell_expansion() -> None:
    p = pod(["sh", "-c"], ["exec vllm serve m --port ${PORT}"], env=[{"name": "PORT", "value": "9300"}])
    assert metrics_port(p) == 9300


def test_an_unresolvable_reference_falls_back_to_the_named_port() -> None:
    p = pod(["vllm", "serve", "m"], ["--port", "$(PORT)"], env=[{"name": "PORT", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}], ports=[{"name": "http", "containerPort": 8100}])
    assert metrics_port(p) == 8100


def test_metrics_named_port_wins_over_http() -> None:
    p = pod(["vllm", "serve", "m"], [], ports=[{"name": "http", "containerPort": 8100}, {"name": "metrics", "containerPort": 9400}])
    assert metrics_port(p) == 9400


def test_kserve_huggingfaceserver_needs_the_vllm_backend() -> None:
    hf = ["python", "-m", "huggingfaceserver"]
    assert is_vllm_container(pod(hf, ["--model_name=m", "--backend", "vllm"])["spec"]["containers"][0])
    assert not is_vllm_container(pod(hf, ["--model_name=m", "--backend=huggingface"])["spec"]["containers"][0])
    assert metrics_port(pod(hf, ["--model_name=m", "--backend=vllm"])) == 8080
    assert metrics_port(pod(hf, ["--model_name=m", "--backend=vllm", "--http_port=8085"])) == 8085

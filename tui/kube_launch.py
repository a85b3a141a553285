"""Kubernetes live mode: `kvwatch [--context CTX] [-n NS | -A] [-l SEL] [--port 8000] [--via proxy|direct]`.

The default source when no `--url` is given: kubeconfig (or the in-cluster service account) with
the official client. Credentials come only from those files; nothing here reads them from argv
or prints them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

from .core.config import Config
from .core.sources.budget import DEFAULT_PROXY_CONCURRENCY, DEFAULT_PROXY_RPS


def add_kube_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("kubernetes (the source when no --url is given)")
    g.add_argument("--context", default=None, help="kube context (default: the kubeconfig's current one)")
    g.add_argument("--kubeconfig", default=None, metavar="FILE",
                   help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
    where = g.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", default=None, help="namespace to watch (default: the context's)")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="watch vLLM pods in every namespace")
    g.add_argument("-l", "--selector", default=None,
                   help="label selector of the vLLM pods (default: found by their container command/image)")
    g.add_argument("--port", type=_port, default=None,
                   help="metrics port in the pods (default: the container's own --port with $(VAR) expanded, else a "
                        "containerPort named metrics or http, else 8000; KServe huggingfaceserver 8080)")
    g.add_argument("--via", choices=("proxy", "direct"), default="proxy",
                   help="read /metrics through the API server's pod proxy (default; works from a bastion) "
                        "or directly from the pod IPs")
    g.add_argument("--proxy-rps", type=_positive(float), default=DEFAULT_PROXY_RPS, metavar="N",
                   help="at most N /metrics requests per second through the API server's pod proxy (default 40). "
                        "Each is a full request to the API server that priority-and-fairness does not limit "
                        "(proxy is long-running): 256 pods at 40/s are each read every 6.4 s. Raise it only "
                        "with the control plane's owners; --via direct costs the API server nothing")
    g.add_argument("--proxy-concurrency", type=_positive(int), default=DEFAULT_PROXY_CONCURRENCY, metavar="N",
                   help="at most N pod-proxy requests open at once (default 8; each holds an API server connection)")
    g.add_argument("--gpu-exec", action="store_true",
                   help="opt-in: run nvidia-smi inside each vLLM pod (pods/exec) for GPU memory/util/throttle "
                        "when no DCGM exporter is scraped; at most once per --gpu-exec-interval per pod; "
                        "off under --readonly (exec is a create)")
    g.add_argument("--gpu-exec-interval", type=float, default=60.0, metavar="SECONDS",
                   help="seconds between in-pod nvidia-smi runs per pod (default 60)")


def _positive(kind: type) -> "Callable[[str], Any]":
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be more than 0")
        return value

    return parse


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (1-65535)")
    return port


def audit_path(cfg: Config) -> Path | None:
    """The audit log file from the config (None: the XDG state default)."""
    return Path(os.path.expanduser(cfg.audit_log)) if cfg.audit_log else None


def kube_config_missing(kubeconfig: str | None) -> str | None:
    """Why no cluster can be reached from here, or None when some config exists."""
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        return None if os.path.isfile(path) else f"--kubeconfig {kubeconfig}: no such file"
    if os.environ.get("KUBECONFIG") or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    if os.path.isfile(os.path.expanduser("~/.kube/config")):
        return None
    return ("nothing to watch: no --url, no kubeconfig ($KUBECONFIG, ~/.kube/config) and not inside a pod. "
            "Give --url http://HOST:PORT, --kubeconfig FILE, or try the simulated fleet: kvwatch demo")


def connect(args: argparse.Namespace, cfg: Config):
    """A KubeCluster for the parsed options; ClusterError with a one-line message if not."""
    from .core.cluster.audit import AuditLog
    from .core.cluster.kube import KubeCluster

    return KubeCluster.connect(
        context=args.context,
        kubeconfig=os.path.expanduser(args.kubeconfig) if args.kubeconfig else None,
        namespace=args.namespace,
        all_namespaces=bool(args.all_namespaces),
        selector=args.selector,
        port=args.port,
        via=args.via,
        proxy_rps=getattr(args, "proxy_rps", DEFAULT_PROXY_RPS),
        proxy_concurrency=getattr(args, "proxy_concurrency", DEFAULT_PROXY_CONCURRENCY),
        readonly=bool(args.readonly),
        policy_config=cfg,
        audit=AuditLog(audit_path(cfg), unaudited_ok=bool(getattr(args, "allow_unaudited", False))),
    )


def _connect_or_report(args: argparse.Namespace):
    """The KubeCluster for the options, or None after one line on stderr saying why not."""
    from .core.cluster.base import ClusterError
    from .launch import apply_config

    cfg = apply_config(args)
    why = kube_config_missing(args.kubeconfig)
    if why:
        print(f"kvwatch: {why}", file=sys.stderr)
        return None
    try:
        cluster = connect(args, cfg)
    except ClusterError as e:
        print(f"kvwatch: {e.message}", file=sys.stderr)
        return None
    except Exception as e:  # noqa: BLE001 - e.g. a kubeconfig that is not YAML; its text may hold secrets
        where = args.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        print(f"kvwatch: cannot load Kubernetes config {where}: {type(e).__name__}", file=sys.stderr)
        return None
    args.context = cluster.context  # the app's context profile (theme, read-only, production)
    if cluster.readonly:
        args.readonly = True
    return cluster


def run_kube(args: argparse.Namespace) -> int:
    from .core.sources.kube import ClusterSource
    from .launch import recording, run

    cluster = _connect_or_report(args)
    if cluster is None:
        return 2
    gpu_exec = None
    if args.gpu_exec and not cluster.readonly:
        from .core.sources.gpu.nvidia_smi import NvidiaSmiExec

        gpu_exec = NvidiaSmiExec(cluster.exec_in_pod, min_interval_s=max(5.0, args.gpu_exec_interval))
    elif args.gpu_exec:
        print("kvwatch: --gpu-exec is off under --readonly (pods/exec is a create request)", file=sys.stderr)
    return run(args, ClusterSource(cluster, timeout=args.timeout, gpu_exec=gpu_exec, keep_raw=recording(args)))


def with_cluster(args: argparse.Namespace, prom) -> int:
    """`--prometheus URL` plus Kubernetes flags: Prometheus rows joined to the pod watch."""
    from .core.sources.prom_kube import PrometheusWithCluster
    from .core.sources.kube import ClusterSource
    from .launch import recording, run

    cluster = _connect_or_report(args)
    if cluster is None:
        return 2
    return run(args, PrometheusWithCluster(prom, ClusterSource(cluster, timeout=args.timeout,
                                                               keep_raw=recording(args))))

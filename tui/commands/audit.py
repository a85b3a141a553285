"""`kvwatch audit`: the prevention checklist over vLLM Deployments, as a CI gate.

Reads manifests (`--file`, repeatable, `-` for stdin; several YAML documents per file) or the
Deployments / StatefulSets in the cluster. Exit code: 0 when every check passes, 1 when one
fails (with --strict, a warning too), 2 when the input cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "audit",
        help="check vLLM Deployments against the prevention checklist (exit 1 on failure)",
        description="Are the KV limits explicit and sane? max-num-seqs / max-num-batched-tokens / "
                    "max-model-len set, gpu-memory-utilization <= 0.7 (0.6 for long context), concurrency "
                    "that fits the KV capacity, prefix caching / chunked prefill, limits documented in "
                    "annotations, metrics port and readiness probe. Exit 0 = pass, 1 = a check failed, "
                    "2 = unreadable input.",
    )
    src = p.add_argument_group("what to audit (default: the cluster)")
    src.add_argument("--file", "-f", action="append", default=[], metavar="YAML",
                     help="manifest file with one or more Deployments / StatefulSets ('-' = stdin); repeatable")
    src.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    src.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    src.add_argument("--namespace", "-n", default=None, help="namespace (default: the context's)")
    src.add_argument("--all-namespaces", "-A", action="store_true", help="every namespace")
    src.add_argument("--selector", "-l", default=None, help="label selector for the workloads")
    src.add_argument("--container", default=None, help="the vLLM container's name (default: detected)")
    cap = p.add_argument_group("KV capacity for the concurrency check (annotations win)")
    cap.add_argument("--kv-cache-tokens", type=int, default=None, metavar="N",
                     help="KV capacity per replica in tokens (the engine's 'GPU KV cache size')")
    cap.add_argument("--tokens-per-request", type=int, default=None, metavar="N",
                     help="expected prompt + output tokens per request (default: documented limits, else max-model-len)")
    cap.add_argument("--model-config", default=None, metavar="JSON", help="the model's config.json (architecture)")
    cap.add_argument("--gpu-memory-gib", type=float, default=None, help="GPU memory per GPU, GiB")
    cap.add_argument("--weights-gib", type=float, default=None, help="model weights per GPU, GiB")
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="machine-readable result")
    out.add_argument("--strict", action="store_true", help="warnings fail the audit too")
    p.set_defaults(func=run)


def _read_inputs(files: list[str]) -> list:
    from tui.core.audit import ManifestError, load_manifests

    objs = []
    for f in files:
        try:
            text = sys.stdin.read() if f == "-" else open(f, encoding="utf-8").read()
        except FileNotFoundError:
            raise ManifestError(f"{f}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ManifestError(f"{f}: cannot read: {getattr(e, 'strerror', None) or e}") from None
        objs.extend(load_manifests(text, "stdin" if f == "-" else f))
    return objs


def _hints(args: argparse.Namespace):
    from tui.core.audit import CapacityHints, ManifestError, gib
    from tui.core.diagnosis.capacity import arch_from_config

    model = None
    if args.model_config:
        try:
            with open(args.model_config, encoding="utf-8") as fh:
                model = arch_from_config(json.load(fh))
        except (OSError, ValueError) as e:
            raise ManifestError(f"{args.model_config}: {getattr(e, 'strerror', None) or e}") from None
    return CapacityHints(
        kv_cache_tokens=args.kv_cache_tokens,
        tokens_per_request=args.tokens_per_request,
        model=model,
        gpu_memory_bytes=gib(args.gpu_memory_gib) if args.gpu_memory_gib else None,
        weights_bytes=gib(args.weights_gib) if args.weights_gib is not None else None,
    )


def _rules_check(api):
    """Whether kvwatch's alerting rules are installed; a failed lookup is a finding, never fatal."""
    from tui.core.alerting.installed import CHECK_ID, TITLE, rules_check
    from tui.core.audit import SKIP, Check
    from tui.core.cluster.kube import map_error

    try:
        return rules_check(api)
    except Exception as e:  # noqa: BLE001 - the client raises many types; the audit goes on without it
        return Check(CHECK_ID, TITLE, SKIP, f"cannot list PrometheusRules: {map_error(e)}")


def run(args: argparse.Namespace) -> int:
    from tui.core.audit import ManifestError, audit_all, fetch_workloads, render_table
    from tui.core.config import load_config

    cfg = load_config()
    cluster_checks = []  # findings about the cluster as a whole (prevention: alerting rules installed)
    try:
        hints = _hints(args)
        if args.file:
            objs = _read_inputs(args.file)
            where = ", ".join(args.file)
            only_vllm = False
        else:
            from tui.core.cluster.base import ClusterError
            from tui.core.cluster.kube import KubeCluster, map_error

            try:
                cluster = KubeCluster.connect(context=args.context or cfg.context, kubeconfig=args.kubeconfig,
                                              namespace=args.namespace or cfg.namespace)
                ns = None if args.all_namespaces else (cluster.namespace or "default")
                objs = fetch_workloads(cluster.api, ns, args.selector or cfg.selector)
                cluster_checks = [_rules_check(cluster.api)]
            except ClusterError as e:
                raise ManifestError(f"cluster: {e}") from None
            except Exception as e:  # noqa: BLE001 - the client raises many types; map them all
                raise ManifestError(f"cluster: {map_error(e)}") from None
            where = "all namespaces" if ns is None else f"namespace {ns}"
            only_vllm = True
    except ManifestError as e:
        print(f"kvwatch audit: {e}", file=sys.stderr)
        return 2
    audits = audit_all(objs, cfg.thresholds, hints, args.container, only_vllm=only_vllm)
    if not audits:
        print(f"kvwatch audit: no vLLM Deployments or StatefulSets found in {where}", file=sys.stderr)
        return 2
    failed = any(a.failed for a in audits)
    warned = any(c.status == "warn" for a in audits for c in (*a.checks, *cluster_checks))
    code = 1 if failed or (args.strict and warned) else 0
    if args.json:
        print(json.dumps({"workloads": [a.as_dict() for a in audits], "failed": failed, "warnings": warned,
                          "strict": args.strict, "exit_code": code,
                          "cluster": [c.as_dict() for c in cluster_checks]}, indent=2))
    else:
        print(render_table(audits))
        for c in cluster_checks:
            print(f"cluster: {c.status:<4}  {c.title}: {c.detail}")
        if args.strict and warned and not failed:
            print("warnings fail the audit (--strict)")
    return code

"""`kvwatch drain | scale | edit-args | rollout`: the mitigation keys as scriptable commands.

They build the same plans the keys build (same checks, confirmation and audit log). Only the
options are declared here; the handler (`action_run`) and the Kubernetes client are imported
when one of these commands actually runs. Exit: 0 done (or planned with --dry-run), 1 refused
or failed, 2 usage error.
"""

from __future__ import annotations

import argparse

KIND_HELP = "KIND/NAME as kubectl spells it: deployment/llama, statefulset/vllm (a bare NAME is a Deployment)"


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: the same flags given before the subcommand (kvwatch --context X drain POD) are kept
    keep = argparse.SUPPRESS
    g = p.add_argument_group("cluster")
    g.add_argument("-n", "--namespace", default=keep, help="namespace (default: the context's)")
    g.add_argument("--context", default=keep, help="kube context (default: the kubeconfig's current one)")
    g.add_argument("--kubeconfig", default=keep, metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    g.add_argument("--readonly", action="store_true", default=keep, help="refuse every mutating request (exit 1); reads still work")
    g.add_argument("--via", choices=("proxy", "direct"), default=keep,
                   help="drain: read the pod's load through the API server's pod proxy (default) or from the pod IP")
    g.add_argument("--allow-unaudited", action="store_true", default=keep,
                   help="act even when the audit log cannot be written (default: refuse the change, exit 1)")
    a = p.add_argument_group("confirmation and output")
    a.add_argument("--dry-run", action="store_true", help="print the plan and send no mutating request (server-side dry runs only)")
    a.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation on the terminal")
    a.add_argument("--confirm", metavar="NAME", default=None,
                   help="in a context marked production, --yes needs this too: the target's name, repeated")
    a.add_argument("--json", action="store_true", default=keep,
                   help='print {"action","target","requests","warnings","refused","result"}: requests are the exact '
                        "mutating HTTP requests (method, path with query, body), in order")
    # no `via` default here: a subparser's default would override `kvwatch --via direct drain POD`
    p.set_defaults(func=_run, all_namespaces=False, selector=None, port=None, config_defaults=False)
    return p


def register(sub) -> None:
    common = _common()
    d = sub.add_parser("drain", parents=[common], help="take a pod out of every route, wait until idle, remove it",
                       description="Spare first, out of every Service / EndpointSlice / InferencePool, wait until the pod's "
                                   "running + waiting reaches 0, then remove it the way its controller allows (pod-deletion-cost "
                                   "scale-down, an eviction that honours PodDisruptionBudgets, or a quarantine).")
    d.add_argument("pod", metavar="POD")
    d.add_argument("--grace-period", type=int, default=None, metavar="S", help="default: the pod's terminationGracePeriodSeconds")
    d.add_argument("--label", default=None, help="the rotation label to change (default: chosen from the Services)")
    d.add_argument("--idle-timeout", type=float, default=300.0, metavar="S", help="seconds to wait for in-flight requests (default 300)")
    d.add_argument("--spare-timeout", type=float, default=900.0, metavar="S", help="seconds to wait for the spare to be ready (default 900)")
    d.add_argument("--force", action="store_true",
                   help="remove the pod even when its load cannot be read (default: stop, put it back, exit 1)")
    d.add_argument("--poll", type=float, default=2.0, metavar="S", help=argparse.SUPPRESS)
    d.set_defaults(action="drain")
    s = sub.add_parser("scale", parents=[common], help="scale a Deployment or StatefulSet")
    s.add_argument("target", metavar="KIND/NAME", help=KIND_HELP)
    s.add_argument("--replicas", type=int, required=True, metavar="N")
    s.set_defaults(action="scale")
    e = sub.add_parser("edit-args", parents=[common], help="change vLLM engine args (validated, with the KV preflight)")
    e.add_argument("target", metavar="KIND/NAME", help=KIND_HELP)
    e.add_argument("--set", dest="sets", action="append", required=True, metavar="KEY=VALUE",
                   help="an engine arg without its dashes, e.g. --set max-num-seqs=32; repeatable")
    e.add_argument("--container", default=None, help="the vLLM container (default: detected)")
    e.set_defaults(action="edit")
    r = sub.add_parser("rollout", parents=[common], help="rollout status | restart | undo, as kubectl computes them")
    r.add_argument("verb", choices=("status", "restart", "undo"))
    r.add_argument("target", metavar="KIND/NAME", help=KIND_HELP + "; status also takes daemonset/NAME")
    r.add_argument("--timeout", type=float, default=0.0, metavar="S", help="status: wait up to S seconds for it to finish, exit 1 if it has not (default: report once; as "
                        "kubectl's --watch=false, exit 0 while it is still progressing, 1 past its progress deadline)")
    r.set_defaults(action="rollout")


def _run(args: argparse.Namespace) -> int:
    from .action_run import run

    return run(args)

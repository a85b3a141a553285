"""`kvwatch demo`: the built-in simulated vLLM fleet, watched through the real pipeline."""

from __future__ import annotations

import argparse
from pathlib import Path


class _ScenarioNames:
    """The scenario names as argparse `choices`, read only when a `demo` command line is checked
    or its help printed: building the CLI parser must not import the simulator (~10-30 ms)."""

    def _names(self) -> list[str]:
        from tui.core.sim.scenarios import SCENARIOS

        return sorted(SCENARIOS)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


def register(sub, live: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "demo",
        parents=[live],
        help="run the simulated vLLM fleet (a game-day trainer) and watch it",
        description="Simulated vLLM replicas serve real /metrics on 127.0.0.1; kvwatch scrapes them.",
    )
    p.add_argument("--scenario", default="steady", choices=_ScenarioNames(), metavar="NAME",
                   help="what the fleet goes through: %(choices)s (default steady)")
    p.add_argument("--replicas", type=int, default=4, help="number of simulated replicas (default 4)")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same incident)")
    p.add_argument("--v0-replicas", type=int, default=0, help="how many replicas speak vLLM V0 metric names")
    p.add_argument("--sglang-replicas", type=int, default=0,
                   help="how many SGLang replicas run beside the vLLM ones (a Deployment of their own)")
    p.set_defaults(func=run_demo, context="demo")  # the simulated cluster's context (config profiles)


def demo_audit_path(cfg) -> Path:
    """The demo's actions are audited apart from real ones: `demo-audit.jsonl` beside the real
    audit log (the config's `audit_log`, else the XDG state default)."""
    from tui.core.cluster.audit import default_path
    from tui.kube_launch import audit_path

    real = audit_path(cfg) or default_path()
    return real.with_name("demo-" + real.name)


def run_demo(args: argparse.Namespace) -> int:
    from tui.core.cluster.audit import AuditLog
    from tui.core.cluster.base import policy_for
    from tui.core.sources.demo import DemoSource
    from tui.core.cluster.sim import SimCluster
    from tui.core.sim.fleet import SimFleet
    from tui.launch import apply_config, run

    if args.replicas < 1:
        raise SystemExit("kvwatch demo: --replicas must be at least 1")
    if args.speed <= 0:
        raise SystemExit("kvwatch demo: --speed must be positive")
    if args.sglang_replicas < 0:
        raise SystemExit("kvwatch demo: --sglang-replicas must not be negative")
    fleet = SimFleet(scenario=args.scenario, replicas=args.replicas, speed=args.speed, seed=args.seed,
                     v0_replicas=args.v0_replicas, sglang_replicas=args.sglang_replicas)
    fleet.start()
    # Every mitigation key works here: a simulated cluster behind the same interface as Kubernetes.
    cfg = apply_config(args)
    context = args.context or "demo"
    cluster = SimCluster(fleet, context=context, readonly=args.readonly, policy=policy_for(context, cfg),
                         audit=AuditLog(demo_audit_path(cfg), unaudited_ok=args.allow_unaudited))
    source = DemoSource(cluster, timeout=2.0, label=args.scenario)  # the header shows the speed ("sim")
    return run(args, source, on_shutdown=fleet.stop)

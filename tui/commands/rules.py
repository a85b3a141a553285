"""`kvwatch rules`: Prometheus alerting and recording rules from the thresholds kvwatch judges with."""

from __future__ import annotations

import argparse
import sys

_DUR_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(text: str) -> float:
    """`30`, `30s`, `1m`, `500ms`: seconds (argparse type)."""
    s = text.strip()
    for unit in ("ms", "s", "m", "h"):
        if s.endswith(unit) and s[: -len(unit)].replace(".", "", 1).lstrip("-").isdigit():
            return float(s[: -len(unit)]) * _DUR_UNITS[unit]
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration like 30s, 1m or 500ms") from None


def _labels(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def register(sub) -> None:
    p = sub.add_parser(
        "rules",
        help="write Prometheus alerting rules for kvwatch's verdicts (rule_files YAML or a PrometheusRule)",
        description="Recording and alerting rules derived from the thresholds kvwatch judges with (defaults and "
                    "the config file's [thresholds] / [windows]): kv-pressure, overloaded, concurrency-capped, "
                    "stalled, node-fault, replica down and the fleet queue/latency alarm. The rules assume "
                    "Prometheus scrapes the engines every --scrape-interval and evaluates them as often. Exit 2 "
                    "when the config or an option makes no sense (nothing is written then).",
    )
    p.add_argument("--format", choices=("rules", "prometheusrule"), default="rules",
                   help="rules: a file for Prometheus' rule_files; prometheusrule: a monitoring.coreos.com/v1 "
                        "PrometheusRule for the Prometheus Operator (default: rules)")
    p.add_argument("--namespace", "-n", default=None, help="the PrometheusRule's namespace")
    p.add_argument("--name", default="kvwatch", help="the PrometheusRule's name (default: kvwatch)")
    p.add_argument("--labels", action="append", default=[], metavar="K=V[,K=V]",
                   help="labels on the PrometheusRule (what the Operator's ruleSelector matches, e.g. "
                        "release=kube-prometheus-stack); repeatable")
    p.add_argument("--by", type=_labels, default=("namespace", "pod"), metavar="LABELS",
                   help="the labels that name a replica in your scrapes (default: namespace,pod)")
    p.add_argument("--gpu-by", type=_labels, default=None, metavar="LABELS",
                   help="the DCGM exporter's labels for the same, one per --by label (e.g. exported_namespace,"
                        "exported_pod when the exporter's own target labels win; default: --by)")
    p.add_argument("--scrape-interval", type=seconds, default=30.0, metavar="DURATION",
                   help="how often Prometheus scrapes the engines; windows counted in scrapes become this "
                        "many seconds each (default: 30s)")
    p.add_argument("--selector", default="", metavar="MATCHERS",
                   help='label matchers added to every engine series, e.g. \'job="vllm"\'')
    p.add_argument("--for", dest="for_s", type=seconds, default=None, metavar="DURATION",
                   help="`for:` of the verdict alerts (default: sustain_points - 1 scrape intervals)")
    p.add_argument("--baseline", type=seconds, default=6 * 3600.0, metavar="DURATION",
                   help="the fleet alarm's baseline: each replica's median over this window (default: 6h)")
    p.add_argument("--runbook-base", default=None, metavar="URL",
                   help="where the runbooks live; each alert links its section (default: runbooks/)")
    p.add_argument("--runbook-url", action="append", default=[], metavar="VERDICT=URL",
                   help="one alert's runbook_url (by verdict or alert name); repeatable")
    p.add_argument("--config", metavar="TOML", default=None,
                   help="thresholds from this config file (default: the user config, as live)")
    p.add_argument("--output", "-o", metavar="FILE", default=None, help="write here instead of stdout")
    p.set_defaults(func=run, config_defaults=False)


def run(args: argparse.Namespace) -> int:
    from tui.core.alerting import RuleOptions, build_groups, render
    from tui.core.alerting.generate import RUNBOOK_BASE
    from tui.core.alerting.render import parse_labels
    from tui.core.config import load_config

    cfg = load_config(args.config)
    if cfg.problems:
        for prob in cfg.problems:
            print(f"kvwatch rules: config: {prob}", file=sys.stderr)
        print("kvwatch rules: refusing to write rules from a config with problems (fix it, or give "
              "--config with a clean file)", file=sys.stderr)
        return 2
    try:
        urls = {}
        for item in args.runbook_url:
            k, sep, v = item.partition("=")
            if not sep or not k or not v:
                raise ValueError(f"--runbook-url {item!r}: expected VERDICT=URL")
            urls[k] = v
        opts = RuleOptions(by=args.by, gpu_by=args.gpu_by, scrape_interval_s=args.scrape_interval,
                           selector=args.selector, runbook_base=args.runbook_base or RUNBOOK_BASE,
                           runbook_urls=urls, for_s=args.for_s, baseline_s=args.baseline)
        groups = build_groups(cfg.thresholds, cfg.windows, opts)
        src = str(cfg.path) if cfg.path else "defaults"
        header = (f"# kvwatch rules: thresholds from {src}, scrape interval {args.scrape_interval:g}s, "
                  f"replicas by {','.join(args.by)}\n")
        text = render(groups, args.format, name=args.name, namespace=args.namespace,
                      labels=parse_labels(args.labels), header=header)
    except ValueError as e:
        print(f"kvwatch rules: {e}", file=sys.stderr)
        return 2
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as e:
            print(f"kvwatch rules: {args.output}: {e.strerror or e}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(text)
    return 0

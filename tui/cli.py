"""kvwatch command line: live modes (demo, --url, Kubernetes, Prometheus) and subcommands.

Live options are shared by the top level and `demo`; other subcommands live in
tui/commands/<name>.py and register themselves (`register(subparsers)`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from .cli_conventions import VersionAction, closed_pipe, url_arg
from .core.config import DefaultFloat, DefaultStr

THEME_NAMES = ("kvwatch-dark", "kvwatch-light", "kvwatch-high-contrast", "kvwatch-colorblind", "kvwatch-mono")

# Subcommand modules; each exposes register(subparsers) and sets `func` on its parser.
COMMANDS = [
    "tui.commands.demo",
    "tui.commands.diagnose",
    "tui.commands.report",
    "tui.commands.audit",
    "tui.commands.gpu",
    "tui.commands.replay",
    "tui.commands.config",
    "tui.commands.actions",
    "tui.commands.rules",
]

EPILOG = """\
examples:
  kvwatch demo --scenario long-prompts             simulated fleet, a game-day exercise
  kvwatch --url http://10.0.0.5:8000               watch vLLM servers given directly
  kvwatch -n inference -l app=vllm                 the vLLM pods of a namespace (kubeconfig)
  kvwatch demo --json --duration 30                headless: one JSON object per refresh
  kvwatch diagnose incident.jsonl.gz               verdict timeline of a recorded incident
  kvwatch report incident.jsonl.gz --audit audit.jsonl -o report.html   its postmortem report

exit status: 0 ok, 1 a check failed (audit), 2 usage or unreadable input, 3 --json read no
endpoint during the whole run, 130 interrupted, 141 stdout closed early (e.g. piped into head)
"""


def live_options() -> argparse.ArgumentParser:
    """Options every live mode takes (a parent parser, so `demo` and the top level share them)."""
    from .core.record.writer import DEFAULT_MAX_BYTES, DEFAULT_ROTATE

    cap = DEFAULT_MAX_BYTES // (1024 * 1024)
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("live view")
    g.add_argument("--interval", type=float, default=DefaultFloat(1.0),
                   help="seconds between refreshes (default 1, or refresh_interval in the config)")
    g.add_argument("--json", action="store_true", help="headless: print one JSON object per refresh; exit "
                   "status 3 when no endpoint could be read during the whole run")
    g.add_argument("--duration", type=float, default=None, help="with --json: stop after this many seconds")
    g.add_argument("--readonly", action="store_true", help="never send a mutating request; hide mitigation keys")
    g.add_argument("--readwrite", action="store_true",
                   help="allow mutating requests even while the config file is broken (read-only then)")
    g.add_argument("--allow-unaudited", action="store_true",
                   help="let mitigation keys act even when the audit log cannot be written (default: refused)")
    g.add_argument("--theme", default=None, help=f"colour theme: {', '.join(THEME_NAMES)} (ctrl+t cycles; "
                   "NO_COLOR forces kvwatch-mono)")
    g.add_argument("--ascii", action="store_true", help="ASCII glyphs only (automatic for TERM=linux consoles)")
    g.add_argument("--record", metavar="FILE", default=None,
                   help="append every scrape to FILE (JSON lines, gzip if FILE ends in .gz) for `kvwatch "
                        f"replay` and `kvwatch diagnose`; size is bounded: at {cap} MiB FILE rotates to "
                        f"FILE.1 and at most {DEFAULT_ROTATE} old files are kept ({cap * (DEFAULT_ROTATE + 1)} "
                        "MiB in all)")
    g.add_argument("--screenshot-dir", default=DefaultStr(""),
                   help="where ctrl+s writes SVG screenshots (default: screenshot_dir in the config, else "
                        "$XDG_DATA_HOME/kvwatch/screenshots)")
    return p


def build_parser() -> argparse.ArgumentParser:
    live = live_options()
    parser = argparse.ArgumentParser(
        prog="kvwatch",
        description="Terminal dashboard for vLLM fleets: spot KV-cache pressure and mitigate it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[live],
    )
    parser.add_argument("--version", action=VersionAction)
    src = parser.add_argument_group("sources")
    src.add_argument("--url", action="append", default=[], metavar="URL", type=url_arg,
                     help="a vLLM server (http://HOST:PORT, /metrics implied); repeat for several")
    src.add_argument("--gpu-url", action="append", default=[], metavar="URL", type=url_arg,
                     help="a DCGM exporter page for the --url of the same position (optional)")
    src.add_argument("--gpu", choices=("auto", "local", "exporter", "none"), default="auto",
                     help="GPU signals for --url servers: local (this node's driver, NVML/amdsmi), exporter "
                          "(--gpu-url only), none; auto = local when a URL is on this host and a driver answers")
    src.add_argument("--timeout", type=float, default=2.0, help="per-scrape timeout in seconds")
    from .kube_launch import add_kube_options

    add_kube_options(parser)
    from .core.sources import prom_args  # the flags only: the source (httpx) loads when used

    prom_args.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in COMMANDS:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name == mod_name:
                continue  # a subcommand not shipped in this build
            raise
        if mod.register.__code__.co_argcount >= 2:
            mod.register(sub, live)
        else:
            mod.register(sub)
    parser.set_defaults(func=run_live)
    return parser


def run_live(args: argparse.Namespace) -> int:
    from .launch import direct_source, run

    if getattr(args, "prometheus", None):
        from .core.sources.base import SourceError
        from .core.sources.prometheus import from_args

        if args.url:
            print("kvwatch: give either --url or --prometheus, not both", file=sys.stderr)
            return 2
        try:
            prom_source = from_args(args)
        except (SourceError, ValueError, OSError) as e:
            print(f"kvwatch: {e}", file=sys.stderr)
            return 2
        if any(getattr(args, k, None) for k in ("context", "kubeconfig", "namespace", "all_namespaces", "selector")):
            # metrics from Prometheus, pods and mitigation keys from the API server
            from .kube_launch import with_cluster

            return with_cluster(args, prom_source)
        return run(args, prom_source)
    if not args.url:  # Kubernetes: kubeconfig or the in-cluster service account
        from .kube_launch import run_kube

        return run_kube(args)
    try:
        source = direct_source(args)
    except ValueError as e:
        print(f"kvwatch: bad --url: {e}", file=sys.stderr)
        return 2
    return run(args, source)


def main(argv: list[str] | None = None) -> int:
    from .core.perf import tune_gc

    tune_gc()
    parser = build_parser()
    args = parser.parse_args(argv)
    if sys.stdout is None:  # started with stdout closed (`>&-`): whatever it prints would vanish
        return _no_stdout("it is closed")
    if getattr(args, "config_defaults", True):  # the config file fills the flags not given
        from .launch import apply_config

        apply_config(args)
    try:
        code = args.func(args) or 0
        sys.stdout.flush()  # a full disk (/dev/full) shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `kvwatch demo --json | head`: the reader has all it wanted
        return closed_pipe()
    except OSError as e:
        if not _stdout_failing():
            raise
        return _no_stdout(e.strerror or str(e))


def _stdout_failing() -> bool:
    """Whether standard output refuses what was written to it (the error came from there)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def _no_stdout(why: str) -> int:
    """One line on stderr; stdout pointed at /dev/null so the interpreter's own last flush of it
    does not print a second error on the way out."""
    print(f"kvwatch: cannot write to standard output: {why}", file=sys.stderr)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        if sys.stdout is not None:
            sys.stdout = open(1, "w", closefd=False)
    except (OSError, ValueError):
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main())

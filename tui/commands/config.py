"""`kvwatch config path|show|example`: where the config file is, what is in effect, a template."""

from __future__ import annotations

import argparse
import sys


def register(sub) -> None:
    p = sub.add_parser("config", help="where the config file is and what it sets",
                       description="The config file is TOML; see `kvwatch config example`.")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    csub.add_parser("path", help="print the config file's path").set_defaults(func=run_path)
    csub.add_parser("show", help="print the settings in effect (file + defaults) and any problems") \
        .set_defaults(func=run_show)
    csub.add_parser("example", help="print a commented example config").set_defaults(func=run_example)
    p.set_defaults(func=run_show, config_defaults=False)
    for a in csub.choices.values():
        a.set_defaults(config_defaults=False)


def run_path(args: argparse.Namespace) -> int:
    from tui.core.config import config_path

    p = config_path()
    print(p)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from tui.bindings import binding_ids, remap_config_problems
    from tui.core.config import config_path, dump_config, load_config

    cfg = load_config()
    where = cfg.path or config_path()
    print(f"# {where}" + ("" if cfg.path else " (not found: defaults)"))
    for p in cfg.problems:
        print(f"# problem: {p}")
        print(f"kvwatch: config: {p}", file=sys.stderr)
    # a remap onto a key in use: reported, but the file still works (the default key is kept)
    for _bid, p in remap_config_problems(cfg):
        print(f"# problem: {p}")
        print(f"kvwatch: config: {p}", file=sys.stderr)
    print(dump_config(cfg, binding_ids()), end="")
    return 1 if cfg.problems else 0


def run_example(args: argparse.Namespace) -> int:
    from tui.core.config import EXAMPLE

    print(EXAMPLE, end="")
    return 0

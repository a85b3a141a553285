"""Command-line habits shared by every subcommand: `--version`, a quiet exit into a closed pipe
(`kvwatch demo --json | head`), and `--url` checked as a usage error before anything starts."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

# 128 + SIGPIPE: what a shell reports for a writer whose reader went away (`yes | head`)
BROKEN_PIPE_EXIT = 141

_HOST = re.compile(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]+")  # a DNS name / IPv4, or IPv6 (brackets gone)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("kvwatch")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class VersionAction(argparse.Action):
    """`--version` that looks the version up only when asked: importlib.metadata costs ~10 ms of
    every start otherwise."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"{parser.prog} {version()}\n")
        parser.exit()


def url_arg(value: str) -> str:
    """argparse `type` for --url / --gpu-url: a scrapeable http(s) URL or a usage error."""
    from .core.sources.direct import normalize_url, redact_url

    try:
        normalize_url(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    host = value.strip().split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    host = host[1:host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
    if not _HOST.fullmatch(host):
        raise argparse.ArgumentTypeError(f"{redact_url(value)!r}: not a URL (expected http://HOST:PORT)")
    return value


def unreadable_input(command: str, path: str, e: OSError) -> str:
    """The one line a subcommand that reads a recording says when the file cannot be opened."""
    from .core.textsafe import clean

    if isinstance(e, FileNotFoundError):
        why = "no such file"
    elif isinstance(e, IsADirectoryError):
        why = "is a directory, not a scrape log"
    else:
        why = f"cannot read: {e.strerror or e}"
    return f"kvwatch {command}: {clean(path)}: {why}"


def closed_pipe() -> int:
    """stdout's reader went away: stop quietly. Point stdout at /dev/null so the interpreter's
    final flush does not print a second BrokenPipeError on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: no real fd (tests)
        pass
    return BROKEN_PIPE_EXIT



def default_screenshot_dir() -> Path:
    """Where ctrl+s writes when neither --screenshot-dir nor the config says: the XDG data dir
    ($XDG_DATA_HOME/kvwatch/screenshots, ~/.local/share/...), never the working directory."""
    base = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative path is invalid and ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "kvwatch" / "screenshots"

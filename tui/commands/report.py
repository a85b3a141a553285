"""`kvwatch report RECORDING [--audit FILE] [--from T --to T] [-o report.html | report.md]`: the
postmortem of a recorded incident, with the mitigations of the audit log on its timeline.

The recording is read as `kvwatch diagnose` reads it (streamed, bounded memory, damage reported
and skipped), with the thresholds of the config file, as live.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="postmortem report (HTML or Markdown) of a recorded incident and its audit log",
        description="Replay a scrape log (what --record writes) and write the incident's report: summary "
                    "(onset, detection, mitigation, recovery), the audit log's actions with the metrics before "
                    "and after, pictures and the evidence at key moments.",
    )
    p.add_argument("file", metavar="RECORDING", help="scrape log (.jsonl or .jsonl.gz)")
    p.add_argument("--audit", metavar="FILE", default=None,
                   help="audit log to join (default: none; kvwatch writes $XDG_STATE_HOME/kvwatch/audit.jsonl, "
                        "the demo its own)")
    p.add_argument("--from", dest="start", metavar="T", default=None,
                   help="report from this time: 2026-11-26T10:00:00Z, 2026-11-26 10:00 (UTC) or unix seconds")
    p.add_argument("--to", dest="end", metavar="T", default=None, help="report up to this time (same forms)")
    p.add_argument("-o", "--output", metavar="FILE", default="report.html",
                   help="report.html (one self-contained page) or report.md (pictures as SVG files beside it); "
                        "default report.html")
    p.add_argument("--config", metavar="TOML", default=None,
                   help="thresholds from this config file (default: the user config, as live)")
    p.set_defaults(func=run, _parser=p, config_defaults=False)


def parse_time(text: str) -> float:
    """Unix seconds, or an ISO date-time (UTC unless it says otherwise). ValueError on a typo."""
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    try:
        when = dt.datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"not a time: {text!r} (give 2026-11-26T10:00:00Z, '2026-11-26 10:00' or unix seconds)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def run(args: argparse.Namespace) -> int:
    from tui.core.config import load_config
    from tui.core.report import build_report, write_report
    from tui.cli_conventions import unreadable_input
    from tui.core.textsafe import clean

    try:
        start = parse_time(args.start) if args.start else None
        end = parse_time(args.end) if args.end else None
    except ValueError as e:
        args._parser.error(str(e))
    if start is not None and end is not None and end <= start:
        args._parser.error("--to must be after --from")
    cfg = load_config(args.config)
    for prob in cfg.problems:
        print(f"kvwatch report: config: {prob}", file=sys.stderr)
    try:
        report = build_report(args.file, args.audit, start, end, cfg.thresholds, cfg.windows)
    except OSError as e:
        print(unreadable_input("report", args.file, e), file=sys.stderr)
        return 2
    for problem in report.problems:
        print(f"kvwatch report: {clean(problem)}", file=sys.stderr)
    if not report.replicas:
        print(f"kvwatch report: {clean(args.file)}: no scrape records in the window", file=sys.stderr)
        return 2
    try:
        written = write_report(report, args.output)
    except OSError as e:
        print(f"kvwatch report: {clean(args.output)}: cannot write: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"kvwatch report: wrote {clean(written[0])}"
          + (f" and {len(written) - 1} picture(s) beside it" if len(written) > 1 else ""))
    return 0

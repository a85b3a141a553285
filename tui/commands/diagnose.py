"""`kvwatch diagnose FILE [--json]` (or `--input FILE`): each replica's verdict timeline from a scrape log.

The log is replayed through the live pipeline in time order, so the verdict at any time uses
only the scrapes up to it, exactly as the dashboard computed it then. Thresholds and windows
come from the config file, as live.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "diagnose",
        help="verdict timeline of each replica in a recorded scrape log",
        description="Replay a scrape log (JSON lines, .gz accepted; what --record writes) through the "
                    "diagnosis and print each replica's verdict timeline and current evidence.",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="scrape log (.jsonl or .jsonl.gz), as `replay FILE`")
    p.add_argument("--input", "-i", metavar="FILE", action=_Once, help="the same, as an option (once)")
    p.add_argument("--json", action="store_true",
                   help='print {"replicas": {NAME: {"verdict", "since", "evidence", "timeline"}}}')
    p.add_argument("--config", metavar="TOML", default=None,
                   help="thresholds from this config file (default: the user config, as live)")
    p.set_defaults(func=run, _parser=p)


class _Once(argparse.Action):
    """A value that may be given once: `-i a -i b` is a usage error, not a silent choice of b."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice: give the scrape log once")
        setattr(namespace, self.dest, values)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    if ts > 1e9:  # wall-clock time
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"t={ts:.1f}s"  # simulated seconds


def _dur(s: float) -> str:
    s = max(0.0, s)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _what_is(path: str) -> str | None:
    """What a file that held no scrape record is, when it is one of kvwatch's own outputs."""
    try:
        with open(path, "rb") as f:
            head = f.read(8 << 20)
    except OSError:
        return None
    docs = []
    for text in (head.split(b"\n", 1)[0], head):  # the first line, then the whole (indented) file
        try:
            docs.append(json.loads(text))
        except ValueError:
            continue
    for doc in docs:
        if isinstance(doc, dict) and isinstance(doc.get("replicas"), list) and "ts" in doc:
            return "kvwatch's --json output (one fleet snapshot per line)"
        if isinstance(doc, dict) and isinstance(doc.get("replicas"), dict) and "scrapes" in doc:
            return "the output of kvwatch diagnose --json"
    return None


def run(args: argparse.Namespace) -> int:
    from tui.core.config import load_config
    from tui.core.offline import diagnose_file
    from tui.cli_conventions import unreadable_input
    from tui.core.textsafe import clean

    if bool(args.file) == bool(args.input):
        args._parser.error("give the scrape log once: diagnose FILE (or --input FILE)")
    args.input = args.input or args.file
    cfg = load_config(args.config)
    for prob in cfg.problems:
        print(f"kvwatch diagnose: config: {prob}", file=sys.stderr)
    try:
        result = diagnose_file(args.input, cfg.thresholds, cfg.windows)
    except OSError as e:
        print(unreadable_input("diagnose", args.input, e), file=sys.stderr)
        return 2
    what = _what_is(args.input) if not result.replicas else None
    if what:  # one line that says what the file is, not one problem per line of it
        print(f"kvwatch diagnose: {clean(args.input)}: this is {what}, not a scrape log; "
              "diagnose reads what `kvwatch --record FILE` writes", file=sys.stderr)
        return 2
    for log_prob in result.problems:
        print(f"kvwatch diagnose: {clean(str(log_prob))}", file=sys.stderr)
    if not result.replicas:
        print(f"kvwatch diagnose: {args.input}: no scrape records found", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, allow_nan=False, default=str))
        return 0
    reps = result.replicas
    t0 = min(r.first_ts for r in reps.values() if r.first_ts is not None)
    t1 = max(r.last_ts for r in reps.values() if r.last_ts is not None)
    print(f"{clean(args.input)}: {len(reps)} replica(s), {result.scrapes} scrape(s), "
          f"{_when(t0)} -> {_when(t1)} ({_dur(t1 - t0)})")
    for name in sorted(reps):
        r = reps[name]
        since = f" since {_when(r.since)}" if r.since is not None else ""
        print(f"\n{clean(name)}: {r.verdict}{since}" + (f" [{r.state}]" if r.state and r.state != "ok" else ""))
        if r.summary:
            print(f"  {clean(r.summary)}")
        print("  timeline:")
        for i, (ts, v) in enumerate(r.timeline):
            end = r.timeline[i + 1][0] if i + 1 < len(r.timeline) else r.last_ts
            print(f"    {_when(ts)}  {v:<19} {_dur((end or ts) - ts)}")
        if r.evidence:
            print("  evidence:")
            for ev in r.evidence:
                mark = "!" if ev.crossed else ("?" if ev.op == "missing" else " ")
                print(f"    {mark} {clean(ev.text)}")
        if r.failed:
            print(f"  failed scrapes: {r.failed} of {r.scrapes}")
    return 0

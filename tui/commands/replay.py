"""`kvwatch replay FILE`: play a recorded scrape log through the same screens as live.

The Monitor, diagnosis and screens are the live ones; only the source differs (tui.core.sources
.replay), so what the replay shows is what the live session showed. Mitigation keys are off.
"""

from __future__ import annotations

import argparse
import json
import sys

from tui.core.config import DefaultStr

KEYS = "keys: p pause/play · < > step one poll · T seek to a time · n next verdict change · q quit"


def register(sub) -> None:
    p = sub.add_parser(
        "replay",
        help="play a recording (--record FILE) through the fleet screens",
        description="Play a scrape log written by --record through the live screens. " + KEYS,
    )
    p.add_argument("file", metavar="FILE", help="scrape log (JSON lines, .gz accepted; a cut last line is fine)")
    p.add_argument("--speed", type=float, default=1.0, help="recorded seconds per second (default 1)")
    p.add_argument("--at", metavar="TIME", default=None,
                   help="start at TIME: HH:MM[:SS], +90s from the start, 50%%, end")
    p.add_argument("--paused", action="store_true", help="start paused")
    p.add_argument("--json", action="store_true",
                   help="headless: one JSON object (as the live --json mode) per recorded poll, as fast as possible")
    p.add_argument("--theme", default=None, help="colour theme (ctrl+t cycles)")
    p.add_argument("--ascii", action="store_true", help="ASCII glyphs only")
    p.add_argument("--screenshot-dir", default=DefaultStr(""), help="where ctrl+s writes SVG screenshots "
                   "(default: screenshot_dir in the config, else $XDG_DATA_HOME/kvwatch/screenshots)")
    p.set_defaults(func=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from tui.core.replay import parse_seek
    from tui.core.sources.replay import ReplaySource
    from tui.launch import apply_config, make_app, make_monitor, report_config, require_terminal

    if not args.speed > 0:
        print("kvwatch replay: --speed must be positive", file=sys.stderr)
        return 2
    cfg = apply_config(args)
    report_config(cfg)
    if args.json:
        return _replay_json(args, cfg)
    try:
        src = ReplaySource.open(args.file, args.speed)
    except OSError as e:
        print(f"kvwatch replay: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    for p in src.problems[:20]:
        print(f"kvwatch replay: {p}", file=sys.stderr)
    if len(src.problems) > 20:
        print(f"kvwatch replay: ... and {len(src.problems) - 20} more problems", file=sys.stderr)
    if not src.rounds:
        print(f"kvwatch replay: no scrapes in {args.file}", file=sys.stderr)
        return 1
    monitor = make_monitor(src, cfg, src.interval)
    k = 1
    if args.at:
        try:
            k = src.index_at(parse_seek(args.at, src.start_ts, src.start_ts, src.end_ts))
        except ValueError as e:
            print(f"kvwatch replay: --at: {e}", file=sys.stderr)
            return 2
    for _ in range(max(1, k)):
        monitor.ingest(src.take())
    if args.paused:
        src.pause()
    args.interval = src.interval
    require_terminal()
    app = make_app(args, monitor, cfg, mode="replay")
    app.run()
    return app.return_code or 0


def _replay_json(args: argparse.Namespace, cfg) -> int:
    """`replay --json`: the recording streamed poll by poll (memory bounded by the history
    window, not the file), one line per poll as the live --json mode prints."""
    from itertools import chain, islice

    from tui.core.export import fleet_json
    from tui.core.record.reader import read_log
    from tui.core.sources.replay import in_time_order, median_interval, polls
    from tui.launch import make_monitor

    said = 0

    def problem(p) -> None:
        nonlocal said
        said += 1
        if said <= 20:
            print(f"kvwatch replay: {p}", file=sys.stderr)

    stream = polls(in_time_order(read_log(args.file, problem)))
    try:
        head = list(islice(stream, 64))  # enough polls to know the recorded refresh interval
    except OSError as e:
        print(f"kvwatch replay: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    if not head:
        print(f"kvwatch replay: no scrapes in {args.file}", file=sys.stderr)
        return 1
    from pathlib import Path
    from types import SimpleNamespace

    names = {s.replica for b in head for s in b}  # the replicas seen so far: the file is not read ahead
    label = SimpleNamespace(description=f"replay {Path(args.file).name} · {len(names)} replicas")
    monitor = make_monitor(label, cfg, median_interval([max(s.ts for s in b) for b in head]))
    for batch in chain(head, stream):
        sys.stdout.write(json.dumps(fleet_json(monitor.ingest(batch))) + "\n")
    if said > 20:
        print(f"kvwatch replay: ... and {said - 20} more problems", file=sys.stderr)
    return 0

"""Turn parsed CLI options into a running Monitor: the screen or the headless JSON loop."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Callable

from .core.monitor import Monitor
from .core.sources.base import Source


def normalise_url(url: str) -> str:
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    return url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"


def direct_source(args: argparse.Namespace) -> Source:
    from .core.sources.direct import DirectSource, Target

    gpu_urls = list(args.gpu_url) + [None] * len(args.url)
    targets = []
    for url, gpu in zip(args.url, gpu_urls):
        metrics_url = normalise_url(url)
        name = metrics_url.split("://", 1)[1].rsplit("/metrics", 1)[0]
        targets.append(Target(name=name, url=metrics_url, gpu_url=gpu))
    desc = f"direct: {len(targets)} server{'s' if len(targets) != 1 else ''}"
    return DirectSource(targets, timeout=args.timeout, description=desc)


def make_recorder(args: argparse.Namespace):
    if not getattr(args, "record", None):
        return None
    from .core.record import Recorder

    return Recorder(args.record)


def run(args: argparse.Namespace, source: Source, on_shutdown: Callable[[], None] | None = None) -> int:
    recorder = make_recorder(args)
    monitor = Monitor(source, on_scrapes=recorder.write if recorder else None)
    try:
        if args.json:
            from .core.headless import run_json

            return asyncio.run(run_json(monitor, args.interval, args.duration))
        from .app import KvwatchApp

        ascii_only = args.ascii or os.environ.get("TERM") == "linux"
        app = KvwatchApp(monitor, args.interval, readonly=args.readonly, theme=args.theme, ascii=ascii_only,
                         screenshot_dir=args.screenshot_dir)
        app.run()
        return app.return_code or 0
    finally:
        if recorder is not None:
            recorder.close()
        if on_shutdown is not None:
            on_shutdown()

"""Turn parsed CLI options into a running Monitor: the screen or the headless JSON loop."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from typing import Callable

from .core.config import Config, is_default, load_config
from .core.monitor import Monitor
from .core.sources.base import Source


def recording(args: argparse.Namespace) -> bool:
    """Scrapes carry their page text (~42 KB each) only for the recorder."""
    return bool(getattr(args, "record", None))


def direct_source(args: argparse.Namespace) -> Source:
    """DirectSource for --url/--gpu-url; ValueError with a user message on a bad URL."""
    from .core.sources.direct import DirectSource, Target, display_name, normalize_url

    mode = getattr(args, "gpu", "exporter")
    gpu_urls = (list(args.gpu_url) if mode != "none" else []) + [None] * len(args.url)
    targets = []
    for url, gpu in zip(args.url, gpu_urls, strict=False):
        metrics_url = normalize_url(url)
        name = display_name(metrics_url)  # no user:password@ on screen or in a recording
        targets.append(Target(name=name, url=metrics_url, gpu_url=normalize_url(gpu) if gpu else None))
    desc = f"direct: {len(targets)} server{'s' if len(targets) != 1 else ''}"
    source = DirectSource(targets, timeout=args.timeout, description=desc, keep_raw=recording(args))
    if source.notice:
        print(f"kvwatch: {source.notice}", file=sys.stderr)
    from .core.sources.local_gpu import LocalGpuSource, choose

    gpus, ports, line = choose(mode, [(t.name, t.url) for t in targets])
    if line:
        print(f"kvwatch: {line}", file=sys.stderr)
    return LocalGpuSource(source, ports, gpus) if gpus is not None else source


def first_scrape(source: Source) -> Callable[[float], list] | None:
    """Start the first scrape of `--url` targets now, in a thread, while the screen's modules
    import (~0.15 s): the first frame can then show data instead of waiting for a poll after
    mount. Its own client (connections belong to one event loop), closed when done; `take(wait)`
    returns its scrapes, or nothing if they are not in within `wait` seconds."""
    from .core.sources.direct import DirectSource

    if type(source) is not DirectSource or not source.targets:
        return None
    box: list[list] = []

    def work() -> None:
        twin = DirectSource(source.targets, timeout=source.timeout, max_bytes=source.max_bytes,
                            clock=source.clock, keep_raw=source.keep_raw, trust_env=source.trust_env)

        async def once() -> list:
            try:
                return await twin.poll()
            finally:
                await twin.close()

        try:
            box.append(asyncio.run(once()))
        except Exception:  # noqa: BLE001 - only a head start: the app's own first poll follows
            pass

    thread = threading.Thread(target=work, name="kvwatch-first-scrape", daemon=True)
    thread.start()

    def take(wait: float) -> list:
        thread.join(wait)
        return box[0] if box else []

    return take


def make_recorder(args: argparse.Namespace):
    if not getattr(args, "record", None):
        return None
    from .core.record import Recorder

    return Recorder(args.record)


def apply_config(args: argparse.Namespace) -> Config:
    """Load the config file once per run and fill in every option the user did not give.

    Flags win over the file. Problems are kept on the Config (`report_config` prints them; the
    app repeats them as notifications)."""
    cfg = getattr(args, "_config", None)
    if cfg is not None:
        return cfg
    cfg = load_config()
    if getattr(args, "readwrite", False):
        cfg = cfg.with_readwrite()  # the explicit way out of a broken file's read-only
    args._config = cfg
    if hasattr(args, "interval") and is_default(args.interval):
        args.interval = cfg.refresh_interval
    if hasattr(args, "screenshot_dir") and is_default(args.screenshot_dir):
        args.screenshot_dir = cfg.screenshot_dir
    for k in ("context", "namespace", "selector", "port"):
        if hasattr(args, k) and getattr(args, k) is None and getattr(cfg, k) is not None:
            setattr(args, k, getattr(cfg, k))
    prof = cfg.profile_for(getattr(args, "context", None))
    if prof is not None and prof.readonly and hasattr(args, "readonly"):
        args.readonly = True  # a read-only context stays read-only whatever the flags say
    if cfg.broken and hasattr(args, "readonly"):
        args.readonly = True  # fail closed: the file may have said read-only for this context
        print(f"kvwatch: config: {cfg.path} cannot be used: running read-only until it is fixed "
              "(or pass --readwrite)", file=sys.stderr)
    return cfg


def report_config(cfg: Config) -> None:
    for p in cfg.problems:
        print(f"kvwatch: config: {p}", file=sys.stderr)


def make_monitor(source: Source, cfg: Config, interval: float, on_scrapes=None) -> Monitor:
    return Monitor(source, thresholds=cfg.thresholds, windows=cfg.windows,
                   history_len=cfg.history_len(interval), on_scrapes=on_scrapes)


def keys_from_terminal() -> str | None:
    """Make sure the dashboard can read its keys: with stdin not a terminal (`< /dev/null`, a
    pipe) the keys come from the controlling terminal (/dev/tty) instead; without one, why the
    dashboard cannot run (the input loop would spin on end-of-file with every key dead)."""
    try:
        if os.isatty(0):
            return None
    except OSError:
        pass
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return ("standard input is not a terminal and there is no controlling terminal to read "
                "keys from: run kvwatch in a terminal, or use --json for scripts")
    try:
        os.dup2(fd, 0)  # dup2 clears close-on-exec on fd 0
    finally:
        os.close(fd)
    return None


def require_terminal() -> None:
    """Before the dashboard runs: keys come from a terminal, or kvwatch says why and exits 2."""
    why = keys_from_terminal()
    if why:
        print(f"kvwatch: {why}", file=sys.stderr)
        raise SystemExit(2)


def make_app(args: argparse.Namespace, monitor: Monitor, cfg: Config, **kw):
    from .app import KvwatchApp
    from .terminal import detect

    ascii_only = bool(getattr(args, "ascii", False)) or detect().ascii
    return KvwatchApp(monitor, args.interval, readonly=getattr(args, "readonly", False), theme=args.theme,
                      ascii=ascii_only, screenshot_dir=args.screenshot_dir, config=cfg, **kw)


class RecordTap:
    """The recorder as the Monitor's `on_scrapes`: the moment the recording stops (a full disk,
    a vanished directory) `on_stop` is told once, so the screen flashes it at once."""

    def __init__(self, recorder, path: str) -> None:
        self.recorder = recorder
        self.path = path
        self.on_stop: Callable[[str], None] | None = None
        self._told = False

    @property
    def error(self) -> str | None:
        e = self.recorder.error
        return f"{e} ({self.path})" if e else None

    def write(self, scrapes) -> None:
        self.recorder.write(scrapes)
        if self.recorder.error and not self._told:
            self._told = True
            if self.on_stop is not None and self.error is not None:
                self.on_stop(self.error)


def _close_on_signals(app_box: list) -> Callable[[], None]:
    """SIGTERM and SIGHUP (a closed tmux window, `kill`) end kvwatch as Ctrl-C does, so the
    `finally` below closes the recording (its gzip trailer) and the source; returns the undo."""
    import _thread
    import signal

    asked: list[int] = []
    timers: list[threading.Timer] = []

    def stop(signum, _frame) -> None:
        app = app_box[0] if app_box else None
        if app is None or not getattr(app, "is_running", False) or asked:
            raise SystemExit(128 + signum)
        asked.append(signum)
        app.exit(return_code=128 + signum)
        # an app still starting may not act on exit() yet: interrupt it as Ctrl-C would after a grace
        timer = threading.Timer(3.0, _thread.interrupt_main)
        timer.daemon = True
        timers.append(timer)
        timer.start()

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_IGN:
            continue  # `nohup kvwatch --json --record ...`: the user asked to outlive the terminal
        try:
            old[sig] = signal.signal(sig, stop)
        except (ValueError, OSError):  # not the main thread (tests): nothing to install
            pass

    def undo() -> None:
        for t in timers:
            t.cancel()  # the app exited in time: no interrupt on the way out
        for sig, h in old.items():
            signal.signal(sig, h)

    return undo


def run(args: argparse.Namespace, source: Source, on_shutdown: Callable[[], None] | None = None) -> int:
    cfg = apply_config(args)
    report_config(cfg)
    try:
        recorder = make_recorder(args)
    except (OSError, ValueError) as e:
        print(f"kvwatch: cannot record to {args.record}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        if on_shutdown is not None:
            on_shutdown()
        return 2
    tap = RecordTap(recorder, args.record) if recorder is not None else None
    monitor = make_monitor(source, cfg, args.interval, on_scrapes=tap.write if tap else None)
    pace = getattr(source, "pace", None)  # publish on the refresh schedule, slow replicas or not
    if pace is not None:
        pace(args.interval)
    # Sources that hold history (Prometheus) open with the detail plots' window already drawn.
    backfill = min(600.0, 300 * args.interval) if hasattr(source, "backfill") else None
    app_box: list = []
    undo_signals = _close_on_signals(app_box)
    try:
        if args.json:
            from .core.headless import run_json

            def extra() -> dict:
                return {"recording_error": tap.error} if tap is not None and tap.error else {}

            return asyncio.run(run_json(monitor, args.interval, args.duration, backfill_s=backfill, extra=extra))
        context = getattr(args, "context", None) or getattr(source, "context", None)
        require_terminal()
        take = first_scrape(source)
        app = make_app(args, monitor, cfg, context=context)
        app_box.append(app)
        if tap is not None:
            tap.on_stop = lambda why: app.notify(why, title="recording", severity="error", timeout=30, markup=False)
        if take is not None and (scrapes := take(0.5)):
            monitor.ingest(scrapes)
        app.backfill_s = backfill
        app.run()
        return app.return_code or 0
    finally:
        undo_signals()
        if recorder is not None:
            recorder.close()
            if recorder.error:
                print(f"kvwatch: {recorder.error} ({args.record})", file=sys.stderr)
        if on_shutdown is not None:
            on_shutdown()

"""The fault matrices (two rounds) against the real TUI in a pty: per case, 2 healthy replicas and one
misbehaving endpoint (tests/faultserver.py), and what the operator would feel.

    python bench/bench_faults.py [--seconds 7] [--timeout 3] [CASE ...]

Per case it prints the healthy replicas' refresh interval (median gap between the requests their
endpoints received: the refresh schedule as the fleet sees it), the key-press-to-screen latency
(`?` until the help screen's text arrives on the pty, median of a few presses) and the child's
peak RSS (VmHWM). About 8 s a case, under 3 minutes for the whole matrix.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import sys
import termios
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.faultserver import ThreadedFaultServer, self_signed  # noqa: E402

# (case, fault mode, options); "healthy" is the baseline
CASES: list[tuple[str, str, dict]] = [
    ("healthy", "healthy", {}),
    ("hang", "hang", {}),
    ("reset", "reset", {}),
    ("http 500", "http500", {}),
    ("redirect loop", "redirect_loop", {}),
    ("html page", "html", {}),
    ("slow-loris", "slowloris", {"every": 2.0}),
    ("50 MB body", "huge", {}),
    ("gzip bomb", "gzip_bomb", {}),
    ("invalid utf-8", "invalid_utf8", {}),
    ("100k series", "many_series", {}),
    ("NaN/+Inf", "nan_inf", {}),
    ("counter reset", "counter_reset", {}),
    ("duplicate series", "duplicate", {}),
    ("escapes/markup", "escapes", {}),
    ("flapping", "flapping", {}),
    ("90k engines", "engines", {}),
    ("5000-char model", "long_model", {}),
    # the second round: https, truncated and oversized bodies, page-format edges, odd counters
    ("https healthy", "healthy", {"tls": True}),
    ("https reset", "reset", {"tls": True}),
    ("https hang", "hang", {"tls": True}),
    ("gzip truncated", "gzip_truncated", {}),
    ("close-cut body", "close_cut", {}),
    ("short length", "short_length", {}),
    ("gzip huge chunk", "chunked_gzip_huge", {}),
    ("https huge chunk", "chunked_gzip_huge", {"tls": True}),
    ("429 retry-after", "rate_limited", {"retry_after": 5}),
    ("100 continue", "continue_first", {}),
    ("20 KB 1st line", "long_first_line", {}),
    ("after # EOF", "after_eof", {}),
    ("protobuf", "protobuf", {}),
    ("engine flip", "engine_flip", {}),
    ("counter step back", "counter_stepback", {}),
    ("out of range", "out_of_range", {}),
    ("answers in 0.3 s", "slow", {"delay": 0.3}),
]
KEY, MARK = b"?", b"esc closes"  # the help screen opens on `?` and says "(esc closes)"


def peak_rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_case(srv: ThreadedFaultServer, mode: str, opts: dict, seconds: float, timeout: float,
             cols: int = 120, rows: int = 36) -> dict:
    healthy = [srv.add("healthy"), srv.add("healthy")]
    bad = srv.add(mode, **opts)
    argv = [sys.executable, "-m", "tui.cli", "--timeout", str(timeout), "--interval", "1"]
    for u in (*healthy, bad):
        argv += ["--url", u]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM")}
    if opts.get("tls"):  # kvwatch trusts the fault server's self-signed certificate
        env["SSL_CERT_FILE"] = self_signed()[0]
    env.update(PYTHONPATH=ROOT, HOME="/nonexistent", XDG_CONFIG_HOME="/nonexistent",  # no user config
               TERM=env.get("TERM", "xterm-256color"), KVWATCH_CONFIG="/nonexistent/kvwatch.toml",
               XDG_STATE_HOME="/tmp/kvwatch-bench-state")
    pid, fd = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.chdir(ROOT)
            os.execve(sys.executable, argv, env)
        finally:
            os._exit(127)
    start = time.monotonic()
    buf = bytearray()
    peak = 0.0

    def pump(until: float, want: bytes | None = None, since: int = 0) -> float | None:
        """Read until `until`; with `want`, return when it appears after offset `since`."""
        nonlocal peak
        while time.monotonic() < until:
            peak = max(peak, peak_rss_mb(pid))
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    return None
                if not data:
                    return None
                buf.extend(data)
                if want is not None and want in buf[since:]:
                    return time.monotonic()
        return None

    latencies = []
    try:
        pump(start + 3.0)  # start-up and the first refreshes
        while time.monotonic() - start < seconds:
            mark = len(buf)
            t0 = time.monotonic()
            os.write(fd, KEY)
            seen = pump(t0 + 3.0, MARK, mark)
            if seen is not None:
                latencies.append(seen - t0)
            os.write(fd, b"\x1b")
            pump(time.monotonic() + 0.8)
        os.write(fd, b"q")
        pump(time.monotonic() + 3.0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    gaps = []
    for u in healthy:
        at = [r.at for r in next(ep.requests for ep in srv.fs.endpoints if ep.url == u)]
        gaps.extend(b - a for a, b in zip(at[1:], at[2:], strict=False))  # past the first (start-up) refresh
    return {
        "interval": statistics.median(gaps) if gaps else None,
        "interval_max": max(gaps) if gaps else None,
        "key_ms": statistics.median(latencies) * 1000 if latencies else None,
        "keys": f"{len(latencies)}",
        "rss": peak,
        "raw_esc": b"\x1b]0;pwned" in buf,  # an OSC from a label reached the terminal
    }


def fmt(v, spec: str) -> str:
    return format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", help="case names (substring match); default: all")
    ap.add_argument("--seconds", type=float, default=7.0, help="seconds per case (default 7)")
    ap.add_argument("--timeout", type=float, default=3.0, help="kvwatch --timeout (default 3)")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.cases or any(s in c[0] for s in args.cases)]
    print(f"kvwatch TUI in a 120x36 pty, 2 healthy + 1 faulty endpoint, --interval 1 --timeout {args.timeout:g}, "
          f"{args.seconds:g} s a case")
    print(f"{'case':<18} {'refresh s':>9} {'max gap s':>9} {'key ms':>7} {'presses':>7} {'peak RSS MB':>11}  note")
    t_all = time.monotonic()
    with ThreadedFaultServer(lifetime=len(cases) * (args.seconds + 10) + 60) as srv:
        for name, mode, opts in cases:
            r = run_case(srv, mode, opts, args.seconds, args.timeout)
            note = "raw escape reached the terminal" if r["raw_esc"] else ""
            if r["interval"] is not None and r["interval"] > 1.1:
                note = (note + "; " if note else "") + "healthy refresh delayed"
            print(f"{name:<18} {fmt(r['interval'], '9.2f')} {fmt(r['interval_max'], '9.2f')} "
                  f"{fmt(r['key_ms'], '7.0f')} {r['keys']:>7} {r['rss']:11.0f}  {note}", flush=True)
    print(f"total {time.monotonic() - t_all:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

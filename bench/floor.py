"""The floor every performance figure is read against: the least work any tool must do to read
a fleet's /metrics pages, measured in the same run, on the same pages, as the figure.

    from bench.floor import measure_floor
    floor = measure_floor(fleet.ports)        # CPU s per page, this process, now
    floor.pct_core(256)                       # % of one core for 256 pages a second
    floor.ratio(cpu_pct, 256)                 # the tool's cost in floors

The floor is a bare `asyncio.Protocol` HTTP/1.1 client fetching every page once over keep-alive
(all endpoints at once, as a 1 Hz refresh does), plus tokenising each page's samples with a
stdlib regex (name, label text, value) and `float()` of every value. A figure measured on a
busy machine is slow and so is its floor; the ratio is what carries from one machine to another.

`measure_floor` times the floor in this process, in a tight loop, just before or after a run.
`BesideFloor` runs it as a process of its own, paced like the tool (every page once a second),
beside the tool over the same window: both then meet the same load at the same moments. On a
shared machine the floor measured before and after a run read 272-518 us a page from one row to
the next, which was most of the spread in the ratios while the tool's own CPU held.

    with BesideFloor(fleet.ports) as floor:   # python bench/floor.py --paced PORT...
        floor.mark(); ...; floor.mark()       # at the window's start and end
        floor.per_page_s()                    # CPU s per page over the window
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

# One exposition-format sample line: name, optional {labels} (greedy to the line's last `}`, so
# a quoted `}` in a label value stays in the labels), value (a timestamp after it is left).
# HELP/TYPE comments and blank lines do not match.
SAMPLE = re.compile(r"^([^#\s{][^\s{]*)(\{.*\})?[ \t]+(\S+)", re.M)

# issue 27's targets, in floors: 256 real-size vLLM V1 pages at 1 Hz after warm-up
TARGETS = {("json", 256): 1.5, ("tui", 256): 2.0}


def tokenise(page: str) -> int:
    """Every sample of `page` split into name, labels and a float value; the count."""
    n = 0
    for _name, _labels, value in SAMPLE.findall(page):
        float(value)
        n += 1
    return n


class BareGet(asyncio.Protocol):
    """HTTP/1.1 keep-alive GET of one fixed URL; the least a client can spend per page."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.buf = bytearray()
        self.need = -1
        self.head = 0
        self.done: asyncio.Future[str] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get(self) -> asyncio.Future[str]:
        assert self.transport is not None
        self.buf.clear()
        self.need = -1
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(self.request)
        return self.done

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.need < 0:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).lower()
            at = head.find(b"content-length:")
            stop = head.find(b"\r\n", at)
            self.need = end + 4 + int(head[at + 15:stop if stop > 0 else None])
            self.head = end + 4
        if len(self.buf) >= self.need and self.done is not None and not self.done.done():
            self.done.set_result(bytes(self.buf[self.head:self.need]).decode("utf-8", "replace"))


@dataclass
class Floor:
    per_page_s: float  # CPU s per page: fetch + tokenise
    fetch_s: float  # of which the bare fetch
    samples: int  # samples per page (the first endpoint's)
    chars: int  # characters per page (the first endpoint's)
    pages: int  # pages measured per rep
    reps: int

    def pct_core(self, endpoints: int, hz: float = 1.0) -> float:
        """% of one core the floor costs for `endpoints` pages `hz` times a second."""
        return 100.0 * self.per_page_s * endpoints * hz

    def ratio(self, cpu_pct: float, endpoints: int, hz: float = 1.0) -> float:
        return cpu_pct / self.pct_core(endpoints, hz)

    def describe(self) -> str:
        return (f"floor: {self.per_page_s * 1e6:.0f} us CPU per page ({self.fetch_s * 1e6:.0f} us bare asyncio.Protocol "
                f"keep-alive fetch + {(self.per_page_s - self.fetch_s) * 1e6:.0f} us regex tokenise + float() of "
                f"{self.samples} samples; {self.chars:,}-char pages; median of {self.reps} rounds of {self.pages} pages)")


async def _connect(ports: list[int]) -> list[BareGet]:
    loop = asyncio.get_running_loop()
    conns: list[BareGet] = []
    for p in ports:
        req = (f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nAccept: text/plain;version=0.0.4\r\n"
               f"User-Agent: kvwatch-floor\r\n\r\n").encode()
        _, proto = await loop.create_connection(partial(BareGet, req), "127.0.0.1", p)
        conns.append(proto)
    return conns


async def _rounds(ports: list[int], reps: int) -> tuple[list[float], list[float], int, int]:
    conns = await _connect(ports)
    try:
        pages = await asyncio.gather(*(c.get() for c in conns))  # connect and warm
        samples, chars = tokenise(pages[0]), len(pages[0])
        whole, fetch = [], []
        for _ in range(reps):
            c0 = time.process_time()
            pages = await asyncio.gather(*(c.get() for c in conns))
            c1 = time.process_time()
            for page in pages:
                tokenise(page)
            c2 = time.process_time()
            whole.append((c2 - c0) / len(ports))
            fetch.append((c1 - c0) / len(ports))
    finally:
        for c in conns:
            if c.transport is not None:
                c.transport.close()
    return whole, fetch, samples, chars


def measure_floor(ports: list[int], reps: int = 5) -> Floor:
    """The floor on these endpoints now, in this process (no other work of its own running)."""
    whole, fetch, samples, chars = asyncio.run(_rounds(ports, reps))
    return Floor(statistics.median(whole), statistics.median(fetch), samples, chars, len(ports), reps)


async def _paced(ports: list[int], hz: float) -> None:
    """Every page fetched and tokenised once per 1/hz s, as a refresh at that rate does; a line
    on stdout after each round (its reader counts them). A round that ends past the next one's
    time is followed at once, with no burst to catch up."""
    conns = await _connect(ports)
    due = time.monotonic()
    while True:
        for page in await asyncio.gather(*(c.get() for c in conns)):
            tokenise(page)
        sys.stdout.write("round\n")
        sys.stdout.flush()
        due = max(due + 1.0 / hz, time.monotonic())
        await asyncio.sleep(due - time.monotonic())


class BesideFloor:
    """The floor as a process of its own beside the tool, paced at `hz` (see the module's doc)."""

    def __init__(self, ports: list[int], hz: float = 1.0) -> None:
        self.ports, self.hz = ports, hz
        self.tool = None
        self.marks: list[tuple[float, int]] = []  # (process CPU s, rounds done)

    def __enter__(self) -> "BesideFloor":
        from bench.procmeter import spawn_piped  # noqa: PLC0415 (a bench helper; floor.py stays importable alone)

        argv = [sys.executable, str(Path(__file__).resolve()), "--paced", "--hz", str(self.hz),
                *map(str, self.ports)]
        self.tool = spawn_piped(argv, {"PATH": "/usr/bin:/bin"})
        return self

    def __exit__(self, *exc) -> None:
        if self.tool is not None:
            self.tool.stop()

    def mark(self) -> None:
        from bench.procmeter import tree_cpu_s  # noqa: PLC0415

        assert self.tool is not None
        self.marks.append((tree_cpu_s(self.tool.pid), self.tool.lines))

    @property
    def pages(self) -> int:
        """Pages read between the first and the last mark."""
        return (self.marks[-1][1] - self.marks[0][1]) * len(self.ports)

    def per_page_s(self) -> float:
        """CPU s per page between the first and the last mark (nan if it read none)."""
        return (self.marks[-1][0] - self.marks[0][0]) / self.pages if self.pages else float("nan")

    def pct_core(self, endpoints: int, hz: float = 1.0) -> float:
        return 100.0 * self.per_page_s() * endpoints * hz

    def describe(self) -> str:
        rounds = self.marks[-1][1] - self.marks[0][1]
        return (f"floor beside it: {self.per_page_s() * 1e6:.0f} us CPU per page, a process of its own paced at "
                f"{self.hz:g} Hz over the same window ({rounds} rounds of {len(self.ports)} pages)")


def verdict(mode: str, endpoints: int, ratio: float) -> str:
    target = TARGETS.get((mode, endpoints))
    if target is None:
        return ""
    return f"target <= {target:g}x floor: {'met' if ratio <= target else 'MISSES'}"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="the floor, paced, as a process of its own (BesideFloor)")
    ap.add_argument("--paced", action="store_true", required=True)
    ap.add_argument("--hz", type=float, default=1.0)
    ap.add_argument("ports", type=int, nargs="+")
    a = ap.parse_args()
    try:
        asyncio.run(_paced(a.ports, a.hz))
    except KeyboardInterrupt:
        pass

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
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from dataclasses import dataclass
from functools import partial

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


async def _rounds(ports: list[int], reps: int) -> tuple[list[float], list[float], int, int]:
    loop = asyncio.get_running_loop()
    conns: list[BareGet] = []
    for p in ports:
        req = (f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nAccept: text/plain;version=0.0.4\r\n"
               f"User-Agent: kvwatch-floor\r\n\r\n").encode()
        _, proto = await loop.create_connection(partial(BareGet, req), "127.0.0.1", p)
        conns.append(proto)
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


def verdict(mode: str, endpoints: int, ratio: float) -> str:
    target = TARGETS.get((mode, endpoints))
    if target is None:
        return ""
    return f"target <= {target:g}x floor: {'met' if ratio <= target else 'MISSES'}"

"""Which vLLM log lines signal trouble: the logs screen's filter and triage step 4 read these.

vLLM prints a periodic stats line ("Avg prompt throughput ... GPU KV cache usage: 97.0%", with
"Preemptions: N" on V1) every few seconds; it is INFO, not a warning, and would match any
"kv|cache|preempt" pattern: it is never trouble here (its numbers are on the dashboard). Trouble
is an allocation failure (CUDA OOM), a preemption or KV-space warning, an engine error, or a
Python traceback (kept whole: the lines after "Traceback" up to the exception line).
"""

from __future__ import annotations

import re
from typing import Iterable

# the periodic stats line of V0 (metrics.py) and V1 (loggers.py)
_STATS = re.compile(r"Avg prompt throughput: [\d.]+ tokens/s|GPU KV cache usage: [\d.]+%", re.I)

_KINDS = (
    ("oom", re.compile(
        r"cuda out of memory|outofmemoryerror|out of memory|failed to allocate|cannot allocate|"
        r"no available memory for the cache blocks|kv cache (?:is )?needed|cuda error: out of memory|"
        r"killed worker|worker.*died",
        re.I)),
    ("preemption", re.compile(
        r"is preempted by|preempted .*because|not enough kv cache|insufficient (?:kv|memory|blocks)|"
        r"kv cache (?:is )?full|running out of (?:kv|blocks)",
        re.I)),
    ("engine-error", re.compile(
        r"\b(?:ERROR|CRITICAL)\b|EngineDeadError|EngineCore.*(?:died|failed)|engine core .*(?:died|failed)|"
        r"CUDA error|NCCL error|^[\w.]+(?:Error|Exception): ", re.I)),
)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
# a traceback goes on with indented frames and source, and ends at "SomeError: message"
_TB_FRAME = re.compile(r"^\s+\S|^\s*$")
_TB_END = re.compile(r"^[\w.]+(?:Error|Exception|Interrupt|Exit)\b")


def is_stats(line: str) -> bool:
    return bool(_STATS.search(line))


def kind(line: str) -> str | None:
    """"oom", "preemption", "engine-error", "traceback" or None (not trouble)."""
    if is_stats(line):
        return None
    if _TRACEBACK.search(line):
        return "traceback"
    return next((k for k, rx in _KINDS if rx.search(line)), None)


def trouble_lines(lines: Iterable[str]) -> list[str]:
    """The lines that signal trouble, in order; a traceback with every line of it."""
    out: list[str] = []
    in_tb = False
    for line in lines:
        if in_tb:
            if _TB_FRAME.match(line):
                out.append(line)
                continue
            in_tb = False
            if _TB_END.match(line):
                out.append(line)
                continue
        k = kind(line)
        if k == "traceback":
            in_tb = True
        if k is not None:
            out.append(line)
    return out

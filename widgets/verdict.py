"""How a verdict is written: a symbol and a word always, colour on top (never colour alone)."""

from __future__ import annotations

SYMBOL = {
    "kv-pressure": "▲",
    "node-fault": "✗",
    "down": "✗",
    "stalled": "■",
    "concurrency-capped": "≡",
    "host-bound": "◆",
    "compute-bound": "●",
    "unknown": "?",
    "healthy": "✓",
}
ASCII_SYMBOL = {
    "kv-pressure": "!",
    "node-fault": "X",
    "down": "X",
    "stalled": "#",
    "concurrency-capped": "=",
    "host-bound": "%",
    "compute-bound": "*",
    "unknown": "?",
    "healthy": "+",
}
SHORT = {
    "kv-pressure": "kv-pressure",
    "node-fault": "node-fault",
    "down": "down",
    "stalled": "stalled",
    "concurrency-capped": "conc-capped",
    "host-bound": "host-bound",
    "compute-bound": "compute",
    "unknown": "unknown",
    "healthy": "healthy",
}


def label(verdict: str, *, ascii: bool = False) -> str:
    sym = (ASCII_SYMBOL if ascii else SYMBOL).get(verdict, "?")
    return f"{sym} {SHORT.get(verdict, verdict)}"


def colour_var(verdict: str) -> str:
    return f"verdict-{verdict}"

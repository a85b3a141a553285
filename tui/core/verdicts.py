"""Every verdict kvwatch can give, in one registry: name, severity order, symbols, summary and
colour role.

The rules return these names, the Monitor sorts by this order, the widgets draw these symbols
and words, the themes colour each role and `--json` writes the names, so a verdict is added or
reworded here only. The names are a stable interface: they appear in `--json` lines, `diagnose`
output and recorded sessions, so a value must never change.
"""

from __future__ import annotations

from dataclasses import dataclass

DOWN = "down"
NODE_FAULT = "node-fault"
KV_PRESSURE = "kv-pressure"
STALLED = "stalled"
OVERLOADED = "overloaded"
CONCURRENCY_CAPPED = "concurrency-capped"
LORA_CAPPED = "lora-capped"
HOST_BOUND = "host-bound"
COMPUTE_BOUND = "compute-bound"
STARTING = "starting"
UNKNOWN = "unknown"
HEALTHY = "healthy"


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    symbol: str  # always drawn next to the word: colour is never the only cue
    ascii_symbol: str  # the same on terminals without Unicode
    short: str  # the word in narrow places (the fleet table's verdict column)
    # One-line advice; empty where the diagnosis writes its own (down: the error, unknown: progress,
    # starting: the pod's phase and elapsed time).
    summary: str

    @property
    def colour_role(self) -> str:
        """The theme variable (`$verdict-<name>`) that colours this verdict."""
        return f"verdict-{self.name}"


_SUMMARIES = {  # the one-line advice of each verdict that has a fixed one
    NODE_FAULT: "GPU unhealthy: do not tune the server; drain the replica off this node",
    KV_PRESSURE: "KV cache full and preempting: cap concurrency (max-num-seqs) or add KV headroom",
    STALLED: "requests in flight but the engine makes no progress: wedged, restart it (drain first)",
    OVERLOADED: "a queue persists and KV has no room to raise the cap: arrivals exceed what it completes; scale out",
    CONCURRENCY_CAPPED: "queue held by the concurrency cap with KV and GPU headroom: raise max-num-seqs or scale out",
    LORA_CAPPED: ("admission held by the LoRA adapter slots while generation advances: raise --max-loras / "
                  "--max-cpu-loras or route each adapter to fewer replicas; not a wedge, do not restart"),
    HOST_BOUND: "API server CPU-bound while the GPU idles: CPU / tokenizer / network, not the GPU",
    COMPUTE_BOUND: "GPU busy with effective batching: scale out if latency is over the SLO",
    HEALTHY: "within thresholds",
}

# Most severe first: the fleet screen sorts by this order.
#   name, symbol, ASCII symbol, short word
_ROWS = (
    (DOWN, "✗", "X", "down"),
    (NODE_FAULT, "✗", "X", "node-fault"),
    (KV_PRESSURE, "▲", "!", "kv-pressure"),
    (STALLED, "■", "#", "stalled"),
    (OVERLOADED, "»", ">", "overloaded"),
    (LORA_CAPPED, "◇", "L", "lora-capped"),
    (CONCURRENCY_CAPPED, "≡", "=", "conc-capped"),
    (HOST_BOUND, "◆", "%", "host-bound"),
    (COMPUTE_BOUND, "●", "*", "compute"),
    # a pod still loading its model (HTTP 503, not ready): no fault, sorted below every fault
    (STARTING, "◌", "o", "starting"),
    (UNKNOWN, "?", "?", "unknown"),
    (HEALTHY, "✓", "+", "healthy"),
)
REGISTRY: tuple[Verdict, ...] = tuple(Verdict(*row, summary=_SUMMARIES.get(row[0], "")) for row in _ROWS)

BY_NAME: dict[str, Verdict] = {v.name: v for v in REGISTRY}
VERDICTS: tuple[str, ...] = tuple(v.name for v in REGISTRY)
SEVERITY: dict[str, int] = {v: i for i, v in enumerate(VERDICTS)}
# The advice per verdict, for the verdicts that have a fixed one.
SUMMARY: dict[str, str] = {v.name: v.summary for v in REGISTRY if v.summary}


def colour_role(name: str) -> str:
    """The theme variable of verdict `name` (one not in the registry gets the same pattern)."""
    v = BY_NAME.get(name)
    return v.colour_role if v is not None else f"verdict-{name}"

"""The `:` prompt's language, parsed to data: `:ctx NAME`, `:ns NAME`, `:rollout DP`, `:events`,
`:report`, `:q`. The fleet screen acts on the result; parsing knows nothing of the app or the cluster."""

from __future__ import annotations

from dataclasses import dataclass

SUGGESTIONS = ("ctx ", "ns ", "rollout ", "events", "report", "q")
PLACEHOLDER = "ctx NAME · ns NAME · rollout DEPLOYMENT · events · report · q"

# what the user may type -> the command it means
_ALIASES = {
    "q": "quit", "q!": "quit", "quit": "quit",
    "events": "events", "ev": "events",
    "rollout": "rollout",
    "report": "report",
    "ctx": "ctx", "context": "ctx",
    "ns": "ns", "namespace": "ns",
}


@dataclass(frozen=True)
class Command:
    name: str  # quit, events, rollout, ctx, ns, report; or "unknown"
    arg: str | None  # the first word after the command, if any
    typed: str  # the command word as typed (lower case), for messages

    @property
    def needs_cluster(self) -> bool:
        return self.name in ("events", "rollout", "ctx", "ns")


def parse_command(line: str) -> Command | None:
    """None for an empty line; unknown words parse to name "unknown"."""
    words = line.strip().lstrip(":").split()
    if not words:
        return None
    typed = words[0].lower()
    return Command(_ALIASES.get(typed, "unknown"), words[1] if len(words) > 1 else None, typed)

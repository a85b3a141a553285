"""The one interface every metrics source implements (direct scrape, Prometheus, replay, demo)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..model import Scrape
from ..textsafe import redact


class SourceError(Exception):
    """The whole source is unusable (bad URL, auth refused, server gone); str(e) is for the user,
    with credentials already redacted (whatever library text it quotes)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


@runtime_checkable
class Source(Protocol):
    """Produces one Scrape per replica per poll; never raises for a replica's failure.

    A replica that cannot be read comes back as a Scrape with `error` set, so one bad endpoint
    never stops the others. `poll` may raise only when the whole source is unusable (bad URL,
    auth failure against Prometheus), with a message meant for the user.
    """

    @property
    def description(self) -> str:
        """For the header: "demo: 4 simulated replicas", "prometheus http://..." (read-only here:
        sources keep it as a plain attribute or compute it)."""
        ...

    async def start(self) -> None: ...

    async def poll(self) -> list[Scrape]: ...

    async def close(self) -> None: ...

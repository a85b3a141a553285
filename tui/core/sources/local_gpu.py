"""`--gpu local|exporter|none` for servers given with --url: the node's own GPUs beside the scrape.

`LocalGpuSource` wraps the direct source: each poll scrapes as before, then reads the local
GPUs once, in a worker thread (driver calls never run on the UI loop), and gives each local
server its GPUs where the scrape has none from an exporter. `choose` decides the mode: the
default is local when a server's URL is on this host and a driver answers; otherwise one line
says why and everything else works as before.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import replace
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from ..model import Scrape
from .gpu.errors import GpuUnavailable
from .gpu.live import LocalGpus

MODES = ("auto", "local", "exporter", "none")


def _local_names() -> set[str]:
    names = {"localhost", socket.gethostname()}
    try:
        names |= {str(a[4][0]) for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        pass
    return names


def local_port(url: str, local_names: set[str] | None = None) -> int | None:
    """The port of a URL served on this host; None for another host."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        on_host = ipaddress.ip_address(host).is_loopback or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        on_host = False
    if not on_host and host not in (local_names if local_names is not None else _local_names()):
        return None
    return parts.port or (443 if parts.scheme == "https" else 80)


class LocalGpuSource:
    """A source whose local servers' scrapes carry the node's GPUs (see the module doc)."""

    def __init__(self, inner: Any, ports: dict[str, int], gpus: LocalGpus) -> None:
        self.inner = inner
        self.ports = ports  # replica name -> its port on this host
        self.gpus = gpus
        self.gpu_source = gpus.sampler.source if gpus.sampler is not None else "?"

    def __getattr__(self, name: str) -> Any:  # everything else is the wrapped source's
        return getattr(self.inner, name)

    @property
    def description(self) -> str:
        return f"{self.inner.description} · GPUs: local {self.gpu_source}"

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()
        self.gpus.close()

    async def poll(self) -> list[Scrape]:
        scrapes = await self.inner.poll()
        try:
            by_port = await asyncio.to_thread(self.gpus.sample_for, sorted(set(self.ports.values())))
        except GpuUnavailable:
            by_port = {}  # the driver went away: the replicas keep their metrics, GPU goes missing
        return [replace(s, gpu=by_port.get(self.ports[s.replica])) if s.gpu is None and s.replica in self.ports
                else s for s in scrapes]


def choose(mode: str, targets: Iterable[tuple[str, str]], open_gpus: Callable[[], LocalGpus] | None = None,
           local_names: set[str] | None = None) -> tuple[LocalGpus | None, dict[str, int], str | None]:
    """(open LocalGpus or None, replica -> local port, the one line to tell the user or None).

    `targets` are (replica name, metrics URL). "auto" reads local GPUs when a URL is on this
    host and a driver answers, silently otherwise unless a local server was given; "local"
    insists and says why not; "exporter" and "none" never touch the driver."""
    if mode in ("exporter", "none"):
        return None, {}, None
    ports = {name: p for name, url in targets if (p := local_port(url, local_names)) is not None}
    if not ports:
        return None, {}, ("local GPUs: off: no --url on this host" if mode == "local" else None)
    gpus = open_gpus() if open_gpus is not None else LocalGpus()
    try:
        source = gpus.open()
    except GpuUnavailable as e:
        return None, {}, f"local GPUs: off: {e}"
    return gpus, ports, f"local GPUs: {source}, {len(ports)} local server(s)"

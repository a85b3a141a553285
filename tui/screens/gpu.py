"""The GPU panel (`u`, from the fleet and the detail screen): per GPU of the selected replica,
memory and utilisation bars, temperature and power, active throttle reasons in words, and the
processes using it (NVML: PIDs and their memory; DCGM pod mapping: pod and container).

Drawn from the monitor's last refresh (tui/core/gpu_view.py), redrawn on every refresh. A field
no source reported reads "no data" with where it was looked for, never 0; with no GPU at all
the panel says why, and where the replica's metrics URL is on this host, what the local driver
said (NVML read once, in a thread). Every value from the network is cleaned before the screen.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tui.actions import bindings
from tui.core.gpu_view import GpuPanel, panel_for, throttle_words
from tui.core.model import FleetState, GpuDevice
from tui.core.textsafe import clean
from widgets.footer import KvFooter
from widgets.format import ago, asciify

if TYPE_CHECKING:
    from tui.app import KvwatchApp

_GIB = 1024.0**3
LABEL_MAX = 60


def bar(frac: float, width: int) -> str:
    filled = round(max(0.0, min(1.0, frac)) * width)
    return "█" * filled + "░" * (width - filled)


def _level(pct: float, pal: dict[str, str]) -> str:
    return pal.get("error", "") if pct >= 95 else pal.get("warning", "") if pct >= 85 else pal.get("success", "")


def device_text(d: GpuDevice, panel: GpuPanel, width: int, pal: dict[str, str]) -> Text:
    """One GPU's block. `width`: the columns there are (the bars take what the numbers leave)."""
    src = panel.source or "the source"
    nodata = f"no data ({src} did not report it)"
    t = Text()
    t.append(f"GPU {clean(d.index, 16)}", style="bold")
    t.append(f"  {clean(d.name, LABEL_MAX)}" if d.name else "  (model not reported)")
    if d.uuid:
        t.append(f"  {clean(d.uuid, 48)}", style="dim")
    t.append("\n")
    bar_w = max(10, min(40, width - 36))
    mem = d.memory_pct
    t.append("  memory ")
    if mem is not None and d.memory_used_bytes is not None and d.memory_total_bytes:
        t.append(bar(mem / 100, bar_w), style=_level(mem, pal))
        t.append(f" {mem:3.0f}%  {d.memory_used_bytes / _GIB:.1f}/{d.memory_total_bytes / _GIB:.1f} GiB\n")
    else:
        t.append(nodata + "\n", style="dim italic")
    util = d.compute_pct
    t.append("  util   ")
    if util is not None:
        t.append(bar(util / 100, bar_w), style=_level(util, pal))
        what = "SM active" if d.sm_active_pct is not None else "kernel running, not saturation"
        t.append(f" {util:3.0f}%  ({what})\n")
    else:
        t.append(nodata + "\n", style="dim italic")
    temp = f"{d.temperature_c:.0f} C" if d.temperature_c is not None else "no data"
    if d.power_w is not None:
        power = f"{d.power_w:.0f} W" + (f" of {d.power_limit_w:.0f} W limit" if d.power_limit_w else "")
    else:
        power = "no data"
    t.append(f"  temp {temp}   power {power}\n")
    t.append("  throttle ")
    if d.throttle_reasons:
        t.append(", ".join(throttle_words(d.throttle_reasons)), style=f"bold {pal.get('error', '')}")
        t.append("\n")
    else:
        t.append("none active\n", style="dim")
    t.append("  processes ")
    if not d.processes:
        t.append(f"no data ({src} lists none for this GPU)\n", style="dim italic")
        return t
    t.append("\n")
    for p in d.processes:
        parts = []
        if p.pid is not None:
            parts.append(f"pid {p.pid}")
        if p.name:
            parts.append(clean(p.name, 40))
        if p.used_memory_bytes is not None:
            parts.append(f"{p.used_memory_bytes / _GIB:.1f} GiB")
        elif p.pid is not None:
            parts.append("memory not reported")
        if p.pod:
            parts.append(f"pod {clean(p.namespace or '?', 40)}/{clean(p.pod, LABEL_MAX)}")
        if p.container:
            parts.append(f"container {clean(p.container, 40)}")
        t.append("    " + "  ".join(parts) + "\n")
    return t


def panel_text(panel: GpuPanel, width: int, pal: dict[str, str], local_driver: str | None = None) -> Text:
    t = Text()
    if panel.stale:
        age = f", {ago(panel.age_s)} ago" if panel.age_s is not None else ""
        t.append(f"the last scrape failed: values of the last good scrape{age}\n", style="bold")
    if not panel.devices:
        t.append("no data: ", style="bold")
        t.append(f"{clean(panel.absent or 'no GPU reported')}\n")
        if local_driver:
            t.append(f"local driver: {clean(local_driver)}\n", style="dim")
        return t
    for i, d in enumerate(panel.devices):
        if i:
            t.append("\n")
        t.append_text(device_text(d, panel, width, pal))
    return t


def title_text(panel: GpuPanel) -> Text:
    t = Text(f"GPUs of {clean(panel.replica, LABEL_MAX)}", style="bold")
    if panel.node:
        t.append(f"  node {clean(panel.node, 40)}")
    if panel.age_s is not None:
        t.append(f"  ·  {ago(panel.age_s)} ago")
    if panel.devices:  # a line of its own: a local join says which PID, on which port
        t.append(f"\n{len(panel.devices)} GPU(s) via {panel.source}", style="dim")
        if panel.join:
            t.append(f", matched by {panel.join}", style="dim")
    return t


class GpuScreen(Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("gpu")
    DEFAULT_CSS = """
    GpuScreen #gpu-title { height: auto; padding: 0 1; background: $surface; }
    GpuScreen #gpu-body { height: 1fr; padding: 0 1; }
    GpuScreen #gpu-text { height: auto; }
    """

    def __init__(self, replica: str) -> None:
        super().__init__()
        self.replica = replica
        self.panel: GpuPanel | None = None
        self.local_driver: str | None = None  # what the local driver said, when it was asked

    def compose(self) -> ComposeResult:
        yield Static("", id="gpu-title")
        with VerticalScroll(id="gpu-body"):
            yield Static("", id="gpu-text")
        yield KvFooter()

    def on_mount(self) -> None:
        self.show_state(self.app.monitor.state)

    def on_resize(self) -> None:
        self._draw()

    def show_state(self, state: FleetState) -> None:
        self.panel = panel_for(self.app.monitor, self.replica, state.ts)
        if not self.panel.devices and self.local_driver is None and self._served_here():
            self.local_driver = "asking..."
            self._ask_driver()
        self._draw()

    def _served_here(self) -> bool:
        from tui.core.sources.local_gpu import local_port

        src = getattr(self.app.monitor.source, "_direct", self.app.monitor.source)
        targets = getattr(src, "targets", None)
        if not isinstance(targets, tuple):
            return False
        return any(getattr(t, "name", None) == self.replica and local_port(getattr(t, "url", ""), {"localhost"}) is not None
                   for t in targets)

    @work(exclusive=True, group="gpu-driver", exit_on_error=False)
    async def _ask_driver(self) -> None:
        from tui.core.sources.gpu.errors import GpuUnavailable
        from tui.core.sources.gpu.live import LocalGpus

        def ask() -> str:
            gpus = LocalGpus()
            try:
                return f"{gpus.open()} sees this host's GPUs, but none was matched to this server"
            except GpuUnavailable as e:
                return str(e)
            finally:
                gpus.close()

        self.local_driver = await asyncio.to_thread(ask)
        self._draw()

    def _draw(self) -> None:
        if self.panel is None or not self.is_mounted:
            return
        pal = self.app.palette()
        title, body = title_text(self.panel), panel_text(self.panel, self.size.width - 2, pal, self.local_driver)
        if self.app.ascii:
            title, body = asciify(title), asciify(body)
        self.query_one("#gpu-title", Static).update(title)
        self.query_one("#gpu-text", Static).update(body)


def open_gpu(app: KvwatchApp, replica: str | None) -> None:
    if replica is not None:
        app.push_screen(GpuScreen(replica))

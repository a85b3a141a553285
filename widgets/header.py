"""Header lines: source and clock, fleet totals by verdict, and the KV-pressure banner."""

from __future__ import annotations

import time
from typing import Callable, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.core.model import FleetState
from tui.core.textsafe import clean
from tui.core.verdicts import BY_NAME, KV_PRESSURE, VERDICTS

from .format import asciify, num, rate
from .verdict import colour_var, label


def _sum(state: FleetState, attr: str) -> float | None:
    vals = [getattr(r.metrics, attr) for r in state.replicas if r.state == "ok"]
    vals = [v for v in vals if v is not None]
    return sum(vals) if vals else None


MODES = {"live": "● live", "paused": "‖ paused", "replay": "▶ replay", "replay-paused": "‖ replay paused"}
MODES_ASCII = {"live": "* live", "paused": "|| paused", "replay": "> replay", "replay-paused": "|| replay paused"}


class HeaderLine(Static):
    """One line that repaints only when its text changes (the clock line changes every refresh,
    the totals line rarely: a whole-widget repaint would resend both)."""

    DEFAULT_CSS = """
    HeaderLine { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, **kw) -> None:
        super().__init__("", **kw)
        self.text = Text()

    def set(self, t: Text) -> None:
        if t != self.text or not self.text:
            self.text = t
            self.update(t, layout=False)


class FleetHeader(Vertical):
    DEFAULT_CSS = """
    FleetHeader { height: 2; background: $panel; padding: 0 1; }
    """

    def __init__(self, palette: Callable[[], Mapping[str, str]], **kw) -> None:
        super().__init__(**kw)
        self._palette = palette
        self.text = Text()  # both lines, as last shown
        self.title = "kvwatch"
        self.mode = "live"  # "live", "paused", "replay", "replay-paused"
        self.status = ""  # shown after the mode, e.g. replay speed and position
        self.flags: list[str] = []  # e.g. READONLY, PRODUCTION
        self.sim_speed: float | None = None  # a simulated clock (the demo): labelled, with its speed
        self.ascii = False
        self._state: FleetState | None = None
        self._narrow = False

    def compose(self) -> ComposeResult:
        yield HeaderLine(id="header-1")
        yield HeaderLine(id="header-2")

    def on_mount(self) -> None:
        if self.text:
            self._paint()

    def on_resize(self) -> None:
        # the bars' spacing follows the width: redraw the last state when crossing 100 columns
        state = self._state
        if state is not None and (0 < self.app.size.width < 100) != self._narrow:
            self.show(state)

    def _paint(self) -> None:
        lines = list(self.query(HeaderLine))
        if len(lines) == 2:
            first, second = self.text.split("\n", allow_blank=True)[:2]
            lines[0].set(first)
            lines[1].set(second)

    def show(self, state: FleetState) -> None:
        self._state = state
        pal = self._palette()
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("kvwatch", style="bold")
        bar = " | " if self.ascii else " │ "
        self._narrow = 0 < self.app.size.width < 100
        if self._narrow:  # 80 columns: tight bars keep the preemption rate and its unit
            bar = bar.strip()
        # Mode, badges, clock and the fleet totals first, the source last: at 80 columns the end
        # of this line is cut, and a long source name must not push the totals off.
        t.append(bar)
        t.append((MODES_ASCII if self.ascii else MODES).get(self.mode, self.mode), style="bold")
        if self.status:
            t.append(" " + self.status)
        for f in self.flags:
            t.append(" ")
            style = "bold reverse"
            if f == "PRODUCTION":  # production contexts look different (k9s skins)
                style = (f"{pal.get('banner-text-style', 'bold')} {pal.get('banner-fg', 'white')} "
                         f"on {pal.get('production-bg', 'red')}")
            t.append(f" {f} ", style=style)
        # A recording may be days old: replay shows the date too.
        clock = "%Y-%m-%d %H:%M:%S" if self.mode.startswith("replay") else "%H:%M:%S"
        sim = "sim " if self.sim_speed else ""
        t.append(bar + sim + time.strftime(clock, time.localtime(state.ts)))
        t.append((f" {self.sim_speed:g}x" if self.sim_speed else "") + bar)
        t.append("run ")
        t.append(num(_sum(state, "running")))
        t.append(" wait ")
        t.append(num(_sum(state, "waiting")))
        t.append(bar + "gen ")
        t.append(num(_sum(state, "gen_tokens_per_s")) + " tok/s")
        t.append(bar + "preempt ")
        t.append(rate(_sum(state, "preemptions_per_s")) + "/s" + bar)
        t.append(clean(state.source))  # Text.append is literal; clean() strips control characters
        t.append("\n")
        counts = state.counts()
        t.append(f"{len(state.replicas)} replicas:", style="bold")
        for v in VERDICTS:
            if counts.get(v):
                t.append(" ")
                t.append(f"{counts[v]} {label(v, ascii=self.ascii)}", style=pal.get(colour_var(v), ""))
        self.text = asciify(t) if self.ascii else t
        self._paint()


def _fitted(items: list[str], room: int) -> str:
    """As many of `items` as fit in `room` cells, then "+N" for the rest (at least one item)."""
    for n in range(len(items), 0, -1):
        text = ", ".join(items[:n]) + (f" +{len(items) - n}" if n < len(items) else "")
        if len(text) <= room:
            return text
    return items[0] + (f" +{len(items) - 1}" if len(items) > 1 else "")


class PressureBanner(Static):
    """Shown only while at least one replica is in kv-pressure or in the queue / latency alarm:
    impossible to miss."""

    DEFAULT_CSS = """
    PressureBanner { height: 1; display: none; text-style: bold; padding: 0 1; text-wrap: nowrap;
        text-overflow: ellipsis; }
    PressureBanner.-on { display: block; }
    """

    def __init__(self, palette: Callable[[], Mapping[str, str]], **kw) -> None:
        super().__init__("", **kw)
        self._palette = palette
        self.ascii = False
        self._shown: tuple | None = None  # (text, its style, background) as last updated

    def show(self, state: FleetState) -> None:
        hot = [r.name for r in state.replicas if r.verdict == KV_PRESSURE]
        alarms = tuple(getattr(state, "alarms", ()))  # queue / latency far above each one's baseline
        imbalance = tuple(getattr(state, "imbalance", ()))  # a hot replica beside idle ones of its model
        self.set_class(bool(hot or alarms or imbalance), "-on")
        if not hot and not alarms and not imbalance:
            return
        pal = self._palette()
        t = Text(no_wrap=True, overflow="ellipsis",
                 style=f"{pal.get('banner-text-style', 'bold')} {pal.get('banner-fg', 'white')} "
                       f"on {pal.get('banner-bg', 'red')}")
        # the hint first: at 80 columns the names are cut, not the way to the evidence
        if hot:
            names = ", ".join(clean(n) for n in hot[:4]) + (f" +{len(hot) - 4}" if len(hot) > 4 else "")
            kv = BY_NAME[KV_PRESSURE]
            t.append(f"{kv.ascii_symbol if self.ascii else kv.symbol} KV-CACHE PRESSURE on "
                     f"{len(hot)}/{len(state.replicas)} · enter: evidence · ")
            t.append(names)
        if alarms:
            t.append("  · " if hot else "")
            t.append(f"QUEUE/LATENCY ALARM on {len(alarms)}/{len(state.replicas)}"
                     + ("" if hot else " · enter: evidence") + " · ")
            shown = alarms if not hot else alarms[:2]
            full = "; ".join(clean(a.text) for a in shown[:3]) + (f" +{len(alarms) - 3}" if len(shown) > 3 else "")
            room = self.size.width - 2 - t.cell_len
            if self.size.width and len(full) > room:  # too long to read whole: who and what, not cut text
                full = _fitted([f"{clean(a.replica)} ({'+'.join(a.kinds)})" for a in alarms], room)
            t.append(full)
        if imbalance:
            t.append("  · " if hot or alarms else "")
            first = imbalance[0]
            t.append(f"FLEET IMBALANCE in {len(imbalance)} model group(s) · rebalance, not scale out · "
                     f"{clean(first.text)}" + (f" +{len(imbalance) - 1}" if len(imbalance) > 1 else ""))
        if self.ascii:
            t = asciify(t)
        background = pal.get("banner-bg", "red")
        if (t, t.style, background) != self._shown:  # the same banner is not repainted every second
            self._shown = (t, t.style, background)
            self.styles.background = background
            self.update(t, layout=False)  # one line, whatever its text: no new layout of the screen

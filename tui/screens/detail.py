"""Replica detail: the verdict with its evidence, per-engine values, and larger plots.

A replica that leaves the fleet (a rollout deleted its pod) keeps its last evidence and plots,
marked "gone since HH:MM:SS", with the time axis frozen at that moment. Where the plots would be
too small to read (80x24), the same series are shown as numbers: now, min and max.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
import time
from typing import TYPE_CHECKING, Sequence

from textual.containers import Grid, Vertical
from textual.screen import Screen
from textual.widgets import Static

from tui.actions import bindings
from tui.core.model import FleetState, ReplicaMetrics, ReplicaView
from tui.core.signal_windows import RATE_WINDOW_S, window_text
from tui.core.textsafe import clean
from widgets.fast_plot import FastPlot
from widgets.footer import KvFooter
from widgets.format import ago, asciify, num, pct, rate, secs
from widgets import undrawn
from widgets.quiet import StyledOnOpening
from widgets.verdict import colour_var, label

from .triage import open_diagnosis

if TYPE_CHECKING:
    from tui.app import KvwatchApp

PLOT_POINTS = 300
LABEL_MAX = 60  # label values (model names, ...) are cut here; long ones would fill 80x24
# below this a braille plot is tick labels and noise (5 rows drew empty frames with upside-down
# axis labels at 120x30): numbers instead
MIN_PLOT_W, MIN_PLOT_H = 30, 6

# (plot id, title, [(series attr, legend)], fixed y range or None)
PLOTS = (
    ("p-kv", "KV usage (0-1)", [("kv_usage", "kv")], (0.0, 1.0)),
    ("p-queue", "requests", [("waiting", "waiting"), ("running", "running")], None),
    ("p-preempt", "preemptions/s", [("preemptions_per_s", "preempt/s")], None),
    ("p-gpu", "GPU %", [("gpu_memory_pct", "mem"), ("gpu_util_pct", "util")], (0.0, 100.0)),
    ("p-lat", "TTFT s", [("ttft_p50_s", "p50"), ("ttft_p95_s", "p95"), ("ttft_p99_s", "p99")], None),
    ("p-itl", "ITL / e2e p95 s", [("itl_p95_s", "itl p95"), ("e2e_p95_s", "e2e p95")], None),
)


def evidence_text(v: ReplicaView, now: float, pal: dict[str, str], ascii: bool = False,
                  full: bool = False, rate_s: float = RATE_WINDOW_S) -> Text:
    """The evidence block; `full` shows label values (the model name) uncut; `rate_s`: the
    window of the rates (the table's), said beside them."""
    m = v.metrics
    t = Text()
    t.append(label(v.verdict, ascii=ascii), style=f"bold {pal.get(colour_var(v.verdict), '')}")
    t.append("  ")
    t.append(clean(v.name), style="bold")
    if v.finding.since is not None:
        t.append(f"  since {ago(now - v.finding.since)} ago")
    t.append(f"  [{v.state}]" if v.state != "ok" else "")
    if v.model_name:
        t.append("  model ")
        t.append(clean(v.model_name, None if full else LABEL_MAX))  # `m`: uncut
    t.append(f"  metrics {v.generation}")
    node = v.pod.node if v.pod is not None else None
    if node:  # a sick GPU is the node's: say which one (the drain moves the replica off it)
        t.append("  node ")
        t.append(clean(node), style="bold")
    t.append("\n")
    if v.error:
        t.append("last scrape: ", style="bold")
        t.append(clean(v.error))
        t.append("\n")
    for e in v.finding.evidence:
        mark = ("✔ " if not ascii else "+ ") if e.crossed else ("· " if not ascii else "- ")
        t.append(mark + clean(e.text) + "\n", style="bold" if e.crossed else "dim")
    for sig, why in sorted(v.invalid.items()):
        t.append(f"invalid {clean(sig, LABEL_MAX)}: {clean(why, LABEL_MAX * 2)}\n", style="bold")
    if v.finding.missing:
        t.append("missing: " + ", ".join(v.finding.missing) + "\n", style="dim italic")
    dim = ""
    if v.state != "ok" and v.last_ok_ts is not None:  # not live: say how old, and dim them
        t.append(f"values of the last good scrape, {ago(now - v.last_ok_ts)} ago:\n", style="bold")
        dim = "dim"
    t.append(
        f"KV {pct(m.kv_usage, 100)}  waiting {num(m.waiting)}  running {num(m.running)}  "
        f"batch p95 {num(m.batch_p95)}  preempt {rate(m.preemptions_per_s)}/s ({window_text(rate_s)})  "
        f"GPU mem {pct(m.gpu_memory_pct)} util {pct(m.gpu_util_pct)}  CPU {num(m.cpu_cores, 2)} cores ({window_text(rate_s)})\n"
        f"TTFT p50/p95/p99 {secs(m.ttft_p50_s)}/{secs(m.ttft_p95_s)}/{secs(m.ttft_p99_s)}  "
        f"ITL p95 {secs(m.itl_p95_s)}  e2e p95 {secs(m.e2e_p95_s)}  queue p95 {secs(m.queue_p95_s)}  "
        f"gen {num(m.gen_tokens_per_s)} tok/s  prompt p95 {num(m.prompt_len_p95)} tok", style=dim
    )
    if len(v.engines) > 1:
        t.append("\nengines: ")
        for eng, vals in sorted(v.engines.items()):
            t.append(f"[{clean(eng, 16)}] kv {pct(vals.get('kv_usage'), 100)} run {num(vals.get('running'))} "
                     f"wait {num(vals.get('waiting'))}  ")
    return t


class DetailScreen(StyledOnOpening, Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    BINDINGS = bindings("detail")  # tui/actions.py: back, then t / g / c of this replica
    DEFAULT_CSS = """
    DetailScreen #evidence { height: auto; max-height: 14; padding: 0 1; background: $surface; }
    DetailScreen Grid { grid-size: 2 3; grid-gutter: 0 1; }
    DetailScreen PlotextPlot { height: 1fr; min-height: 6; }
    DetailScreen #plot-numbers { height: auto; padding: 0 1; display: none; }
    DetailScreen.-numbers #plot-numbers { display: block; }
    DetailScreen.-numbers #plots { display: none; }
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.replica = name
        self.full_labels = False
        self.last_view: ReplicaView | None = None
        self.gone_since: float | None = None  # the state time of the first refresh without it
        self.frozen_at: float | None = None  # the plots' time axis ends here (gone)
        self._pts: Sequence[tuple[float, ReplicaMetrics]] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="-undrawn"):
            yield Static("", id="evidence")
            yield Static("", id="plot-numbers")
            with Grid(id="plots", classes="-undrawn"):
                for pid, *_ in PLOTS:
                    yield FastPlot(id=pid)
        yield KvFooter()

    def on_mount(self) -> None:
        undrawn.leave_out(self)
        self.show_state(self.app.monitor.state)

    def action_full_labels(self) -> None:
        self.full_labels = not self.full_labels
        self.show_state(self.app.monitor.state)

    def action_triage(self) -> None:
        open_diagnosis(self.app, self.replica, "triage")

    def action_diagnosis(self, mode: str) -> None:
        open_diagnosis(self.app, self.replica, mode)

    def action_gpu(self) -> None:
        from .gpu import open_gpu

        open_gpu(self.app, self.replica)

    def on_resize(self) -> None:
        # the plots size themselves when drawn (a resize repaints them): only a switch between
        # plots and numbers needs the series again. The first layout after opening is a resize
        # too, and redrawing there drew all six plots twice.
        if self._pts and self._plots_fit() == self.has_class("-numbers"):
            self._draw(self._pts, self.frozen_at or self.app.monitor.state.ts)

    def _plots_fit(self) -> bool:
        """Would a 2x3 grid of plots under the evidence be readable at this size?"""
        ev = self.query_one("#evidence", Static)
        below = sum(w.outer_size.height for w in self.query("KvFooter, FlashBar") if w.display)
        free = self.size.height - (ev.outer_size.height or 14) - max(below, 2)
        return (self.size.width - 1) // 2 >= MIN_PLOT_W and free // 3 >= MIN_PLOT_H

    def show_state(self, state: FleetState) -> None:
        view = next((r for r in state.replicas if r.name == self.replica), None)
        if view is None:
            self._gone(state)
            return
        self.last_view, self.gone_since, self.frozen_at = view, None, None
        ev = evidence_text(view, state.ts, self.app.palette(), self.app.ascii, self.full_labels,
                           self.app.monitor.windows.rate_s)
        self.query_one("#evidence", Static).update(asciify(ev) if self.app.ascii else ev)
        snap = self.app.monitor.replica_snapshot(self.replica)
        if snap is None:
            return
        pts = snap.points[-PLOT_POINTS:]
        if not pts:
            return
        self._pts = pts
        self._draw(pts, state.ts)

    def _gone(self, state: FleetState) -> None:
        """The replica left the fleet: say since when, keep its last values, freeze the axis."""
        if self.gone_since is not None:
            return  # already said; nothing moves any more
        self.gone_since = self.frozen_at = state.ts
        when = time.strftime("%H:%M:%S", time.localtime(state.ts))
        t = Text(f" gone since {when} ", style="bold reverse")
        t.append(f" {clean(self.replica)} left the fleet (pod deleted or replaced); its last values:\n", style="bold")
        if self.last_view is not None:
            t.append_text(evidence_text(self.last_view, state.ts, self.app.palette(), self.app.ascii,
                                        rate_s=self.app.monitor.windows.rate_s))
        self.query_one("#evidence", Static).update(asciify(t) if self.app.ascii else t)
        if self._pts:
            self._draw(self._pts, state.ts)

    def _draw(self, pts: Sequence[tuple[float, ReplicaMetrics]], now: float) -> None:
        numbers = not self._plots_fit()
        self.set_class(numbers, "-numbers")
        if numbers:
            self.query_one("#plot-numbers", Static).update(numbers_text(pts, self.frozen_at is not None))
            return
        xs = [ts - now for ts, _ in pts]
        xlabel = "seconds"
        if self.frozen_at is not None:
            xlabel = f"seconds before gone {time.strftime('%H:%M:%S', time.localtime(self.frozen_at))}"
        for pid, title, series, yr in PLOTS:
            plot = self.query_one(f"#{pid}", FastPlot)
            plt = plot.plt
            if plot.drawn:  # a new plot's figure is blank: clearing it again copies its defaults (~1 ms)
                plt.clear_data()
                plt.clear_figure()
            plot.drawn = True
            plt.title(title)
            for attr, legend in series:
                ys = [getattr(m, attr) for _, m in pts]
                xy = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
                if xy:
                    plt.plot([a for a, _ in xy], [b for _, b in xy], label=legend,
                             marker="*" if self.app.ascii else "braille")
            if yr:
                plt.ylim(*yr)
            else:  # counts, rates and latencies are never negative: pin the floor at 0
                top = max((getattr(m, a) or 0.0 for _, m in pts for a, _l in series), default=0.0)
                plt.ylim(0.0, top * 1.1 if top > 0 else 1.0)
            plt.xlabel(xlabel)
            plot.refresh()


def _n(v: float) -> str:
    return num(v, 0 if float(v).is_integer() or abs(v) >= 10 else 2)


def numbers_text(pts: Sequence[tuple[float, ReplicaMetrics]], gone: bool) -> Text:
    """The plots' series as numbers: the latest value, and min / max over the points shown."""
    span = pts[-1][0] - pts[0][0] if len(pts) > 1 else 0.0
    t = Text(f"{'last' if gone else 'now'}, min..max over {ago(span)} (too small for plots)\n", style="dim")
    for _pid, title, series, _yr in PLOTS:
        t.append(f"{title}: ", style="bold")
        parts = []
        for attr, legend in series:
            ys = [y for y in (getattr(m, attr) for _, m in pts) if y is not None]
            parts.append(f"{legend} {_n(ys[-1])} ({_n(min(ys))}..{_n(max(ys))})" if ys else f"{legend} –")
        t.append("  ".join(parts) + "\n")
    return t

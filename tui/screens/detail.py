"""Replica detail: the verdict with its evidence, per-engine values, and larger plots."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from tui.actions import bindings
from tui.core.model import FleetState, ReplicaView
from tui.core.textsafe import clean
from widgets.format import ago, asciify, num, pct, rate, secs
from widgets.verdict import colour_var, label

from .triage import open_diagnosis

PLOT_POINTS = 300

# (plot id, title, [(series attr, legend)], fixed y range or None)
PLOTS = (
    ("p-kv", "KV usage (0-1)", [("kv_usage", "kv")], (0.0, 1.0)),
    ("p-queue", "requests", [("waiting", "waiting"), ("running", "running")], None),
    ("p-preempt", "preemptions/s", [("preemptions_per_s", "preempt/s")], None),
    ("p-gpu", "GPU %", [("gpu_memory_pct", "mem"), ("gpu_util_pct", "util")], (0.0, 100.0)),
    ("p-lat", "TTFT s", [("ttft_p50_s", "p50"), ("ttft_p95_s", "p95"), ("ttft_p99_s", "p99")], None),
    ("p-itl", "ITL / e2e p95 s", [("itl_p95_s", "itl p95"), ("e2e_p95_s", "e2e p95")], None),
)


def evidence_text(v: ReplicaView, now: float, pal: dict[str, str], ascii: bool = False) -> Text:
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
        t.append(clean(v.model_name))
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
    if v.finding.missing:
        t.append("missing: " + ", ".join(v.finding.missing) + "\n", style="dim italic")
    t.append(
        f"KV {pct(m.kv_usage, 100)}  waiting {num(m.waiting)}  running {num(m.running)}  "
        f"batch p95 {num(m.batch_p95)}  preempt {rate(m.preemptions_per_s)}/s  "
        f"GPU mem {pct(m.gpu_memory_pct)} util {pct(m.gpu_util_pct)}  CPU {num(m.cpu_cores, 2)} cores\n"
        f"TTFT p50/p95/p99 {secs(m.ttft_p50_s)}/{secs(m.ttft_p95_s)}/{secs(m.ttft_p99_s)}  "
        f"ITL p95 {secs(m.itl_p95_s)}  e2e p95 {secs(m.e2e_p95_s)}  queue p95 {secs(m.queue_p95_s)}  "
        f"gen {num(m.gen_tokens_per_s)} tok/s  prompt p95 {num(m.prompt_len_p95)} tok"
    )
    if len(v.engines) > 1:
        t.append("\nengines: ")
        for eng, vals in sorted(v.engines.items()):
            t.append(f"[{eng}] kv {pct(vals.get('kv_usage'), 100)} run {num(vals.get('running'))} "
                     f"wait {num(vals.get('waiting'))}  ")
    return t


class DetailScreen(Screen):
    BINDINGS = bindings("detail")  # tui/actions.py: back, then t / g / c of this replica
    DEFAULT_CSS = """
    DetailScreen #evidence { height: auto; max-height: 14; padding: 0 1; background: $surface; }
    DetailScreen Grid { grid-size: 2 3; grid-gutter: 0 1; }
    DetailScreen PlotextPlot { height: 1fr; min-height: 6; }
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.replica = name

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="evidence")
            with Grid():
                for pid, *_ in PLOTS:
                    yield PlotextPlot(id=pid)
        yield Footer()

    def on_mount(self) -> None:
        self.show_state(self.app.monitor.state)

    def action_triage(self) -> None:
        open_diagnosis(self.app, self.replica, "triage")

    def action_diagnosis(self, mode: str) -> None:
        open_diagnosis(self.app, self.replica, mode)

    def show_state(self, state: FleetState) -> None:
        view = next((r for r in state.replicas if r.name == self.replica), None)
        if view is None:
            self.query_one("#evidence", Static).update(Text(f"{clean(self.replica)}: gone from the fleet"))
            return
        ev = evidence_text(view, state.ts, self.app.palette(), self.app.ascii)
        self.query_one("#evidence", Static).update(asciify(ev) if self.app.ascii else ev)
        snap = self.app.monitor.replica_snapshot(self.replica)
        if snap is None:
            return
        pts = snap.points[-PLOT_POINTS:]
        if not pts:
            return
        now = state.ts
        xs = [ts - now for ts, _ in pts]
        for pid, title, series, yr in PLOTS:
            plot = self.query_one(f"#{pid}", PlotextPlot)
            plt = plot.plt
            plt.clear_data()
            plt.clear_figure()
            plt.title(title)
            for attr, legend in series:
                ys = [getattr(m, attr) for _, m in pts]
                xy = [(x, y) for x, y in zip(xs, ys) if y is not None]
                if xy:
                    plt.plot([a for a, _ in xy], [b for _, b in xy], label=legend,
                             marker="*" if self.app.ascii else "braille")
            if yr:
                plt.ylim(*yr)
            else:  # counts, rates and latencies are never negative: pin the floor at 0
                top = max((getattr(m, a) or 0.0 for _, m in pts for a, _l in series), default=0.0)
                plt.ylim(0.0, top * 1.1 if top > 0 else 1.0)
            plt.xlabel("seconds")
            plot.refresh()

"""The report's pictures as SVG text, drawn by hand.

Why not a plotting library: the pictures are a few rectangles, polylines and labels; drawing
them here keeps `kvwatch report` free of optional dependencies (it runs wherever kvwatch runs,
bastions included), keeps the output small and deterministic (the committed examples diff
cleanly), and lets the colours follow the reader's light / dark preference through CSS classes
(`prefers-color-scheme`), which matplotlib's static colours would not. Colour is never the only
cue: every verdict segment carries its name in a <title> and, where it fits, its symbol.

Every text that came from a recording or the audit log goes through `esc`.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Iterable
from xml.sax.saxutils import escape

from .. import verdicts as V
from .build import INCIDENT, METRIC_LABEL, Report

# verdict fills, light then dark
_FILL = {
    V.DOWN: ("#7f1d1d", "#f87171"), V.NODE_FAULT: ("#be123c", "#fb7185"), V.KV_PRESSURE: ("#dc2626", "#ef4444"),
    V.STALLED: ("#7e22ce", "#c084fc"), V.OVERLOADED: ("#ea580c", "#fb923c"),
    V.CONCURRENCY_CAPPED: ("#b45309", "#fbbf24"), V.HOST_BOUND: ("#a16207", "#facc15"),
    V.COMPUTE_BOUND: ("#2563eb", "#60a5fa"), V.STARTING: ("#94a3b8", "#64748b"), V.UNKNOWN: ("#d4d4d8", "#3f3f46"),
    V.HEALTHY: ("#16a34a", "#22c55e"),
}
_ACTION = ("#1d4ed8", "#93c5fd")
_LINE = ("#111827", "#e5e7eb")


def css() -> str:
    """The classes the pictures use; in the HTML page once, in each standalone SVG file."""
    light = [f".v-{n}{{fill:{c[0]}}}" for n, c in _FILL.items()]
    dark = [f".v-{n}{{fill:{c[1]}}}" for n, c in _FILL.items()]
    base = (".fg{fill:%s}.axis{stroke:%s;stroke-opacity:.35}.grid{stroke:%s;stroke-opacity:.12}"
            ".line{fill:none;stroke:%s;stroke-width:1.6}.act{stroke:%s;stroke-width:1.5;stroke-dasharray:4 3}"
            ".actl{fill:%s}.rec{stroke:%s;stroke-width:2}.recl{fill:%s}.shade{opacity:.18}"
            "text{font:11px system-ui,-apple-system,'Segoe UI',sans-serif}.small{font-size:10px}")
    ok = _FILL[V.HEALTHY]
    return ("".join(light) + base % (_LINE[0], _LINE[0], _LINE[0], _LINE[0], _ACTION[0], _ACTION[0], ok[0], ok[0])
            + "@media (prefers-color-scheme: dark){" + "".join(dark)
            + base % (_LINE[1], _LINE[1], _LINE[1], _LINE[1], _ACTION[1], _ACTION[1], ok[1], ok[1]) + "}")


def esc(text: str) -> str:
    return escape(str(text), {'"': "&quot;"})


def when(ts: float | None, date: bool = False) -> str:
    if ts is None:
        return "-"
    if ts > 1e9:
        fmt = "%Y-%m-%d %H:%M:%S UTC" if date else "%H:%M:%S"
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime(fmt)
    return f"t={ts:.0f}s"


def _tick_step(span: float) -> float:
    for step in (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400):
        if span / step <= 8:
            return float(step)
    return 86400.0 * math.ceil(span / 86400 / 8)


def _tick_label(ts: float, step: float) -> str:
    if ts <= 1e9:
        return f"{ts:.0f}s"
    fmt = "%H:%M:%S" if step < 60 else "%H:%M"
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime(fmt)


class _Frame:
    """x / y mapping of one picture: time across, the plot area inside the margins."""

    def __init__(self, r: Report, width: int, height: int, left: int = 150, right: int = 12, top: int = 22,
                 bottom: int = 24) -> None:
        self.r, self.w, self.h = r, width, height
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.t0, self.t1 = r.start, max(r.end, r.start + 1.0)

    def x(self, ts: float) -> float:
        f = (min(max(ts, self.t0), self.t1) - self.t0) / (self.t1 - self.t0)
        return round(self.left + f * (self.w - self.left - self.right), 1)

    def axis(self) -> list[str]:
        step = _tick_step(self.t1 - self.t0)
        first = math.ceil(self.t0 / step) * step
        out = [f'<line class="axis" x1="{self.left}" y1="{self.h - self.bottom}" x2="{self.w - self.right}" '
               f'y2="{self.h - self.bottom}"/>']
        t = first
        while t <= self.t1:
            x = self.x(t)
            out.append(f'<line class="grid" x1="{x}" y1="{self.top}" x2="{x}" y2="{self.h - self.bottom}"/>')
            out.append(f'<text class="fg small" x="{x}" y="{self.h - self.bottom + 14}" text-anchor="middle">'
                       f'{esc(_tick_label(t, step))}</text>')
            t += step
        return out

    def actions(self) -> list[str]:
        """The actions as numbered dashed lines (numbers as in the mitigations list), and the
        confirmed recovery as a solid line."""
        out = []
        if self.r.recovered_at is not None:
            x = self.x(self.r.recovered_at)
            out.append(f'<g><title>{esc("recovery confirmed " + when(self.r.recovered_at))}</title>'
                       f'<line class="rec" x1="{x}" y1="{self.top - 4}" x2="{x}" y2="{self.h - self.bottom}"/>'
                       f'<text class="recl small" x="{x - 3}" y="{self.top - 5}" text-anchor="end">recovered</text></g>')
        for i, m in enumerate(self.r.mitigations, 1):
            x = self.x(m.ts)
            out.append(f'<g><title>{esc(f"{i}. {when(m.ts)} {m.user}: {m.what} ({m.message})")}</title>'
                       f'<line class="act" x1="{x}" y1="{self.top - 4}" x2="{x}" y2="{self.h - self.bottom}"/>'
                       f'<text class="actl" x="{x + 3}" y="{self.top - 5}">{i}</text></g>')
        return out


def _svg(width: int, height: int, body: Iterable[str], label: str, standalone: bool) -> str:
    style = f"<style>{css()}</style>" if standalone else ""
    ns = ' xmlns="http://www.w3.org/2000/svg"'
    return (f'<svg{ns} viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{esc(label)}" preserveAspectRatio="xMinYMin meet">{style}<title>{esc(label)}</title>'
            + "".join(body) + "</svg>")


def legend(verdicts: Iterable[str], x: int, y: int) -> list[str]:
    out = []
    for v in verdicts:
        sym = V.BY_NAME[v].symbol if v in V.BY_NAME else "?"
        out.append(f'<rect class="v-{esc(v)}" x="{x}" y="{y - 9}" width="10" height="10"/>'
                   f'<text class="fg small" x="{x + 13}" y="{y}">{esc(sym)} {esc(v)}</text>')
        x += 30 + 6 * (len(v) + 2)
    return out


def _seen(r: Report) -> list[str]:
    names = {v for t in r.replicas.values() for _, v in t.timeline}
    return [v for v in V.VERDICTS if v in names]


def swimlane(r: Report, width: int = 960, standalone: bool = False) -> str:
    """One lane per replica (in order of first appearance), coloured by verdict over time."""
    lane = 18
    names = sorted(r.replicas, key=lambda n: (r.replicas[n].first_ts or 0.0, n))
    height = 22 + 18 + lane * len(names) + 26
    f = _Frame(r, width, height, top=40)
    body = legend(_seen(r), f.left, 14) + f.axis()
    for i, n in enumerate(names):
        t = r.replicas[n]
        y = f.top + i * lane
        body.append(f'<text class="fg" x="{f.left - 6}" y="{y + 12}" text-anchor="end">{esc(n[:24])}</text>')
        tl = t.timeline
        for j, (ts, v) in enumerate(tl):
            end = tl[j + 1][0] if j + 1 < len(tl) else (t.last_ts or ts)
            if end < r.start or ts > r.end:
                continue
            x0, x1 = f.x(ts), f.x(end)
            w = max(x1 - x0, 1.0)
            tip = f"{n}: {v} {when(ts)} - {when(end)}"
            sym = V.BY_NAME[v].symbol if v in V.BY_NAME else "?"
            mark = (f'<text class="fg small" x="{x0 + 3}" y="{y + 12}">{esc(sym)}</text>'
                    if w > 14 and v in INCIDENT else "")
            body.append(f'<g><title>{esc(tip)}</title><rect class="v-{esc(v)}" x="{x0}" y="{y + 2}" '
                        f'width="{w:.1f}" height="{lane - 4}"/>{mark}</g>')
    body += f.actions()
    return _svg(width, height, body, "verdict per replica over time", standalone)


def heatmap(r: Report, width: int = 960, standalone: bool = False, cell_h: int = 6) -> str:
    """Replica by minute, each cell the worst verdict of that replica in that minute: for fleets
    too large for one lane each."""
    names = sorted(r.replicas, key=lambda n: (r.replicas[n].first_ts or 0.0, n))
    height = 40 + cell_h * len(names) + 26
    f = _Frame(r, width, height, left=60, top=40)
    minutes = max(1, math.ceil((f.t1 - f.t0) / 60))
    cw = (width - f.left - f.right) / minutes
    body = legend(_seen(r), f.left, 14) + f.axis()
    body.append(f'<text class="fg small" x="{f.left - 6}" y="{f.top + 10}" text-anchor="end">{len(names)}</text>'
                f'<text class="fg small" x="{f.left - 6}" y="{f.top + 22}" text-anchor="end">replicas</text>')
    for i, n in enumerate(names):
        t = r.replicas[n]
        worst: dict[int, str] = {}
        tl = t.timeline
        for j, (ts, v) in enumerate(tl):
            end = tl[j + 1][0] if j + 1 < len(tl) else (t.last_ts or ts)
            a = max(0, int((max(ts, f.t0) - f.t0) // 60))
            b = min(minutes - 1, int((min(end, f.t1) - f.t0) // 60))
            for k in range(a, b + 1):
                cur = worst.get(k)
                if cur is None or V.SEVERITY.get(v, 99) < V.SEVERITY.get(cur, 99):
                    worst[k] = v
        y = f.top + i * cell_h
        row = [f'<rect class="v-{esc(v)}" x="{f.left + k * cw:.1f}" y="{y}" width="{max(cw, 0.6):.1f}" '
               f'height="{cell_h - 1}"/>' for k, v in sorted(worst.items())]
        body.append(f'<g><title>{esc(n)}</title>{"".join(row)}</g>')
    body += f.actions()
    return _svg(width, height, body, "worst verdict per replica and minute", standalone)


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * e:
            return float(m * e)
    return float(10 * e)


def metric_plot(r: Report, key: str, width: int = 960, height: int = 160, standalone: bool = False) -> str:
    """One fleet figure over time, the fleet's worst verdict shaded behind it, actions marked."""
    f = _Frame(r, width, height, top=30)  # the swimlane's margins: the pictures share one time axis
    vals = [p.values.get(key) for p in r.points]
    top = 1.0 if key == "kv" else _nice_max(max((v for v in vals if v is not None), default=0.0) * 1.05)
    ph = height - f.top - f.bottom

    def y(v: float) -> float:
        return round(f.top + ph * (1 - min(v, top) / top), 1)

    body = []
    # shading: runs of the same worst verdict, incident verdicts only (calm stays unshaded)
    pts = r.points
    i = 0
    while i < len(pts):
        j = i
        while j + 1 < len(pts) and pts[j + 1].worst == pts[i].worst:
            j += 1
        v = pts[i].worst
        if v in INCIDENT or v == V.DOWN:
            x0 = f.x(pts[i].ts)
            x1 = f.x(pts[j + 1].ts) if j + 1 < len(pts) else f.x(pts[j].ts)
            body.append(f'<rect class="v-{esc(v)} shade" x="{x0}" y="{f.top}" width="{max(x1 - x0, 1):.1f}" '
                        f'height="{ph}"><title>{esc(v)} {esc(when(pts[i].ts))} - {esc(when(pts[j].ts))}</title></rect>')
        i = j + 1
    body += f.axis()
    for frac in (0.0, 0.5, 1.0):
        yy = y(top * frac)
        label = f"{top * frac:.2f}" if key in ("kv", "ttft") and top <= 10 else f"{top * frac:g}"
        body.append(f'<line class="grid" x1="{f.left}" y1="{yy}" x2="{width - f.right}" y2="{yy}"/>'
                    f'<text class="fg small" x="{f.left - 4}" y="{yy + 3}" text-anchor="end">{esc(label)}</text>')
    if key == "kv":
        yy = y(r.thresholds.kv_high)
        body.append(f'<line class="axis" x1="{f.left}" y1="{yy}" x2="{width - f.right}" y2="{yy}" '
                    f'stroke-dasharray="2 2"><title>kv_high {r.thresholds.kv_high:g}</title></line>')
    seg: list[str] = []
    lines = []
    for p, val in zip(pts, vals, strict=True):
        if val is None:
            if len(seg) > 1:
                lines.append(seg)
            seg = []
            continue
        seg.append(f"{f.x(p.ts)},{y(val)}")
    if seg:
        lines.append(seg)
    for s in lines:
        if len(s) == 1:
            cx, cy = s[0].split(",")
            body.append(f'<circle class="fg" cx="{cx}" cy="{cy}" r="1.5"/>')
        else:
            body.append(f'<polyline class="line" points="{" ".join(s)}"/>')
    if not any(v is not None for v in vals):
        body.append(f'<text class="fg" x="{width / 2}" y="{height / 2}" text-anchor="middle">no data: not exposed '
                    'by any replica</text>')
    body.append(f'<text class="fg" x="{f.left}" y="12">{esc(METRIC_LABEL[key])}</text>')
    body += f.actions()
    return _svg(width, height, body, METRIC_LABEL[key] + " over time", standalone)

"""The report as HTML (one self-contained page) and as Markdown (text, tables, SVG files beside it).

Both tell the same story from the same `Story` rows, so a number cannot differ between them.
The HTML needs no network: styles and pictures are inline, no script, no font or image fetched;
it follows the reader's light / dark preference and prints on white.
"""

from __future__ import annotations

from typing import Any

import os
from dataclasses import dataclass, field

from .. import verdicts as V
from .audit_join import WINDOWS
from .build import INCIDENT, METRIC_LABEL, METRICS, Report
from .svg import css, esc, heatmap, metric_plot, swimlane, when

_BA_HEAD = ["fleet figure (mean)"] + [w[0] for w in WINDOWS]
LANES_MAX = 40  # more replicas than this: the heat map instead of one lane each


def dur(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, s)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        m, sec = divmod(int(round(s)), 60)
        return f"{m} min {sec} s" if sec else f"{m} min"
    return f"{s / 3600:.1f} h"


def _num(key: str, v: float | None) -> str:
    if v is None:
        return "no data"
    if key == "kv":
        return f"{v:.2f}"
    if key == "ttft":
        return f"{v:.2f} s"
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


@dataclass
class Story:
    title: str
    summary: list[tuple[str, str]]
    first: list[list[str]]
    actions: list[dict[str, Any]]
    minutes_head: list[str]
    minutes: list[list[str]]
    moments: list[tuple[str, str, list[str]]]
    notes: list[str]
    pictures: list[tuple[str, str, str]] = field(default_factory=list)  # (file stem, caption, svg)


def story(r: Report, standalone_svg: bool = False) -> Story:
    n_rep = len(r.replicas)
    affected = r.affected
    win = r.incident_window
    if win is None:
        window = "no incident verdict in the recording"
    elif win[1] is None:
        window = f"{when(win[0], True)} -> not recovered by the end of the recording ({when(r.end, True)})"
    else:
        window = f"{when(win[0], True)} -> {when(win[1], True)} ({dur(win[1] - win[0])})"
    fm = r.first_mitigation
    first_ts = r.first_detected
    first_who = [f"{n} ({v})" for n, (ts, v) in sorted(r.first_verdict.items()) if ts == first_ts]
    summary = [
        ("Recording", f"{r.recording}: {r.scrapes} scrapes, {n_rep} replicas, {when(r.start, True)} -> "
                      f"{when(r.end, True)} ({dur(r.end - r.start)})"),
        ("Incident window", window),
        ("Replicas affected", f"{len(affected)} of {n_rep}" + (f": {', '.join(affected[:12])}" if affected else "")
         + (f" +{len(affected) - 12}" if len(affected) > 12 else "")),
        ("Model groups affected", ", ".join(r.affected_groups) or ("-" if not affected else "unknown (not recorded)")),
        ("Signature onset", when(r.fleet_onset, True)),
        ("First verdict", f"{when(first_ts, True)}: {', '.join(first_who)}" if first_who else "-"),
        ("Fleet alarm started", when(r.alarm_start, True) if r.alarm_start is not None else "never"),
        ("Time to detect", dur(r.time_to_detect)),
        ("Time to first mitigation", f"{dur(r.time_to_mitigate)} ({fm.what}, by {fm.user})" if fm else
         ("no successful action in the audit log" if r.audit else "no audit log given (--audit)")),
        ("Time to recovery", dur(r.time_to_recover) if r.recovered_at is not None else
         ("not confirmed by the end of the recording" + (f" ({'; '.join(r.unrecovered)})" if r.unrecovered else "")
          if affected else "-")),
    ]
    if r.relapse_at is not None:
        summary.append(("Relapse", f"an incident verdict or alarm again at {when(r.relapse_at, True)}"))
    first = []
    for n in affected:
        ts, v = r.first_verdict[n]
        on = r.onset.get(n)
        first.append([n, r.groups.get(n, "-"), when(on), f"{V.BY_NAME[v].symbol if v in V.BY_NAME else ''} {v}".strip(),
                      when(ts), dur(ts - on if on is not None else None)])
    actions = []
    for i, m in enumerate(r.mitigations, 1):
        actions.append({
            "n": i, "when": when(m.ts), "who": m.user + (f" ({m.user_source})" if m.user_source else ""),
            "what": m.what, "result": ("ok" if m.ok else "FAILED" if m.ok is False else "unknown") + f": {m.message}",
            "diff": m.diff.strip(), "context": m.context,
            "before_after": [[METRIC_LABEL[k]] + [_num(k, x) for x in m.before_after.get(k, (None,) * len(WINDOWS))]
                             for k in METRICS],
        })
    seen = [v for v in V.VERDICTS if any(v in r.verdict_seconds(n) for n in r.replicas)]
    minutes = []
    for n in sorted(r.replicas, key=lambda n: (r.replicas[n].first_ts or 0.0, n)):
        secs = r.verdict_seconds(n)
        minutes.append([n] + [f"{secs[v] / 60:.1f}" if v in secs else "" for v in seen])
    moments = [(when(m.ts), m.title, m.lines) for m in r.moments]
    notes = list(r.problems)
    if r.audit_outside:
        notes.append(f"{r.audit_outside} audit entr{'y' if r.audit_outside == 1 else 'ies'} outside the recording's "
                     "window, not shown")
    pics = []
    if len(r.replicas) <= LANES_MAX:
        pics.append(("lanes", "Verdict per replica (numbered dashes: the actions; solid: recovery confirmed)", swimlane(r, standalone=standalone_svg)))
    else:
        pics.append(("heatmap", f"Worst verdict per replica and minute ({len(r.replicas)} replicas)",
                     heatmap(r, standalone=standalone_svg)))
    for k in METRICS:
        pics.append((k, f"{METRIC_LABEL[k]}; shaded: the fleet's worst verdict", metric_plot(r, k, standalone=standalone_svg)))
    return Story(f"Incident report: {os.path.basename(r.recording)}", summary, first, actions,
                 ["replica"] + seen, minutes, moments, notes, pics)


DEFINITIONS = (
    "Signature onset: the first scrape of the unbroken run of breaching scrapes (KV usage >= kv_high, a "
    "preemption, or a queue >= waiting_min) that ends in a replica's first incident verdict "
    f"({', '.join(INCIDENT)}). Time to detect: onset to the first verdict. Fleet alarm: the dashboard's red "
    "banner (a replica in kv-pressure or a queue / latency alarm). Recovery: the runbook's verification "
    "(preemptions ~0, KV below kv_high and the queue drained, held for the recovery window; latency back; no "
    "new restart) confirmed on every serving replica that had an incident verdict, with no incident verdict "
    "or alarm left. Verdicts are those `kvwatch diagnose` gives for the same file. Before / after: the mean of "
    "each fleet figure over the 30 s before an action (what the on-call saw when acting), 1 to 4 and 5 to 10 minutes after it (a later "
    "action inside a window shares it)."
)


# -- Markdown ----------------------------------------------------------------------------------------


def _md_cell(s: str) -> str:
    """Text for a Markdown line or cell: a renderer must not take a replica's or user's name for
    HTML or for table syntax."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out


def markdown(r: Report, path: str) -> list[str]:
    """Write the Markdown report to `path` and its pictures beside it (`<stem>-<name>.svg`);
    the files written, the report first."""
    s = story(r, standalone_svg=True)
    base = os.path.splitext(path)[0]
    written = [path]
    out = [_md_cell(f"# {s.title}"), "", "## Summary", ""]
    out += _md_table(["", ""], [[k, v] for k, v in s.summary])
    out += ["", "## First verdict per replica", ""]
    out += _md_table(["replica", "group", "onset", "first verdict", "at", "time to detect"], s.first) if s.first \
        else ["No replica had an incident verdict."]
    out += ["", "## Mitigations (audit log)", ""]
    if not s.actions:
        out.append("None in the audit log for this window." if r.audit else "No audit log given (`--audit FILE`).")
    for a in s.actions:
        out += [_md_cell(f"### {a['n']}. {a['when']}: {a['what']}"), "",
                _md_cell(f"- who: {a['who']} (context {a['context'] or '-'})"), _md_cell(f"- result: {a['result']}"), ""]
        if a["diff"]:
            out += ["```diff", a["diff"].replace("```", "` ` `"), "```", ""]
        out += _md_table(_BA_HEAD, a["before_after"]) + [""]
    out += ["## Pictures", ""]
    for stem, caption, svg in s.pictures:
        name = f"{base}-{stem}.svg"
        with open(name, "w", encoding="utf-8") as f:
            f.write(svg)
        written.append(name)
        out += [f"![{caption}]({os.path.basename(name)})", "", f"*{caption}*", ""]
    out += ["## Minutes per verdict", ""]
    out += _md_table(s.minutes_head, s.minutes) + [""]
    out += ["## Evidence at key moments", ""]
    for ts, title, lines in s.moments:
        out += [_md_cell(f"### {ts}: {title}"), "", "```"] + [ln.replace("```", "` ` `") for ln in lines] + ["```", ""]
    out += ["## Notes", ""]
    out += [_md_cell(f"- {n}") for n in s.notes] or ["- The whole recording was read; nothing was skipped."]
    out += [f"- {DEFINITIONS}", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    return written


# -- HTML --------------------------------------------------------------------------------------------

_PAGE_CSS = """
:root{color-scheme:light dark;--bg:#ffffff;--fg:#111827;--mute:#6b7280;--line:#e5e7eb;--card:#f9fafb;
--ok:#15803d;--bad:#b91c1c}
@media (prefers-color-scheme: dark){:root{--bg:#0f1115;--fg:#e5e7eb;--mute:#9ca3af;--line:#2a2f3a;
--card:#171a21;--ok:#4ade80;--bad:#f87171}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif}
main{max-width:1000px;margin:0 auto;padding:16px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:14px 0 6px}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top}
th{color:var(--mute);font-weight:600}
.kv th{width:200px}
.wrap{overflow-x:auto}
figure{margin:10px 0}figcaption{color:var(--mute);font-size:12px}
svg{max-width:100%;height:auto;display:block}
pre{background:var(--card);border:1px solid var(--line);padding:8px;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;font-size:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:8px 12px;margin:8px 0}
.ok{color:var(--ok)}.bad{color:var(--bad)}.mute{color:var(--mute)}
td:first-child{white-space:nowrap}
@media (max-width:600px){.kv th{width:auto}main{padding:8px}td,th{padding:3px}
figure{overflow-x:auto}figure svg{min-width:640px;max-width:none}}
@media print{:root{--bg:#fff;--fg:#000;--mute:#444;--line:#bbb;--card:#fff}
body{font-size:11px}main{max-width:none}figure,.card,table{break-inside:avoid}}
"""


def _table(head: list[str] | None, rows: list[list[str]], cls: str = "") -> str:
    h = "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in head) + "</tr>" if head else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="wrap"><table class="{cls}">{h}{body}</table></div>'


def html(r: Report) -> str:
    s = story(r)
    out = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
           "img-src data:\">",
           f"<title>{esc(s.title)}</title><style>{_PAGE_CSS}{css()}</style></head><body><main>",
           f"<h1>{esc(s.title)}</h1>", "<h2>Summary</h2>"]
    out.append('<div class="wrap"><table class="kv">' + "".join(
        f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in s.summary) + "</table></div>")
    out.append("<h2>First verdict per replica</h2>")
    out.append(_table(["replica", "group", "onset", "first verdict", "at", "time to detect"], s.first) if s.first
               else "<p>No replica had an incident verdict.</p>")
    out.append("<h2>Mitigations (audit log)</h2>")
    if not s.actions:
        out.append("<p>" + ("None in the audit log for this window." if r.audit else
                            "No audit log given (<code>--audit FILE</code>).") + "</p>")
    for a in s.actions:
        res_cls = "ok" if a["result"].startswith("ok") else "bad"
        out.append(f'<div class="card"><h3>{a["n"]}. {esc(a["when"])}: {esc(a["what"])}</h3>'
                   f'<div>who: {esc(a["who"])} <span class="mute">(context {esc(a["context"] or "-")})</span></div>'
                   f'<div class="{res_cls}">result: {esc(a["result"])}</div>'
                   + (f"<pre>{esc(a['diff'])}</pre>" if a["diff"] else "")
                   + _table(_BA_HEAD, a["before_after"]) + "</div>")
    out.append("<h2>Pictures</h2>")
    for _stem, caption, svg in s.pictures:
        out.append(f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>")
    out.append("<h2>Minutes per verdict</h2>")
    out.append(_table(s.minutes_head, s.minutes))
    out.append("<h2>Evidence at key moments</h2>")
    for ts, title, lines in s.moments:
        out.append(f"<h3>{esc(ts)}: {esc(title)}</h3><pre>{esc(chr(10).join(lines))}</pre>")
    out.append("<h2>Notes</h2><ul>")
    out += [f"<li>{esc(n)}</li>" for n in s.notes] or ["<li>The whole recording was read; nothing was skipped.</li>"]
    out.append(f"<li>{esc(DEFINITIONS)}</li></ul></main></body></html>")
    return "\n".join(out)

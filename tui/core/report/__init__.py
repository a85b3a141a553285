"""`kvwatch report`: the postmortem of a recorded incident, joined with the audit log.

build.py gathers the facts in one streamed pass (the same replay as `kvwatch diagnose`),
audit_join.py places the logged actions on the timeline, svg.py draws the pictures and
render.py writes the HTML page or the Markdown with its SVG files.
"""

from __future__ import annotations

from .build import Report, build_report
from .render import html, markdown

__all__ = ["Report", "build_report", "html", "markdown", "write_report"]


def write_report(report: Report, path: str) -> list[str]:
    """Write `report` to `path`: Markdown (and its pictures beside it) for .md, else HTML. The
    files written."""
    if path.lower().endswith((".md", ".markdown")):
        return markdown(report, path)
    text = html(report)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return [path]

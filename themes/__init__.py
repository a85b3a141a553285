"""kvwatch themes: Textual themes plus `$verdict-*` variables that the widgets read.

Verdicts always carry a symbol and a word as well as a colour (see widgets.verdict), so no
theme relies on colour alone.
"""

from __future__ import annotations

from textual.theme import Theme

# Variables every kvwatch theme defines; widgets fall back to these when a theme omits one.
VERDICT_DEFAULTS = {
    "verdict-kv-pressure": "#ff4d4f",
    "verdict-node-fault": "#ff79c6",
    "verdict-down": "#9a9a9a",
    "verdict-stalled": "#ff9f43",
    "verdict-concurrency-capped": "#f1c40f",
    "verdict-host-bound": "#f5a623",
    "verdict-compute-bound": "#5dade2",
    "verdict-unknown": "#7f8c8d",
    "verdict-healthy": "#2ecc71",
    "pressure-row-bg": "#3a1114",
    "banner-bg": "#b3001b",
    "banner-fg": "#ffffff",
    "spark-kv": "#e67e22",
    "spark-queue": "#f1c40f",
    "spark-preempt": "#ff4d4f",
    "spark-mem": "#9b59b6",
    "spark-gpu": "#3498db",
    "cell-crossed": "#ff4d4f",
    "production-bg": "#8b0000",
}

DARK = Theme(
    name="kvwatch-dark",
    primary="#4ea1ff",
    secondary="#7f8fa6",
    accent="#ffb454",
    warning="#f5a623",
    error="#ff4d4f",
    success="#2ecc71",
    foreground="#d8dee9",
    background="#0f1218",
    surface="#161b22",
    panel="#1f2630",
    dark=True,
    variables=dict(VERDICT_DEFAULTS),
)

THEMES: dict[str, Theme] = {DARK.name: DARK}
DEFAULT_THEME = DARK.name

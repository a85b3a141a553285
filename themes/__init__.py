"""kvwatch themes: Textual themes plus `$verdict-*` variables that the widgets read.

Verdicts always carry a symbol and a word as well as a colour (see widgets.verdict), so no
theme relies on colour alone.
"""

from __future__ import annotations

from textual.theme import Theme

from tui.core import verdicts as V


def verdict_colours(by_verdict: dict[str, str]) -> dict[str, str]:
    """{verdict: colour} as theme variables (the registry's colour roles); a theme must colour
    every registered verdict, so a new verdict cannot be drawn without one."""
    if set(by_verdict) != set(V.VERDICTS):
        raise ValueError(f"verdict colours for {sorted(by_verdict)}, not {sorted(V.VERDICTS)}")
    return {V.BY_NAME[name].colour_role: colour for name, colour in by_verdict.items()}


# Variables every kvwatch theme defines; widgets fall back to these when a theme omits one.
VERDICT_DEFAULTS = {
    **verdict_colours({
        V.KV_PRESSURE: "#ff4d4f",
        V.NODE_FAULT: "#ff79c6",
        V.DOWN: "#9a9a9a",
        V.STALLED: "#ff9f43",
        V.CONCURRENCY_CAPPED: "#f1c40f",
        V.LORA_CAPPED: "#f1c40f",
        V.OVERLOADED: "#ff7f50",
        V.STARTING: "#8fa8c8",
        V.HOST_BOUND: "#f5a623",
        V.COMPUTE_BOUND: "#5dade2",
        V.UNKNOWN: "#7f8c8d",
        V.HEALTHY: "#2ecc71",
    }),
    "pressure-row-bg": "#4d1418",
    "banner-bg": "#b3001b",
    "banner-fg": "#ffffff",
    "spark-kv": "#e67e22",
    "spark-queue": "#f1c40f",
    "spark-preempt": "#ff4d4f",
    "spark-mem": "#9b59b6",
    "spark-gpu": "#3498db",
    "cell-crossed": "#ff4d4f",
    "production-bg": "#8b0000",
    "banner-text-style": "bold",  # the monochrome theme adds reverse: its colours are stripped
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


def _vars(verdicts: dict[str, str], **over: str) -> dict[str, str]:
    return {**VERDICT_DEFAULTS, **verdict_colours(verdicts), **{k.replace("_", "-"): v for k, v in over.items()}}


LIGHT = Theme(
    name="kvwatch-light",
    primary="#0b5cad",
    secondary="#5a6b7f",
    accent="#b35900",
    warning="#a66300",
    error="#c0001a",
    success="#1a7f37",
    foreground="#1c2128",
    background="#fafbfc",
    surface="#eef1f4",
    panel="#dde3ea",
    dark=False,
    variables=_vars(
        {
            V.KV_PRESSURE: "#c0001a",
            V.NODE_FAULT: "#a3007d",
            V.DOWN: "#5f6368",
            V.STALLED: "#b34700",
            V.CONCURRENCY_CAPPED: "#8a6d00",
            V.LORA_CAPPED: "#8a6d00",
            V.OVERLOADED: "#b0460f",
            V.STARTING: "#4a6a8a",
            V.HOST_BOUND: "#a65e00",
            V.COMPUTE_BOUND: "#0b5cad",
            V.UNKNOWN: "#6e7781",
            V.HEALTHY: "#1a7f37",
        },
        pressure_row_bg="#ffd7db",
        banner_bg="#c0001a",
        banner_fg="#ffffff",
        spark_kv="#b35900",
        spark_queue="#8a6d00",
        spark_preempt="#c0001a",
        spark_mem="#6f42c1",
        spark_gpu="#0b5cad",
        cell_crossed="#c0001a",
        production_bg="#ffb3b3",
    ),
)

# Pure black and white plus fully saturated colours; the pressure row is a solid red block.
HIGH_CONTRAST = Theme(
    name="kvwatch-high-contrast",
    primary="#00ffff",
    secondary="#ffffff",
    accent="#ffff00",
    warning="#ffff00",
    error="#ff0000",
    success="#00ff00",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#202020",
    dark=True,
    luminosity_spread=0.3,
    text_alpha=1.0,
    variables=_vars(
        {
            V.KV_PRESSURE: "#ff3030",
            V.NODE_FAULT: "#ff00ff",
            V.DOWN: "#ffffff",
            V.STALLED: "#ff9900",
            V.CONCURRENCY_CAPPED: "#ffff00",
            V.LORA_CAPPED: "#ffff00",
            V.OVERLOADED: "#ff8800",
            V.STARTING: "#80c0ff",
            V.HOST_BOUND: "#ffcc00",
            V.COMPUTE_BOUND: "#00ffff",
            V.UNKNOWN: "#c0c0c0",
            V.HEALTHY: "#00ff00",
        },
        pressure_row_bg="#800000",
        banner_bg="#ff0000",
        banner_fg="#ffffff",
        spark_kv="#ffffff",
        spark_queue="#ffff00",
        spark_preempt="#ff3030",
        spark_mem="#ff00ff",
        spark_gpu="#00ffff",
        cell_crossed="#ffff00",
        production_bg="#ff0000",
        block_cursor_text_style="bold reverse",
    ),
)

# Okabe-Ito, the palette most readers with any colour-vision deficiency can tell apart; no
# verdict relies on a red/green pair, and every verdict also carries its symbol and word.
COLORBLIND = Theme(
    name="kvwatch-colorblind",
    primary="#56b4e9",
    secondary="#999999",
    accent="#e69f00",
    warning="#e69f00",
    error="#d55e00",
    success="#009e73",
    foreground="#e6e6e6",
    background="#101214",
    surface="#181b1f",
    panel="#23272d",
    dark=True,
    variables=_vars(
        {
            V.KV_PRESSURE: "#d55e00",  # vermillion
            V.NODE_FAULT: "#cc79a7",  # reddish purple
            V.DOWN: "#999999",  # grey
            V.STALLED: "#e69f00",  # orange
            V.CONCURRENCY_CAPPED: "#f0e442",  # yellow
            V.LORA_CAPPED: "#f0e442",
            V.OVERLOADED: "#d55e00",
            V.STARTING: "#999999",
            V.HOST_BOUND: "#0072b2",  # blue
            V.COMPUTE_BOUND: "#56b4e9",  # sky blue
            V.UNKNOWN: "#bbbbbb",
            V.HEALTHY: "#009e73",  # bluish green
        },
        pressure_row_bg="#4a2100",
        banner_bg="#d55e00",
        banner_fg="#000000",
        spark_kv="#e69f00",
        spark_queue="#f0e442",
        spark_preempt="#d55e00",
        spark_mem="#cc79a7",
        spark_gpu="#56b4e9",
        cell_crossed="#d55e00",
        production_bg="#cc79a7",
    ),
)

# Used with NO_COLOR or a terminal without colours: the app also strips every colour from the
# output (tui.terminal.StripColor), so emphasis comes from bold and reverse only.
MONO = Theme(
    name="kvwatch-mono",
    primary="#ffffff",
    secondary="#c0c0c0",
    accent="#ffffff",
    warning="#ffffff",
    error="#ffffff",
    success="#ffffff",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#000000",
    dark=True,
    variables={
        **{k: "#ffffff" for k in VERDICT_DEFAULTS if k != "banner-text-style"},
        "pressure-row-bg": "#000000",
        "banner-bg": "#000000",
        "production-bg": "#000000",
        "banner-text-style": "bold reverse",
        "block-cursor-text-style": "bold reverse",
        "block-cursor-blurred-text-style": "reverse",
        "input-cursor-text-style": "reverse",
        "footer-key-foreground": "#ffffff",
    },
)

THEMES: dict[str, Theme] = {t.name: t for t in (DARK, LIGHT, HIGH_CONTRAST, COLORBLIND, MONO)}
DEFAULT_THEME = DARK.name
MONO_THEME = MONO.name

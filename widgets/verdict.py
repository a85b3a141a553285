"""How a verdict is written: a symbol and a word always, colour on top (never colour alone).

Symbols, words and colour roles come from the verdict registry (tui.core.verdicts)."""

from __future__ import annotations

from tui.core.verdicts import BY_NAME, colour_role


def label(verdict: str, *, ascii: bool = False) -> str:
    v = BY_NAME.get(verdict)
    if v is None:  # a verdict this build does not know (a newer recording): its name, marked unknown
        return f"? {verdict}"
    return f"{v.ascii_symbol if ascii else v.symbol} {v.short}"


def colour_var(verdict: str) -> str:
    return colour_role(verdict)

"""The window of each rate kvwatch shows, in one place: one label, one number, on every screen.

A counter's rate ("preemptions/s", the table's PRE/s) is its increase over the last
RATE_WINDOW_S seconds per second ([windows] rate_s in the config changes it), computed once by
the history (history.Windows.rate_s) and read as it is by the fleet table, the header, the
detail screen, the diagnosis evidence and its threshold (`preempt_rate`), triage, `--json` and
the report. The diagnosis' other preemption signal is a count ("N in the last 3 intervals"),
labelled as one. A view over a longer span (a plot, the report's series) is that same rate at
each moment, never a second rate under the same label.
"""

from __future__ import annotations

RATE_WINDOW_S = 30.0  # counters -> rates over this many (source) seconds


def window_text(seconds: float) -> str:
    """How a rate's window is written beside it: "30 s", "2 min"."""
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def per_second(what: str, seconds: float = RATE_WINDOW_S) -> str:
    """A rate's label with its window: "preemptions/s (30 s)"."""
    return f"{what}/s ({window_text(seconds)})"

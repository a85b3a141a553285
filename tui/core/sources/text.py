"""Make text from the network safe to show: no control characters, bounded length."""

from __future__ import annotations

import re

# C0/C1 controls (ESC starts terminal escape sequences), DEL, and bidi overrides.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: str, limit: int = 200) -> str:
    """`text` with control characters replaced by '?' and cut to `limit` characters."""
    out = _UNSAFE.sub("?", text if isinstance(text, str) else str(text))
    return out if len(out) <= limit else out[: limit - 1] + "…"

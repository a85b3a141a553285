"""Make text from the network or the cluster safe for a terminal.

Rich's Text() already treats `[...]` literally; what remains dangerous are control characters
(ESC sequences can move the cursor, retitle the window or write to the clipboard), so they are
replaced with visible escapes.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def clean(text: object, limit: int | None = None, *, keep_newlines: bool = False) -> str:
    """`text` with control characters made visible, optionally cut to `limit` characters."""
    s = "" if text is None else str(text)
    if not keep_newlines:
        s = s.replace("\n", "\\n").replace("\t", " ")
    s = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", s)
    return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"

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


# -- credentials -----------------------------------------------------------------------------
# Every text that leaves kvwatch (error messages, --json lines, logs, recordings, audit lines)
# goes through `redact`: Authorization-style values are masked by shape, and secrets kvwatch has
# read (bearer tokens) by value, so a token never shows even inside an odd library message.
REDACTED = "<redacted>"
_AUTH = re.compile(
    r"(?i)((?:proxy-)?authorization\b['\"]?\s*[:=,]\s*['\"]?(?:bearer|basic|token)?\s*|(?-i:\bBearer)\s+)"
    r"[^\s'\",;)}\]]+"
)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")  # a URL's user:password@
_SECRETS: set[str] = set()


def remember_secret(value: str) -> None:
    """Mask `value` (and each of its lines) in every redacted text from now on."""
    for part in {value, *value.splitlines()}:
        if len(part.strip()) >= 4:  # a shorter fragment would mask ordinary words
            _SECRETS.add(part.strip())


def redact(text: object) -> str:
    """`text` with Authorization values and known secrets replaced by <redacted>, and any URL's
    userinfo (user:password@) left out."""
    s = "" if text is None else str(text)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in s:
            s = s.replace(secret, REDACTED)
        rep = repr(secret)[1:-1]  # as a bytes/str repr would show it
        if rep != secret and rep in s:
            s = s.replace(rep, REDACTED)
    s = _USERINFO.sub(r"\1", s) if "@" in s else s
    return _AUTH.sub(lambda m: m.group(1) + REDACTED, s)

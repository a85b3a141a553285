"""Container argv as tokens that remember where they are written (list element, span in a
`sh -c` script), and values resolved through `$(VAR)` / `${VAR}` references to the env."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from .values import _SHELLS, ArgError


@dataclass(frozen=True, slots=True)
class _Tok:
    value: str  # after shell unquoting
    field: str  # "command" | "args"
    index: int  # element of that list
    start: int = -1  # span inside a shell script element; -1 = the whole element
    end: int = -1
    single_quoted: bool = False  # a shell would not expand $VAR inside

    @property
    def in_script(self) -> bool:
        return self.start >= 0


def _shell_split(script: str) -> list[tuple[str, int, int, bool] | None]:
    """Split a POSIX shell script into words with their spans; None marks a command separator.

    Enough of sh for container scripts: quotes, backslashes, line continuations, comments,
    `$(...)` / `${...}` kept inside words, and ; && || | & newlines ( ) as separators.
    """
    out: list[tuple[str, int, int, bool] | None] = []
    i, n = 0, len(script)
    word: list[str] = []
    start = -1
    single = False

    def flush(end: int) -> None:
        nonlocal word, start, single
        if start >= 0:
            out.append(("".join(word), start, end, single))
        word, start, single = [], -1, False

    while i < n:
        c = script[i]
        if c == "\\" and i + 1 < n and script[i + 1] == "\n":
            i += 2  # line continuation
            continue
        if c in " \t\r":
            flush(i)
            i += 1
            continue
        if c == "\n" or c in ";&|()":
            flush(i)
            if not out or out[-1] is not None:
                out.append(None)
            i += 1
            continue
        if c == "#" and start < 0:
            while i < n and script[i] != "\n":
                i += 1
            continue
        if start < 0:
            start = i
        if c == "'":
            j = script.find("'", i + 1)
            if j < 0:
                raise ArgError("unterminated ' in the shell script")
            word.append(script[i + 1 : j])
            single = True
            i = j + 1
        elif c == '"':
            i += 1
            while i < n and script[i] != '"':
                if script[i] == "\\" and i + 1 < n and script[i + 1] in '"\\$`\n':
                    if script[i + 1] != "\n":
                        word.append(script[i + 1])
                    i += 2
                    continue
                word.append(script[i])
                i += 1
            if i >= n:
                raise ArgError('unterminated " in the shell script')
            i += 1
        elif c == "\\" and i + 1 < n:
            word.append(script[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and script[i + 1] in "({":
            close = ")" if script[i + 1] == "(" else "}"
            j = script.find(close, i + 2)
            if j < 0:
                raise ArgError(f"unterminated ${script[i + 1]} in the shell script")
            word.append(script[i : j + 1])
            i = j + 1
        else:
            word.append(c)
            i += 1
    flush(n)
    return out


def _env_map(container: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(e["name"]): dict(e) for e in container.get("env") or () if isinstance(e, Mapping) and e.get("name")}


_K8S_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SH_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _env_ref(text: str, tok: _Tok | None) -> tuple[str, str | None] | None:
    """The env var a whole value refers to: ("NAME", shell default or None); None if literal."""
    m = _K8S_REF.fullmatch(text)
    if m:
        return m.group(1), None
    if tok is not None and tok.in_script and not tok.single_quoted:
        m = _SH_REF.fullmatch(text)
        if m:
            return (m.group(1) or m.group(3)), m.group(2)
    return None


def _resolve(text: str, tok: _Tok | None, env: Mapping[str, dict[str, Any]]) -> tuple[str | None, str | None, str]:
    """(resolved text or None, env var name or None, note)."""
    ref = _env_ref(text, tok)
    if ref is None:
        # $$(X) is Kubernetes' escape for a literal $(X)
        return text.replace("$$(", "$("), None, ""
    name, shell_default = ref
    entry = env.get(name)
    if entry is not None and "value" in entry:
        return str(entry.get("value") or ""), name, ""
    if entry is not None and entry.get("valueFrom"):
        src = entry["valueFrom"]
        where = next(iter(src), "valueFrom")
        return None, name, f"from ${name} ({where}), not readable here"
    if shell_default is not None:
        return shell_default, name, f"${name} unset, shell default used"
    return None, name, f"${name} is not set in the container env"


def _tokens(container: Mapping[str, Any]) -> tuple[list[_Tok], bool]:
    """All argv tokens of the container (command then args), expanding a `sh -c` script."""
    command = list(container.get("command") or ())
    args = list(container.get("args") or ())
    argv = [("command", i, str(v)) for i, v in enumerate(command)] + [("args", i, str(v)) for i, v in enumerate(args)]
    for pos, (_fld, _idx, val) in enumerate(argv):
        base = val.rsplit("/", 1)[-1]
        if base in _SHELLS:
            # sh [-e ...] -c SCRIPT: the script is the element after the option cluster with "c"
            j = pos + 1
            while j < len(argv) and argv[j][2].startswith("-") and "c" not in argv[j][2]:
                j += 1
            if j + 1 < len(argv) and argv[j][2].startswith("-") and "c" in argv[j][2]:
                sfld, sidx, script = argv[j + 1]
                toks: list[_Tok] = []
                for w in _shell_split(script):
                    if w is None:
                        toks.append(_Tok(";", sfld, sidx, -2, -2))  # separator marker
                    else:
                        toks.append(_Tok(w[0], sfld, sidx, w[1], w[2], w[3]))
                return toks, True
        break
    return [_Tok(v, f, i) for f, i, v in argv], False


def _sh_word(text: str) -> str:
    if re.fullmatch(r"[\w@%+=:,./-]+", text):
        return text
    return shlex.quote(text)

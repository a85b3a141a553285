"""Rewriting a container in the form it was written (the smallest exact diff), the diff the
confirm dialog shows, and the annotation a roll back restores from."""

from __future__ import annotations

import copy
import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .parse import VllmCommand
from .tokens import _sh_word, _Tok
from .values import ArgError, format_value


@dataclass(frozen=True)
class Rewrite:
    container: Mapping[str, Any]  # the new container
    fields: tuple[str, ...]  # which of command / args / env changed
    notes: tuple[str, ...] = ()


def rewrite_container(container: Mapping[str, Any], cmd: VllmCommand, changes: Mapping[str, Any]) -> Rewrite:
    """Apply typed `changes` to a copy of the container, editing each value where it is written.

    - `--flag v` / `--flag=v` / `--max_num_seqs v`: the value token is replaced, spelling kept.
    - `$(VAR)` / `${VAR}` with a literal env value: the env value is changed, not the args.
    - booleans: `--X` <-> `--no-X` (or a `true`/`false` value where one was written).
    - absent flags are appended at the end of the invocation, in the style of the others.
    """
    if not cmd.is_vllm:
        raise ArgError("no vLLM server found in this container; nothing to edit")
    new = copy.deepcopy(dict(container))
    lists = {"command": list(new.get("command") or []), "args": list(new.get("args") or [])}
    env_list = [dict(e) for e in new.get("env") or []]
    env_idx = {e.get("name"): i for i, e in enumerate(env_list)}
    # (field, index) -> list of (start, end, replacement) for script elements; whole-element sets
    script_edits: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    appends: list[tuple[str, ...]] = []  # flag tokens to add at the end of the invocation
    notes: list[str] = []
    changed: set[str] = set()

    def set_tok(tok: _Tok, text: str) -> None:
        if tok.in_script:
            script_edits.setdefault((tok.field, tok.index), []).append((tok.start, tok.end, _sh_word(text)))
        else:
            lists[tok.field][tok.index] = text
        changed.add(tok.field)

    def flag_text(name: str) -> str:
        return "--" + (name.replace("-", "_") if cmd._style_us else name)

    specs = cmd.specs
    for name in (n for n in specs if n in changes):
        val = changes[name]
        spec = specs[name]
        o = cmd._occ.get(name)
        av = cmd.values[name]
        text = format_value(val)
        if o is None:
            if spec.kind == "bool":
                if cmd.generation == "v0" and val is False:
                    continue  # V0 has no --no-X; absent already means off there
                appends.append((flag_text(name if val else "no-" + name),))
            elif cmd._style_eq:
                appends.append((f"{flag_text(name)}={text}",))
            else:
                appends.append((flag_text(name), text))
            continue
        if spec.kind == "bool" and o.inline is None and o.value_tok is None:
            # --X / --no-X: flip the flag itself, keeping its spelling
            raw = o.flag_tok.value
            stem = raw.lstrip("-")
            sep = "_" if "_" in stem else "-"
            base = stem[3:] if o.negated else stem
            set_tok(o.flag_tok, ("--" if val else f"--no{sep}") + base)
            continue
        if av.env_var is not None:
            e_i = env_idx.get(av.env_var)
            if e_i is not None and "value" in env_list[e_i]:
                env_list[e_i]["value"] = text
                changed.add("env")
                continue
            notes.append(f"--{name} was ${av.env_var} ({av.note or 'not a literal env value'}); written as a literal")
        if o.inline is not None:
            flag = o.flag_tok.value.partition("=")[0]
            set_tok(o.flag_tok, f"{flag}={text}")
        elif o.value_tok is not None:
            set_tok(o.value_tok, text)

    # Splice script edits (right to left so spans stay valid) and appended flags.
    end = cmd._end
    if appends:
        if end is None:
            lists["args"].extend(t for group in appends for t in group)
            changed.add("args")
        elif end.in_script:
            words = " ".join(_sh_word(t) for group in appends for t in group)
            script_edits.setdefault((end.field, end.index), []).append((end.end, end.end, " " + words))
            changed.add(end.field)
        else:
            target = (end.field, end.index + 1)
            lists[target[0]][target[1] : target[1]] = [t for group in appends for t in group]
            changed.add(end.field)
    for (fld, idx), edits in script_edits.items():
        script = lists[fld][idx]
        for s, e, rep in sorted(edits, key=lambda x: x[0], reverse=True):
            script = script[:s] + rep + script[e:]
        lists[fld][idx] = script
    for fld in ("command", "args"):
        if fld in changed:
            new[fld] = lists[fld]
    if "env" in changed:
        new["env"] = env_list
    return Rewrite(new, tuple(f for f in ("command", "args", "env") if f in changed), tuple(notes))


# Diff for the confirm dialog


def _render(container: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    lines: list[str] = []
    for fld in fields:
        vals = container.get(fld)
        if not vals:
            continue
        lines.append(f"{fld}:")
        for v in vals:
            if fld == "env":
                if "value" in v:
                    lines.append(f"- {v.get('name')}={v.get('value')}")
                else:
                    lines.append(f"- {v.get('name')} (from {next(iter(v.get('valueFrom') or {'?': 0}))})")
                continue
            s = str(v)
            if "\n" in s or len(s) > 60 and " --" in s:
                # scripts: one flag per line so a one-token change is one changed line
                lines.append("- |")
                for ln in s.split("\n"):
                    parts = re.split(r" (?=--)", ln)
                    lines.extend("    " + p for p in parts)
            else:
                lines.append(f"- {s}")
    return lines


def args_diff(old: Mapping[str, Any], new: Mapping[str, Any], label: str = "container") -> str:
    """Unified diff of the container's command, args and env (what the confirm dialog shows)."""
    fields = ("command", "args", "env")
    diff = difflib.unified_diff(
        _render(old, fields), _render(new, fields), f"a/{label}", f"b/{label}", n=2, lineterm=""
    )
    return "\n".join(diff)


def previous_args_annotation(container: Mapping[str, Any]) -> str:
    """What kvwatch records before an edit, so a later roll back can restore it exactly."""
    keep = {k: container.get(k) for k in ("name", "command", "args", "env") if container.get(k) is not None}
    return json.dumps(keep, separators=(",", ":"), sort_keys=True)

"""Which `test` operations of a JSON Patch fail against an object: what changed since it was
read. The API server's 422 for a failed `test` does not always say which (v1.24 answers with a
generic "the server rejected our request ..."), so kvwatch re-reads the object and checks itself.
"""

from __future__ import annotations

import json
from typing import Any

_MISSING = object()


def pointer_get(obj: Any, path: str) -> Any:
    """The value at an RFC 6901 JSON pointer, or _MISSING."""
    cur = obj
    for raw in path.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict):
            if key not in cur:
                return _MISSING
            cur = cur[key]
        elif isinstance(cur, list):
            if not key.isdigit() or int(key) >= len(cur):
                return _MISSING
            cur = cur[int(key)]
        else:
            return _MISSING
    return cur


def test_ops(patch: Any) -> list[dict[str, Any]]:
    if not isinstance(patch, list):
        return []
    return [op for op in patch if isinstance(op, dict) and op.get("op") == "test" and isinstance(op.get("path"), str)]


def failed_tests(obj: Any, patch: Any) -> list[tuple[str, Any, Any]]:
    """(path, value read, value now) of each `test` op that no longer holds; None for a missing value."""
    out = []
    for op in test_ops(patch):
        now = pointer_get(obj, op["path"])
        if now is _MISSING or now != op.get("value"):
            out.append((op["path"], op.get("value"), None if now is _MISSING else now))
    return out


def short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def applied(obj: Any, patch: Any) -> Any:
    """A copy of `obj` with the add / replace / remove ops of a JSON Patch applied (tests skipped):
    the object as a later step of a plan will read it. Ops that do not apply are skipped."""
    import copy

    out = copy.deepcopy(obj)
    for op in patch if isinstance(patch, list) else []:
        kind, path = op.get("op"), op.get("path")
        if kind not in ("add", "replace", "remove") or not isinstance(path, str) or not path.startswith("/"):
            continue
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        parent = pointer_get(out, "/" + "/".join(x.replace("~", "~0").replace("/", "~1") for x in parents)) if parents else out
        if isinstance(parent, dict):
            if kind == "remove":
                parent.pop(last, None)
            else:
                parent[last] = copy.deepcopy(op.get("value"))
        elif isinstance(parent, list) and last.isdigit() and int(last) <= len(parent):
            i = int(last)
            if kind == "add":
                parent.insert(i, copy.deepcopy(op.get("value")))
            elif i < len(parent):
                if kind == "remove":
                    parent.pop(i)
                else:
                    parent[i] = copy.deepcopy(op.get("value"))
    return out

"""Every key binding id kvwatch defines (app, screens, widgets), for remapping and `config show`."""

from __future__ import annotations

import importlib
import pkgutil

from textual.binding import Binding
from textual.dom import DOMNode

_PACKAGES = ("tui.screens", "widgets")


def _subclasses(cls: type) -> list[type]:
    out, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def binding_ids() -> dict[str, str]:
    """{binding id: default key(s)} over the App and every screen and widget kvwatch ships."""
    import tui.app  # noqa: F401 - the App's own bindings

    for pkg_name in _PACKAGES:
        pkg = importlib.import_module(pkg_name)
        for mod in pkgutil.iter_modules(pkg.__path__):
            try:
                importlib.import_module(f"{pkg_name}.{mod.name}")
            except Exception:  # noqa: BLE001 - a broken optional screen must not hide the others
                continue
    out: dict[str, str] = {}
    for cls in _subclasses(DOMNode):
        if not cls.__module__.startswith(("tui.", "widgets.")):
            continue
        for b in cls.__dict__.get("BINDINGS", ()):
            if isinstance(b, Binding) and b.id:
                out.setdefault(b.id, b.key)
    return out

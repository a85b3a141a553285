"""Every key binding id kvwatch defines, for remapping and `config show`: read from the action
registry (tui/actions.py), so nothing here imports the app or a screen."""

from __future__ import annotations

from .actions import default_keys


def binding_ids() -> dict[str, str]:
    """{binding id: default key(s)} over the App and every screen and widget kvwatch ships."""
    return default_keys()

"""Every key binding id kvwatch defines, for remapping and `config show`: read from the action
registry (tui/actions.py), so nothing here imports the app or a screen."""

from __future__ import annotations

from .actions import default_keys, remap_problems


def binding_ids() -> dict[str, str]:
    """{binding id: default key(s)} over the App and every screen and widget kvwatch ships."""
    return default_keys()


def remap_config_problems(cfg) -> list:
    """[keys] remaps onto a key another action uses, as located config problems ({id: key} of
    known ids only; the app keeps those actions' default keys)."""
    known = binding_ids()
    keys = {k: v for k, v in cfg.keys.items() if k in known}
    return [(bid, cfg.problem(("keys", bid), f"keys.{bid} = {keys[bid]!r}: {why}; kept the default key"))
            for bid, why in remap_problems(keys)]

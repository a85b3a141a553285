"""Every key binding id kvwatch defines, for remapping and `config show`: read from the action
registry (tui/actions.py), so nothing here imports the app or a screen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .actions import default_keys, remap_problems

if TYPE_CHECKING:
    from .core.config import Config, ConfigProblem


def binding_ids() -> dict[str, str]:
    """{binding id: default key(s)} over the App and every screen and widget kvwatch ships."""
    return default_keys()


def checked_keymap(cfg: "Config") -> tuple[dict[str, str], list["ConfigProblem"]]:
    """The config's [keys] remap without what cannot apply: ids no screen knows, and keys another
    action already uses where both apply (`actions.remap_problems`); each refused entry is a
    problem located in the file, and that action keeps its default key."""
    keys = dict(cfg.keys)
    known = binding_ids()
    problems = []
    for bid in sorted(set(keys) - set(known)):
        problems.append(cfg.problem(("keys", bid), f"keys.{bid}: no such binding id (see `kvwatch config show`)"))
        del keys[bid]
    for bid, why in remap_problems(keys):
        problems.append(cfg.problem(("keys", bid), f"keys.{bid} = {keys[bid]!r}: {why}; kept the default key"))
    for bid, _why in remap_problems(keys):
        keys.pop(bid, None)
    return keys, problems

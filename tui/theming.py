"""Which theme the app shows: the context's profile theme, else the config's, else the default
(`--theme` and NO_COLOR override both; the app applies them). Pure: names in, names out."""

from __future__ import annotations

from themes import DEFAULT_THEME, THEMES
from tui.core.config import Config


def theme_for(config: Config, context: str | None) -> tuple[str, tuple[str, ...]]:
    """(theme name, the config key that chose it, for reporting an unknown name) for `context`."""
    prof = config.profile_for(context)
    name = (prof.theme if prof else None) or config.theme or DEFAULT_THEME
    return name, (("contexts", prof.pattern, "theme") if prof and prof.theme else ("theme",))


def next_theme(current: str) -> str:
    """The theme after `current` in the shipped order (ctrl+t), wrapping round."""
    names = list(THEMES)
    return names[(names.index(current) + 1) % len(names)] if current in names else names[0]

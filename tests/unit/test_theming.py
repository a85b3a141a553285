"""Theme choice (tui/theming.py): context profile, then config, then the default; ctrl+t order."""

from __future__ import annotations

from themes import DEFAULT_THEME, THEMES
from tui.core.config import Config, ContextProfile
from tui.theming import next_theme, theme_for


def test_the_context_profile_theme_wins_and_says_which_key_chose_it() -> None:
    cfg = Config(theme="kvwatch-light", contexts=(ContextProfile("prod-*", theme="kvwatch-high-contrast"),
                                                  ContextProfile("dev")))
    assert theme_for(cfg, "prod-eu") == ("kvwatch-high-contrast", ("contexts", "prod-*", "theme"))
    assert theme_for(cfg, "dev") == ("kvwatch-light", ("theme",))  # a profile without a theme
    assert theme_for(cfg, None) == ("kvwatch-light", ("theme",))
    assert theme_for(Config(), "x") == (DEFAULT_THEME, ("theme",))


def test_next_theme_cycles_through_every_shipped_theme() -> None:
    names = list(THEMES)
    seen, cur = [], names[0]
    for _ in names:
        seen.append(cur)
        cur = next_theme(cur)
    assert seen == names and cur == names[0]
    assert next_theme("no-such-theme") == names[0]

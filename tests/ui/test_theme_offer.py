"""Only themes every screen can draw are offered or accepted: the stock Textual themes (e.g.
`ansi-dark`, whose colours are names like `ansi_green`) ended the app when a screen parsed them."""

from __future__ import annotations

import pytest

from tests.ui.conftest import make_app, prime
from themes import DEFAULT_THEME, THEMES


@pytest.fixture(autouse=True)
def _colour(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


async def test_only_kvwatch_themes_are_available():
    app = make_app()
    async with app.run_test(size=(120, 36)):
        assert set(app.available_themes) == set(THEMES)


async def test_stock_theme_on_the_command_line_falls_back_with_a_notice():
    app = make_app(theme="ansi-dark")
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        assert app.theme == DEFAULT_THEME
        assert any("ansi-dark" in n and "unknown theme" in n for n in app.notices)


@pytest.mark.parametrize("theme", sorted(THEMES))
async def test_every_screen_draws_in_every_offered_theme(theme):
    """Open triage, detail, help and back under each theme: none may end the app."""
    app = make_app(theme=theme, no_color=theme == "kvwatch-mono")
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        for key in ("t", "escape", "enter", "escape", "question_mark", "escape", "ctrl+t"):
            await pilot.press(key)
            await pilot.pause()
        assert app.is_running and app.return_code is None

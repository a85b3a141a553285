"""A modal screen (help, confirm, prompt, seek) draws the screen under it dimmed: Textual
tints every segment of it anew on every frame (a new style blended per segment: a sixth of
opening help at 64 replicas), where the screen under it has a few dozen styles. Each style's
tint is computed once (widgets/tint.py), by Textual's own code: the same cells."""

from __future__ import annotations

from textual.renderables.background_screen import BackgroundScreen

from tests.ui.conftest import make_app, prime
from tui.screens.help import HelpScreen


def _cells(screen) -> list[list[tuple[str, str]]]:
    return [[(ch, str(seg.style)) for seg in strip for ch in seg.text] for strip in screen._compositor.render_strips()]


async def _help_cells(app, pilot) -> list[list[tuple[str, str]]]:
    fleet = app.screen
    await pilot.press("question_mark")
    for _ in range(200):
        if isinstance(app.screen, HelpScreen) and app.screen.rows:
            break
        await pilot.pause()
    await pilot.pause()
    cells = _cells(app.screen)
    await pilot.press("escape")
    for _ in range(200):
        if app.screen is fleet:
            break
        await pilot.pause()
    return cells


async def test_help_tints_the_screen_under_it_once_per_style_and_draws_the_same(monkeypatch):
    tinted: list[int] = []
    process = BackgroundScreen.process_segments.__func__

    def counting(cls, segments, color):
        for seg in process(cls, segments, color):
            tinted.append(1)
            yield seg

    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        first = await _help_cells(app, pilot)
        monkeypatch.setattr(BackgroundScreen, "process_segments", classmethod(counting))
        again = await _help_cells(app, pilot)
        monkeypatch.undo()
        assert again == first
        # the fleet screen under it has the same styles as the first time: none tinted anew
        assert len(tinted) < 50, len(tinted)
    assert any(("on #" in s or " on " in s) for line in first for _, s in line)  # the dimmed screen is drawn


async def test_the_dimmed_screen_under_help_is_drawn_as_textual_draws_it(monkeypatch):
    import widgets.tint as tint_mod

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 4)
        mine = await _help_cells(app, pilot)
    monkeypatch.setattr(tint_mod, "MemoTint", BackgroundScreen)  # Textual's own tint, each frame
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await prime(pilot, 4)
        textual_s = await _help_cells(app, pilot)
    assert mine == textual_s

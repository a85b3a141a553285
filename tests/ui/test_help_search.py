"""The help screen's `/` search: typed text keeps the rows whose key, action or place match it
(case-insensitive); esc in the search box clears the search, and closes the help after."""

from __future__ import annotations

from textual.widgets import Input, Static

from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import until
from tui.screens.help import HelpScreen


def _shown(help_: HelpScreen) -> str:
    """The help's text on screen (the table, rendered)."""
    return "\n".join(line.text for line in help_.query_one("#help-table", Static).render_lines(
        help_.query_one("#help-table", Static).region.reset_offset))


async def test_slash_filters_the_help_rows_and_esc_clears_first() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await prime(pilot, 2)
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        assert "Quit" in _shown(help_) and "Filter" in _shown(help_)
        await pilot.press("slash")
        box = help_.query_one("#help-search", Input)
        await until(pilot, lambda: box.has_focus)
        await pilot.press(*"SORT")  # q, ? and the like are typed, not keys, while searching
        await until(pilot, lambda: help_.shown and all("sort" in " ".join(r).lower() for r in help_.shown))
        assert {what for _, what, _ in help_.shown} >= {"Sort KV", "Sort queue", "Sort name"}
        text = _shown(help_)
        assert "Sort KV" in text and "Quit" not in text and "Filter" not in text
        await pilot.press(*"zzq")
        await until(pilot, lambda: help_.shown == [] and "no key matches" in _shown(help_))
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")  # in the search box: clears the search, the help stays
        await until(pilot, lambda: len(help_.shown) == len(help_.rows) and not box.display)
        assert isinstance(app.screen, HelpScreen) and "Quit" in _shown(help_)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        # a search given with enter stays; esc (or q) then closes the help
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        await pilot.press("slash", *"queue", "enter")
        await until(pilot, lambda: help_.shown and len(help_.shown) < len(help_.rows)
                    and not help_.query_one("#help-search", Input).has_focus)
        assert all("queue" in " ".join(r).lower() for r in help_.shown)
        await pilot.press("q")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_opening_the_help_renders_its_table_once(monkeypatch) -> None:
    """Textual rendered the help's Rich table to measure its height, again to draw it and again
    on each repaint (about six times an opening): once a width now, and the same text."""
    from rich.table import Table

    renders: list[int] = []
    render = Table.__rich_console__

    def counting(self, console, options):
        renders.append(options.max_width)
        return render(self, console, options)

    monkeypatch.setattr(Table, "__rich_console__", counting)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await prime(pilot, 2)
        renders.clear()
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        await until(pilot, lambda: "Quit" in _shown(help_))
        for _ in range(3):
            await pilot.pause()
        assert "Filter" in _shown(help_) and "kvwatch keys" not in _shown(help_)
        assert len(renders) == len(set(renders)), renders  # once for each width it was drawn at

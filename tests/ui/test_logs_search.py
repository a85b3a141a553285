"""The logs screen's `/` search (matches highlighted, `n`/enter and `N` jump between them, esc
clears it before it goes back) and its `w` wrap toggle."""

from __future__ import annotations

from textual.content import Content
from textual.containers import VerticalScroll
from textual.widgets import Input, Static

from tests.ui.conftest import make_app
from tests.ui.kube_app import until
from tui.core.cluster.values import LogLines
from tui.screens.logs import LogsScreen

LONG = "ERROR engine " + "x" * 250 + " tail-end"
LINES = tuple([f"INFO line {i}" for i in range(5)] + ["ERROR needle one"]
              + [f"INFO line {i}" for i in range(6, 40)] + ["WARNING a NEEDLE two", LONG]
              + [f"INFO line {i}" for i in range(42, 60)])


class Logs:
    """A cluster that answers only the log read (all the screen needs)."""

    async def logs(self, namespace, pod, container, *, previous, tail, filtered) -> LogLines:
        return LogLines(pod, "vllm", previous, LINES, len(LINES), filtered)


def _text(screen: LogsScreen) -> Content:
    shown = screen.query_one("#logs-text", Static).render()
    assert isinstance(shown, Content)
    return shown


def _lit(screen: LogsScreen) -> list[str]:
    """The pieces of the log text shown on a background colour: the search's highlights."""
    t = _text(screen)
    return [t.plain[s.start:s.end] for s in t.spans
            if not isinstance(s.style, str) and getattr(s.style, "background", None) is not None]


def _line_in_view(screen: LogsScreen, needle: str) -> bool:
    body = screen.query_one("#logs-body", VerticalScroll)
    line = next(i for i, s in enumerate(_text(screen).plain.split("\n")) if needle in s)
    return body.scroll_y <= line < body.scroll_y + body.size.height


async def test_search_highlights_and_jumps_and_esc_clears_it_first() -> None:
    app = make_app()
    async with app.run_test(size=(100, 20)) as pilot:
        screen = LogsScreen(Logs(), "ns", "pod-1")  # type: ignore[arg-type]
        await app.push_screen(screen)
        await until(pilot, lambda: screen.logs is not None)
        await pilot.press("slash")
        box = screen.query_one("#logs-search", Input)
        await until(pilot, lambda: box.has_focus)
        await pilot.press(*"needle")
        await until(pilot, lambda: len(_lit(screen)) == 2)
        assert [s.lower() for s in _lit(screen)] == ["needle", "needle"]  # case-insensitive
        await pilot.press("enter")  # the first match, and the keys go back to the screen
        await until(pilot, lambda: screen.current == 0 and not box.has_focus)
        assert _line_in_view(screen, "needle one")
        assert "1 of 2" in str(screen.query_one("#logs-title", Static).render())
        await pilot.press("n")
        await until(pilot, lambda: screen.current == 1)
        await until(pilot, lambda: _line_in_view(screen, "NEEDLE two"))
        assert not _line_in_view(screen, "needle one")
        await pilot.press("N")
        await until(pilot, lambda: screen.current == 0 and _line_in_view(screen, "needle one"))
        await pilot.press("N")  # wraps round
        await until(pilot, lambda: screen.current == 1)
        await pilot.press("enter")  # enter is next too
        await until(pilot, lambda: screen.current == 0)
        # esc clears the search first; a second esc goes back
        await pilot.press("escape")
        await until(pilot, lambda: _lit(screen) == [] and not box.display)
        assert app.screen is screen
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is not screen)


async def test_no_match_says_so() -> None:
    app = make_app()
    async with app.run_test(size=(100, 20)) as pilot:
        screen = LogsScreen(Logs(), "ns", "pod-1")  # type: ignore[arg-type]
        await app.push_screen(screen)
        await until(pilot, lambda: screen.logs is not None)
        await pilot.press("slash", *"[red]zz", "enter")
        await until(pilot, lambda: "no match" in str(screen.query_one("#logs-title", Static).render()))
        assert _lit(screen) == [] and screen.current is None


async def test_wrap_toggle() -> None:
    app = make_app()
    async with app.run_test(size=(100, 20)) as pilot:
        screen = LogsScreen(Logs(), "ns", "pod-1")  # type: ignore[arg-type]
        await app.push_screen(screen)
        await until(pilot, lambda: screen.logs is not None)
        body = screen.query_one("#logs-text", Static)
        await until(pilot, lambda: body.size.height > len(LINES))  # the long line wraps
        await pilot.press("w")
        await until(pilot, lambda: body.size.height == len(LINES))  # one row per line
        assert LONG in _text(screen).plain.split("\n")
        assert "wrap off" in str(screen.query_one("#logs-title", Static).render())
        await pilot.press("w")
        await until(pilot, lambda: body.size.height > len(LINES))

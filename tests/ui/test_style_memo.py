"""Each opening builds its screen anew, and Textual matched every stylesheet rule against each
widget's path again (a quarter of an opening); the rules a widget gets are remembered by its
place (widgets/style_memo.py): an opening after the first matches none, and each widget,
its component classes included, gets the styles Textual itself gives it."""

from __future__ import annotations

from textual.css import match as css_match
from textual.css.stylesheet import Stylesheet

from tests.ui.conftest import prime
from tests.ui.test_screen_open import _app_with_cluster, _until
from tui.screens.detail import DetailScreen
from tui.screens.help import HelpScreen
from tui.screens.triage import TriageScreen


def _styles(screen) -> list[tuple[str, str, str]]:
    """Each node's place, the stylesheet's rules on it and on its component classes."""
    out = []
    for node in screen.walk_children(with_self=True):
        place = " > ".join(f"{type(n).__name__}#{n.id}.{'.'.join(sorted(n.classes))}" for n in node.css_path_nodes)
        comps = {k: sorted(v.get_rules().items(), key=str) for k, v in node._component_styles.items()}
        out.append((place, repr(sorted(node.styles.base.get_rules().items(), key=str)), repr(sorted(comps.items()))))
    return out


async def _open_each(app, pilot) -> list[tuple[str, list]]:
    """(screen, its styles once opened and settled) for the detail, triage, help and edit form."""
    from tui.screens.edit_args import EditArgsScreen

    from widgets.fleet_table import FleetTable

    fleet_screen = app.screen
    table = fleet_screen.query_one(FleetTable)
    table.move_cursor(row=table._order.index("llama-8b-7d9f-abcde"), animate=False)  # in kv-pressure: plots
    await pilot.pause()
    out = []
    for key, ready in (("enter", lambda s: isinstance(s, DetailScreen) and bool(s._pts)),
                       ("t", lambda s: isinstance(s, TriageScreen)),
                       ("question_mark", lambda s: isinstance(s, HelpScreen))):
        await pilot.press(key)
        await _until(pilot, lambda ready=ready: ready(app.screen))
        for _ in range(3):
            await pilot.pause()
        out.append((key, _styles(app.screen)))
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is fleet_screen)
    form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
    await app.push_screen(form)
    await _until(pilot, lambda: form.cmd is not None and form.content_shown() and form.focused is not None)
    for _ in range(3):
        await pilot.pause()
    out.append(("edit", _styles(form)))
    app.pop_screen()
    await _until(pilot, lambda: app.screen is fleet_screen)
    return out


async def test_a_screen_opened_again_matches_no_rule_and_is_styled_as_textual_styles_it(monkeypatch):
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        first = await _open_each(app, pilot)
        # once every screen's widget classes are known (a new one's CSS is a new stylesheet: the
        # memo starts afresh), an opening matches nothing
        assert await _open_each(app, pilot) == first
        checks: list[object] = []
        check = css_match._check_selectors

        def counting(selectors, nodes):
            checks.append(nodes[1] if len(nodes) > 1 else nodes[0])  # the node's screen
            return check(selectors, nodes)

        monkeypatch.setattr("textual.css.stylesheet._check_selectors", counting)
        again = await _open_each(app, pilot)
        monkeypatch.undo()
        assert again == first
        # the second time, no rule is matched for the widgets the screens build (the fleet
        # screen, restyled when uncovered, is not one of them)
        built = [type(s).__name__ for s in checks if s is not app.screen_stack[0]]
        assert not built, (len(built), sorted(set(built)))

    plain = _app_with_cluster()  # the same screens styled by Textual alone
    monkeypatch.setattr(plain.stylesheet, "apply", Stylesheet.apply.__get__(plain.stylesheet))
    monkeypatch.setattr(plain.stylesheet, "replace_rules", Stylesheet.replace_rules)
    async with plain.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        reference = await _open_each(plain, pilot)
    assert first == reference

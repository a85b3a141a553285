"""One action registry (tui/actions.py) drives the bindings, the help, remapping and the command
palette: every action has a binding and a help line, and the palette offers kvwatch's actions
where they may be used (drain on the fleet screen; not when read-only)."""

from __future__ import annotations

import importlib
import pkgutil

from textual.command import CommandInput, CommandPalette
from textual.screen import Screen
from textual.widgets import OptionList

from tests.integration.kube_env import Env, env  # noqa: F401 - fixture
from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import kube_app, until
from tests.ui.test_mitigation_keys import ready
from tui.actions import ACTIONS, actions_for, default_keys, scope_of_class
import tui.screens
from tui.app import KvwatchApp
from tui.bindings import binding_ids
from tui.screens.confirm import ConfirmScreen
from tui.screens.fleet import FleetScreen
from tui.screens.help import HelpScreen


def test_every_action_is_declared_once_per_scope_and_bound_where_it_applies() -> None:
    seen = [(s, a.id) for a in ACTIONS for s in a.scopes]
    assert len(seen) == len(set(seen)), "an action id declared twice for one screen"
    assert binding_ids() == default_keys() and binding_ids()["drain"] == "ctrl+d"
    for mod in pkgutil.iter_modules(tui.screens.__path__):  # load every screen class
        importlib.import_module(f"tui.screens.{mod.name}")

    bound = {("app", b.id) for b in KvwatchApp.BINDINGS}
    todo = [Screen]
    while todo:
        for cls in todo.pop().__subclasses__():
            todo.append(cls)
            if cls.__module__.startswith("tui."):
                bound |= {(scope_of_class(cls), b.id) for b in cls.__dict__.get("BINDINGS", ())}
    assert set(seen) <= bound, sorted(set(seen) - bound)


async def test_every_fleet_and_app_action_has_a_help_line() -> None:
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        await pilot.press("question_mark")
        help_ = await until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen)
        listed = {desc for _, desc, _ in help_.rows} | {what for _, what, _ in help_.hidden}
        hidden_keys = {k for key, _, _ in help_.hidden for k in key.split(",")}
        fleet = app.screen_stack[-2]
        for a in actions_for("fleet") + actions_for("app"):
            node = fleet if "fleet" in a.scopes else app
            name = a.action.split("(")[0]
            if node.check_action(name, ()) is False:
                # not usable here (no cluster, replay keys in a live session): the help says why
                assert a.key in hidden_keys or a.id.startswith("replay_"), a.id
                continue
            assert a.description in listed, a.id


async def palette_items(pilot, query: str) -> list[str]:
    await pilot.press("ctrl+p")
    palette = await until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette) and pilot.app.screen)
    await pilot.press(*query)
    options = palette.query_one(OptionList)

    def searched() -> bool:
        """The palette's search for the whole query has finished: its results are all listed."""
        gathering = [w for w in pilot.app.workers
                     if w.group == CommandPalette._GATHER_COMMANDS_GROUP and not w.is_finished]
        return palette.query_one(CommandInput).value == query and not gathering and palette.has_class("-ready")

    await until(pilot, searched)
    await pilot.pause()
    await until(pilot, searched)  # still so once the last key's search had its turn
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_palette_offers_drain_on_the_fleet_screen_and_runs_it(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        assert isinstance(app.screen, FleetScreen)
        items = await palette_items(pilot, "drain")
        assert any("Drain (ctrl+d)" in i for i in items), items
        await pilot.press("enter")  # runs the fleet screen's drain: its confirm dialog opens
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert dialog.plan.action == "drain"
        await pilot.press("escape")
        assert env.writes() == []


async def test_palette_hides_mutating_actions_when_read_only(env: Env) -> None:
    app, src = kube_app(env, readonly=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, env, src)
        items = await palette_items(pilot, "drain")
        assert not any("Drain" in i for i in items), items
        await pilot.press("escape")
        items = await palette_items(pilot, "logs")
        assert any("Logs (l)" in i for i in items), items


def test_the_registry_marks_as_mutating_exactly_the_keys_the_gate_hides_when_read_only() -> None:
    from tui.core.cluster.base import MUTATING_ACTIONS
    from tui.gate import NEEDS

    for a in actions_for("fleet"):
        if a.id in NEEDS:
            assert a.mutates == (NEEDS[a.id] in MUTATING_ACTIONS), a.id

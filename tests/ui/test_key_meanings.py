"""One meaning per key: a key the app binds on every screen (quit, help, pause, screenshot...)
keeps its meaning on every screen, unless the screen's binding is declared to refine it (the
same intent for that screen, e.g. ctrl+r reloads what the screen shows) and its footer shows it.
A config remap onto a key another action already uses is an error, not a silent clash."""

from __future__ import annotations

import importlib
import pkgutil

from textual.screen import Screen

import tui.screens
from tests.ui.conftest import make_app, prime
from tui.actions import ACTIONS, APP, remap_problems, scope_of_class
from tui.app import KvwatchApp
from tui.core.config import Config


def _keys(binding) -> set[str]:
    return {k.strip() for k in binding.key.split(",")}


def _screen_classes() -> list[type[Screen]]:
    for mod in pkgutil.iter_modules(tui.screens.__path__):
        importlib.import_module(f"tui.screens.{mod.name}")
    out, todo = [], [Screen]
    while todo:
        for cls in todo.pop().__subclasses__():
            todo.append(cls)
            if cls.__module__.startswith("tui.") and cls.__dict__.get("BINDINGS"):
                out.append(cls)
    return out


def test_no_screen_rebinds_an_app_key_to_another_meaning() -> None:
    by_id = {(a.id, s): a for a in ACTIONS for s in a.scopes}
    app_keys = {k: b for b in KvwatchApp.BINDINGS for k in _keys(b)}
    bad = []
    classes = _screen_classes()
    assert len(classes) >= 10  # every screen was walked
    for cls in classes:
        scope = scope_of_class(cls)
        for b in cls.__dict__["BINDINGS"]:
            for k in _keys(b) & set(app_keys):
                glob = app_keys[k]
                if b.action == glob.action:
                    continue
                entry = by_id[(b.id, scope)]
                if glob.id not in entry.refines or not b.show:
                    bad.append(f"{scope}: {k} is {b.description!r} here but {glob.description!r} everywhere else")
    assert bad == []


def test_screenshot_and_pause_have_one_meaning() -> None:
    for a in ACTIONS:
        if APP in a.scopes:
            continue
        keys = {k.strip() for k in a.key.split(",")}
        assert "ctrl+s" not in keys and "p" not in keys, a


def test_a_remap_onto_a_key_in_use_is_an_error() -> None:
    assert remap_problems({}) == []
    assert remap_problems({"screenshot": "f12"}) == []
    # pause -> f: the triage screen's "fetch logs/events" is f
    problems = remap_problems({"pause": "f"})
    assert len(problems) == 1 and problems[0][0] == "pause" and "triage" in problems[0][1], problems
    # two remaps onto the same key on the fleet screen
    assert [p[0] for p in remap_problems({"sort_kv": "x", "sort_name": "x"})] == ["sort_kv", "sort_name"]
    # a key Textual keeps for itself
    assert remap_problems({"help": "ctrl+p"})[0][0] == "help"
    # moving a key away frees it: drain's ctrl+d given to logs once drain moved
    assert remap_problems({"drain": "ctrl+x", "logs": "ctrl+d"}) == []


async def test_a_clashing_remap_is_reported_and_not_applied() -> None:
    app = make_app(config=Config(keys={"pause": "f", "screenshot": "f12"}))
    async with app.run_test(size=(100, 30)) as pilot:
        await prime(pilot, 1)
        assert any("keys.pause" in n and "triage" in n for n in app.notices), app.notices
        active = app.active_bindings
        assert active["p"].binding.id == "pause" and "f" not in active  # not remapped
        assert active["f12"].binding.id == "screenshot" and "ctrl+s" not in active  # remapped

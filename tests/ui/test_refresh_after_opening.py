"""A refresh does not start while a screen is being opened: the refresh's work (parsing,
diagnosis, the new state drawn on the screen being opened) ran inside an opening every few
openings, the slow tail of opening a screen. It starts once the screen has shown its content
(its first frame with it), or after HOLD_MAX_S."""

from __future__ import annotations

import asyncio

import tui.app
from tests.ui.conftest import make_app, prime
from tests.ui.kube_app import until
from tests.ui.test_screen_open import _app_with_cluster
from tui.screens.edit_args import EditArgsScreen


async def test_a_refresh_waits_for_the_screen_being_opened_to_show_its_content(monkeypatch):
    monkeypatch.setattr(tui.app, "HOLD_MAX_S", 120.0)  # the opening ends with its frame, not the cap
    app = _app_with_cluster()
    app.interval = 0.05
    gate = asyncio.Event()
    read = app.cluster.get_deployment

    async def slow(*a, **kw):  # the form's content waits for the test
        await gate.wait()
        return await read(*a, **kw)

    app.cluster.get_deployment = slow
    form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
    started: list[bool] = []  # each refresh: whether the form was still without its content
    refresh = app.refresh_once

    async def recording() -> None:
        started.append(app.screen is form and not form.content_shown())
        await refresh()

    app.refresh_once = recording
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 2)
        app.poll_loop()
        await until(pilot, lambda: len(started) >= 2)  # polling
        await app.push_screen(form)
        await until(pilot, lambda: any(started) or getattr(app, "refresh_waiting", False),
                    what=lambda: f"{len(started)} refreshes")
        assert not any(started), started
        before = len(started)
        gate.set()
        await until(pilot, lambda: form.content_shown() and len(started) > before)  # refreshes go on
        assert not any(started), started


async def test_a_refresh_after_a_key_that_draws_nothing_is_not_held_back(monkeypatch):
    """Any key holds the collector until the next frame, but only an opening holds a refresh."""
    monkeypatch.setattr(tui.app, "HOLD_MAX_S", 120.0)
    app = make_app()
    app.interval = 0.05
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 2)
        app.poll_loop()
        app._hold_collector()  # as a key does
        before = app.refreshes
        await until(pilot, lambda: app.refreshes > before + 2)
        assert not app.refresh_waiting

"""Opening a screen: its footer's keys are in its first frame, and the footer is rebuilt only
when what it shows changes (each rebuild of Textual's footer is ~40 ms on a loaded machine, and
one screen open signalled it up to four times)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from textual.widgets._footer import FooterKey

from tests.ui.conftest import make_app, prime
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.sim import SimCluster
from tui.core.sim.fleet import SimFleet
from tui.screens.detail import DetailScreen
from tui.screens.triage import TriageScreen


def _app_with_cluster():
    app = make_app()
    fleet = SimFleet("long-prompts", replicas=2, seed=3, start_time=1.75e9)
    app.cluster = SimCluster(fleet, audit=AuditLog(Path(tempfile.mkdtemp()) / "audit.jsonl"), load_delay_s=60)
    return app


def _first_frames(app) -> list[tuple[object, list[str]]]:
    """(screen, footer keys) of every frame handed to the terminal from now on."""
    frames: list[tuple[object, list[str]]] = []
    display = app._display

    def recording(screen, renderable) -> None:
        display(screen, renderable)
        if renderable is not None:
            frames.append((screen, [k.key for k in screen.query(FooterKey)]))

    app._display = recording
    return frames


async def _until(pilot, ok) -> None:
    for _ in range(200):
        if ok():
            return
        await pilot.pause()
    raise AssertionError("never reached")


async def test_a_screen_opens_with_its_footer_keys_in_its_first_frame():
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        frames = _first_frames(app)
        for key, cls in (("t", TriageScreen), ("enter", DetailScreen)):
            frames.clear()
            await pilot.press(key)
            await _until(pilot, lambda cls=cls: any(isinstance(s, cls) for s, _ in frames))
            first = next(keys for s, keys in frames if isinstance(s, cls))
            assert "q" in first and "question_mark" in first, (cls.__name__, first)
            await pilot.press("escape")
            await _until(pilot, lambda cls=cls: not isinstance(app.screen, cls))


async def test_the_footer_is_rebuilt_only_when_its_keys_change():
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        await pilot.press("t")
        await _until(pilot, lambda: isinstance(app.screen, TriageScreen) and app.screen.query(FooterKey))
        await pilot.pause()
        before = list(app.screen.query(FooterKey))
        app.refresh_bindings()  # "the bindings may have changed": they did not
        await pilot.pause()
        await pilot.pause()
        assert list(app.screen.query(FooterKey)) == before  # the same widgets: not rebuilt
        shown = {k.key for k in before}
        app.readonly = True  # the mitigation keys go: the footer must follow
        app.refresh_bindings()
        await _until(pilot, lambda: {k.key for k in app.screen.query(FooterKey)} != shown)
        assert {k.key for k in app.screen.query(FooterKey)} < shown


async def test_the_edit_form_gives_focus_straight_to_its_first_field():
    """Focus moving into or out of the fields' scroll container restyles every widget in it
    (~60) and repaints the form: the form opens with focus on its first field, never first on
    the container."""
    from textual.containers import VerticalScroll

    from tui.screens.edit_args import EditArgsScreen

    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        focused: list[object] = []
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
        set_focus = form.set_focus

        def recording(widget, *a, **kw):
            focused.append(widget)
            return set_focus(widget, *a, **kw)

        form.set_focus = recording  # every widget given focus, auto-focus included
        await app.push_screen(form)
        await _until(pilot, lambda: form.cmd is not None or form.load_error is not None)
        await pilot.pause()
        assert form.load_error is None
        assert form.focused is form.query_one("#f-max-num-seqs"), form.focused
        assert not any(isinstance(w, VerticalScroll) for w in focused), focused


async def test_an_edit_form_that_cannot_read_its_deployment_says_why_and_keeps_keys_working():
    from tui.screens.edit_args import EditArgsScreen

    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "no-such-deployment")
        await app.push_screen(form)
        await _until(pilot, lambda: form.load_error is not None)
        await pilot.pause()
        assert form.focused is form.query_one("#edit-fields")  # the keys scroll the form
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is not form)


async def test_a_narrow_footer_is_built_narrow_once():
    """At 80 columns the footer is compact and without the palette key from its first frame:
    switching after mount rebuilt it, and restyled every key."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 3)
        seen: list[list[FooterKey]] = []
        display = app._display

        def recording(screen, renderable) -> None:
            display(screen, renderable)
            if renderable is not None and isinstance(screen, TriageScreen):
                seen.append(list(screen.query(FooterKey)))

        app._display = recording
        await pilot.press("t")
        await _until(pilot, lambda: len(seen) >= 1)
        for _ in range(5):
            await pilot.pause()
        settled = list(app.screen.query(FooterKey))
        assert seen[0] == settled  # the same widgets as in the first frame: never rebuilt
        assert not any(k.has_class("-command-palette") for k in settled)
        assert all(k.compact for k in settled)


async def test_opening_the_detail_draws_its_plots_once(monkeypatch):
    """The first layout after opening is a resize: redrawing the series there rebuilt all six
    plots a second time (~40 ms on a loaded machine), just after (or before) the first frame."""
    draws: list[object] = []
    draw = DetailScreen._draw

    def counting(self, *a) -> None:
        draws.append(self)
        draw(self, *a)

    monkeypatch.setattr(DetailScreen, "_draw", counting)
    resized: list[object] = []
    on_resize = DetailScreen.on_resize

    def seen_resize(self) -> None:
        resized.append(self)
        on_resize(self)

    monkeypatch.setattr(DetailScreen, "on_resize", seen_resize)
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        await app.push_screen(DetailScreen("llama-8b-7d9f-abcde"))  # in kv-pressure: with plots
        await _until(pilot, lambda: isinstance(app.screen, DetailScreen) and resized)
        await pilot.pause()
        assert app.screen._pts and not app.screen.has_class("-numbers")  # plots, as drawn on opening
        assert len(draws) == 1, draws

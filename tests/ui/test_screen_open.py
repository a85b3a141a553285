"""Opening a screen: its footer's keys are in its first frame, drawn by one widget (Textual's
footer was a widget per key, each composed, styled, laid out and painted on every opening), and
repainted only when what it shows changes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from widgets.footer import footer_keys

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
            frames.append((screen, [k.key for k in footer_keys(screen)]))

    app._display = recording
    return frames


async def _until(pilot, ok, limit: int = 300) -> None:
    for _ in range(limit):
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


async def test_the_footer_is_one_widget_repainted_only_when_its_keys_change():
    from widgets.footer import KvFooter

    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        await pilot.press("t")
        await _until(pilot, lambda: isinstance(app.screen, TriageScreen) and footer_keys(app.screen))
        await pilot.pause()
        footer = app.screen.query_one(KvFooter)
        assert not footer.children  # the keys are its text, not widgets of their own
        painted: list[object] = []
        refresh = footer.refresh

        def counting(*a, **kw):
            painted.append(a)
            return refresh(*a, **kw)

        footer.refresh = counting
        app.refresh_bindings()  # "the bindings may have changed": they did not
        await pilot.pause()
        await pilot.pause()
        assert painted == []
        before = footer_keys(app.screen)
        app.readonly = True  # the mitigation keys go: the footer must follow
        app.refresh_bindings()
        shown = {k.key for k in before}
        await _until(pilot, lambda: {k.key for k in footer_keys(app.screen)} != shown)
        assert {k.key for k in footer_keys(app.screen)} < shown
        gone = [k.description for k in before if k.key not in {k.key for k in footer_keys(app.screen)}]
        assert gone

        def line() -> str:
            return app.screen._compositor.render_strips()[footer.region.y].text

        await _until(pilot, lambda: not any(d in line() for d in gone))  # and draws it
        assert "Help" in line(), line()


async def test_a_click_on_a_footer_key_presses_it():
    from tui.screens.help import HelpScreen

    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        help_key = next(k for k in footer_keys(app.screen) if k.key == "question_mark")
        await pilot.click(offset=(help_key.region.x + 1, help_key.region.y))
        await _until(pilot, lambda: isinstance(app.screen, HelpScreen))


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


async def test_a_narrow_footer_is_compact_without_the_palette_key():
    """At 80 columns the keys close up (one blank between them) and the docked "^p palette"
    is left out, from the first frame."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 3)
        seen: list[list] = []
        display = app._display

        def recording(screen, renderable) -> None:
            display(screen, renderable)
            if renderable is not None and isinstance(screen, TriageScreen):
                seen.append(footer_keys(screen))

        app._display = recording
        await pilot.press("t")
        await _until(pilot, lambda: len(seen) >= 1)
        first = seen[0]
        assert first and not any(k.palette for k in first)
        assert all(k.compact for k in first)
        assert [k.key for k in first[:2]] == ["question_mark", "q"]
        line = app.screen._compositor.render_strips()[-1].text
        assert line.startswith("? Help q Quit "), line


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


async def _form_open_counts(app, pilot, form) -> tuple[int, int]:
    """(widgets in the form, style passes over its widgets) up to its first frame with the
    Deployment's values."""
    return await _open_counts(app, pilot, form, lambda: form.cmd is not None)


async def _open_counts(app, pilot, form, shown) -> tuple[int, int]:
    """(widgets in the screen `form`, style passes over its widgets) up to its first frame
    once `shown()`."""
    from textual.css.stylesheet import Stylesheet
    from textual.widget import Widget

    applied: list[object] = []
    form_nodes: set[object] = set()
    apply = Stylesheet.apply

    def counting(self, node, *a, **kw):
        if isinstance(node, Widget):
            applied.append(node)
        return apply(self, node, *a, **kw)

    frames: list[bool] = []
    display = app._display

    def recording(screen, renderable) -> None:
        display(screen, renderable)
        if renderable is not None and screen is form:
            frames.append(shown())

    app._display = recording
    Stylesheet.apply = counting
    try:
        await app.push_screen(form)
        await _until(pilot, lambda: any(frames))
    finally:
        Stylesheet.apply = apply
        app._display = display
    form_nodes.update(form.walk_children())  # the nodes styled, counted once known
    return len(form_nodes), sum(1 for n in applied if n is form or n in form_nodes)


async def test_the_edit_form_builds_and_styles_few_widgets():
    """The form was ~80 widgets, most of them restyled two or three times while opening (for
    `compact`, `disabled`, the first value): 250 style passes, a third of opening it."""
    from tui.screens.edit_args import EditArgsScreen

    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
        widgets, passes = await _form_open_counts(app, pilot, form)
        assert widgets <= 40, widgets
        assert passes <= widgets + 10, (widgets, passes)


async def test_the_detail_styles_its_widgets_once_on_opening():
    """Textual restyles a screen's whole tree when it is resumed; the first resume follows the
    push at once, when every widget was styled as it was mounted: each was styled twice."""
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 4)
        detail = DetailScreen("llama-8b-7d9f-abcde")  # in kv-pressure: with plots
        widgets, passes = await _open_counts(app, pilot, detail, lambda: bool(detail._pts))
        await pilot.pause()
        assert widgets >= 9, widgets
        assert passes <= widgets + 3, (widgets, passes)


async def test_the_edit_form_starts_a_cursor_blink_only_for_the_field_with_focus():
    """Each Input starts a timer (a task) for its cursor's blink when mounted. A field's timer
    starts when it is first focused, and its cursor blinks as an Input's does (the timer running
    while it has the focus)."""
    from widgets.quiet import FormInput

    from tui.screens.edit_args import EditArgsScreen

    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
        await app.push_screen(form)
        await _until(pilot, lambda: form.cmd is not None and form.focused is not None)
        await pilot.pause()
        first = form.query_one("#f-max-num-seqs", FormInput)
        assert form.focused is first
        assert [f for f in form.query(FormInput) if f._blink_timer is not None] == [first]
        assert first._blink_timer._active.is_set()  # blinking
        await pilot.press("tab")
        await _until(pilot, lambda: form.focused is not first)
        second = form.focused
        assert isinstance(second, FormInput)
        await _until(pilot, lambda: second._blink_timer is not None and second._blink_timer._active.is_set())
        await _until(pilot, lambda: not first._blink_timer._active.is_set())  # paused on blur
        assert [f for f in form.query(FormInput) if f._blink_timer is not None] == [first, second]


def row_cells(app, widget, start: int, end: int) -> list[tuple[str, str]]:
    """Columns [start, end) of a widget's first line as the terminal gets them: (character,
    style) per cell, the style without Textual's mouse metadata."""
    x = widget.region.x
    strip = app.screen._compositor.render_strips()[widget.region.y].crop(x + start, x + end)
    return [(ch, str(seg.style.clear_meta_and_links() if seg.style else "")) for seg in strip for ch in seg.text]


def _label_style(app, row) -> str:
    """The style of a row's flag, as drawn."""
    return row_cells(app, row, 2, 3)[0][1]


async def test_an_edit_form_still_reading_shows_its_fields_disabled_then_fills_them():
    import asyncio

    from textual.widgets import Input

    from tui.screens.edit_args import EditArgsScreen

    app = _app_with_cluster()
    gate = asyncio.Event()
    read = app.cluster.get_deployment

    async def slow(*a, **kw):
        await gate.wait()
        return await read(*a, **kw)

    app.cluster.get_deployment = slow
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
        await app.push_screen(form)
        await _until(pilot, lambda: app.screen is form and form._resumed)
        rows = list(form.query("#edit-fields FieldRow"))
        assert len(rows) >= 9 and all(r.disabled for r in rows)
        await pilot.pause()
        label = _label_style(app, rows[3])
        await pilot.press("tab", "9")  # nothing takes the keys while reading
        assert form.focused is None or not isinstance(form.focused, Input)
        await pilot.click(rows[3], offset=(2, 0))  # nor a click on a field
        assert form.focused is None or not isinstance(form.focused, Input)
        assert not form.query(f"#{rows[3].id} Input")
        gate.set()
        await _until(pilot, lambda: form.cmd is not None)
        await pilot.pause()
        assert not any(r.disabled for r in rows)
        assert _label_style(app, rows[3]) != label  # drawn dimmed while reading
        assert form.focused is form.query_one("#f-max-num-seqs")


async def test_the_footer_key_under_the_mouse_is_highlighted():
    from widgets.footer import KvFooter

    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        footer = app.screen.query_one(KvFooter)
        quit_key = next(k for k in footer_keys(app.screen) if k.key == "q")

        def background_at(x: int):
            y = footer.region.y
            cells = 0
            for seg in app.screen._compositor.render_strips()[y]:
                if cells <= x < cells + len(seg.text):
                    return seg.style.bgcolor
                cells += len(seg.text)
            return None

        before = background_at(quit_key.region.x + 1)
        await pilot.hover(offset=(quit_key.region.x + 1, quit_key.region.y))
        await _until(pilot, lambda: background_at(quit_key.region.x + 1) != before)
        await pilot.hover(offset=(80, 10))  # away: back as it was
        await _until(pilot, lambda: background_at(quit_key.region.x + 1) == before)


async def test_opening_the_edit_form_validates_it_once(monkeypatch):
    """Filling the fields from the Deployment is one validation and diff of the form: each value
    set used to post Input.Changed, and each revalidated (and queried) the whole form again."""
    from tui.screens.edit_args import EditArgsScreen

    passes: list[object] = []
    revalidate = EditArgsScreen._revalidate

    def counting(self) -> None:
        passes.append(self)
        revalidate(self)

    monkeypatch.setattr(EditArgsScreen, "_revalidate", counting)
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 3)
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
        await app.push_screen(form)
        await _until(pilot, lambda: form.cmd is not None)
        for _ in range(3):
            await pilot.pause()
        assert [name for name, v in form.initial.items() if v], form.initial  # values were set
        assert passes == [form], len(passes)
        await pilot.press("1")  # typing still validates, at each change
        await _until(pilot, lambda: "--max-num-seqs" in form.diff)
        assert len(passes) > 1


def _drawn(screen) -> tuple[list[list[tuple[str, str]]], set[object]]:
    """The screen as painted (each cell's character and style) and the widgets drawn."""
    comp = screen._compositor
    lines = [[(ch, str(seg.style)) for seg in strip for ch in seg.text] for strip in comp.render_strips()]
    return lines, set(comp.visible_widgets)


async def _painted(size: tuple[int, int]) -> list[tuple[list, set[object]]]:
    """The edit form and the detail as painted at `size` (_drawn), each with its `-undrawn`
    containers."""
    from tui.screens.edit_args import EditArgsScreen

    out = []
    app = _app_with_cluster()
    async with app.run_test(size=size) as pilot:
        await prime(pilot, 4)
        form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
        await app.push_screen(form)
        await _until(pilot, lambda: form.cmd is not None and form.focused is not None)
        await pilot.pause()
        out.append((_drawn(form), set(form.query(".-undrawn"))))
        app.pop_screen()
        detail = DetailScreen("llama-8b-7d9f-abcde")  # in kv-pressure: with plots (or numbers)
        await app.push_screen(detail)
        await _until(pilot, lambda: app.screen is detail and bool(detail._pts))
        await pilot.pause()
        out.append((_drawn(detail), set(detail.query(".-undrawn"))))
    return out


async def test_the_edit_form_and_detail_look_the_same_without_painting_bare_containers(monkeypatch):
    """Textual paints each container's whole area blank before the widgets in it; the form's
    and the detail's layout containers draw nothing of their own, and are not painted: the
    same cells as when they were."""
    from widgets import undrawn as undrawn_mod

    for size in ((160, 45), (80, 24), (120, 30)):
        undrawn = await _painted(size)
        with monkeypatch.context() as m:  # the same screens with every container painted
            m.setattr(undrawn_mod, "leave_out", lambda screen: None)
            painted = await _painted(size)
        for ((cells, drawn), bare), ((want, _), _) in zip(undrawn, painted, strict=True):
            assert bare and not drawn & bare, (size, bare, drawn & bare)  # left out of the painting
            assert cells == want, size

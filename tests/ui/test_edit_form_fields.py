"""The engine-args form builds one Input when it opens (the focused field's): a field gets its
own the first time it is edited (Tab, Enter, up/down or a click reach it). Until then its row
draws the value (or the engine default) as an unfocused Input draws it, and keys typed after a
move land in the field moved to."""

from __future__ import annotations

from textual import events
from textual.widgets import Button, Input

from tests.ui.conftest import prime
from tests.ui.test_screen_open import _app_with_cluster, _until, row_cells
from tui.screens.edit_args import EditArgsScreen
from widgets.field_row import INPUT_W, FieldRow


async def _open(pilot, app) -> EditArgsScreen:
    await prime(pilot, 3)
    form = EditArgsScreen(app.cluster, app.cluster.fleet.namespace, "llama-8b")
    await app.push_screen(form)
    await _until(pilot, lambda: form.cmd is not None and form.focused is not None)
    await pilot.pause()
    return form


def _cell(form: EditArgsScreen, name: str) -> list[tuple[str, str]]:
    """The value cell of a field's row as the terminal gets it: (character, style) per cell."""
    row = form.query_one(f"#r-{name}", FieldRow)
    return row_cells(form.app, row, row.label_w, row.label_w + INPUT_W)


async def test_the_form_opens_with_one_input_the_focused_fields():
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        form = await _open(pilot, app)
        inputs = list(form.query("#edit-fields Input"))
        assert [i.id for i in inputs] == ["f-max-num-seqs"], [i.id for i in inputs]
        assert form.focused is inputs[0]
        # every field still shows its value or its default, where the Input would
        text = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert "--gpu-memory-utilization" in text and "0.92" in text and "default 16" in text, text


def _keys_at_once(app, *keys: str) -> None:
    """Keys as a terminal delivers typing: all read at once, each queued before the app has
    handled the one before it (Pilot.press waits for each)."""
    for key in keys:
        char = key if len(key) == 1 else None
        app.post_message(events.Key(key, char))


async def test_tab_enter_and_arrows_move_between_fields_and_typing_lands_in_the_field_moved_to():
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        form = await _open(pilot, app)
        _keys_at_once(app, "tab", "4", "0", "9", "6")
        await _until(pilot, lambda: form.value_of("max-num-batched-tokens") == "4096")
        assert form.focused is form.query_one("#f-max-num-batched-tokens", Input)
        assert form.value_of("max-num-seqs") == "64"
        _keys_at_once(app, "down", "0", ".", "8", "5")
        await _until(pilot, lambda: form.value_of("gpu-memory-utilization") == "0.85")
        _keys_at_once(app, "shift+tab", "shift+tab", "4", "8")
        await _until(pilot, lambda: form.value_of("max-num-seqs") == "48")
        _keys_at_once(app, "enter", "up", "enter", "enter")  # down one, back up, then down two
        await _until(pilot, lambda: form.focused is form.query_one("#f-gpu-memory-utilization", Input))
        assert form.value_of("max-num-batched-tokens") == "4096"
        assert {"max-num-seqs": "48", "max-num-batched-tokens": "4096", "gpu-memory-utilization": "0.85"} == \
            form.raw_changes()
        assert {"+- 48", "+- 4096", "+- 0.85"} <= set(form.diff.splitlines()), form.diff
        # the last field: Tab leaves the fields for the presets
        for _ in range(len(form.engine.editable)):
            await pilot.press("tab")
        await pilot.pause()
        assert not isinstance(form.focused, Input), form.focused


async def test_a_click_on_a_row_edits_its_field():
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        form = await _open(pilot, app)
        row = form.query_one("#r-block-size")
        await pilot.click(row, offset=(2, 0))  # on the flag's name
        await _until(pilot, lambda: isinstance(form.focused, Input) and form.focused.id == "f-block-size")
        await pilot.press("3", "2")
        await _until(pilot, lambda: form.value_of("block-size") == "32")


async def test_a_row_draws_its_value_as_the_input_draws_it_unfocused():
    app = _app_with_cluster()
    async with app.run_test(size=(160, 45)) as pilot:
        form = await _open(pilot, app)
        drawn_by_row = {n: _cell(form, n) for n in ("gpu-memory-utilization", "block-size")}
        for n in ("gpu-memory-utilization", "block-size"):
            form.edit_field(n)
            await pilot.pause()
        form.edit_field("max-num-seqs")  # both editors now there, unfocused
        await pilot.pause()
        await pilot.pause()
        for n, cells in drawn_by_row.items():
            assert _cell(form, n) == cells, n
        # a field in error: a row draws the error's colour as an Input does
        form.set_value("max-model-len", "0")  # no editor there
        form.edit_field("max-num-seqs")
        await pilot.pause()
        form.query_one("#f-max-num-seqs", Input).value = "0"
        form.edit_field("gpu-memory-utilization")  # both unfocused
        await _until(pilot, lambda: {"max-model-len", "max-num-seqs"} <= set(form.errors))
        await pilot.pause()
        assert not form.query("#f-max-model-len")
        assert _cell(form, "max-model-len") == _cell(form, "max-num-seqs")


async def test_a_field_moved_to_below_the_fold_is_scrolled_into_view():
    app = _app_with_cluster()
    async with app.run_test(size=(80, 24)) as pilot:  # narrow: the help under each field, the fields scroll
        form = await _open(pilot, app)
        fields = form.query_one("#edit-fields")
        last = form.engine.editable[-1]
        row = form.query_one(f"#r-{last}")
        assert not fields.region.contains_region(row.region), "the last field should start below the fold"
        _keys_at_once(app, *["down"] * (len(form.engine.editable) - 1))
        await _until(pilot, lambda: isinstance(form.focused, Input) and form.focused.id == f"f-{last}")
        await _until(pilot, lambda: fields.region.contains_region(row.region))
        text = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert f"--{last}" in text, text
        # past the last field: the presets under the fields, in view
        _keys_at_once(app, "tab")
        await _until(pilot, lambda: isinstance(form.focused, Button) and (form.focused.id or "").startswith("preset-"))
        button = form.focused
        await _until(pilot, lambda: fields.region.contains_region(button.region))


async def test_keys_typed_right_after_shift_tab_from_a_preset_move_from_the_field_it_reached():
    app = _app_with_cluster()
    async with app.run_test(size=(80, 24)) as pilot:
        form = await _open(pilot, app)
        names = list(form.engine.editable)
        _keys_at_once(app, *["down"] * (len(names) - 1), "tab")  # the last field, then the first preset
        await _until(pilot, lambda: isinstance(form.focused, Button))
        _keys_at_once(app, "shift+tab", "up", "up", "7")  # back to the last field, up two, typing
        await _until(pilot, lambda: form.value_of(names[-3]) == "7")
        assert form.focused is form.query_one(f"#f-{names[-3]}", Input)
        fields = form.query_one("#edit-fields")
        row = form.query_one(f"#r-{names[-3]}")
        await _until(pilot, lambda: fields.region.contains_region(row.region))

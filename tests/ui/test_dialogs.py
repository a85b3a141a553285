"""Dialogs as a user at the keyboard meets them: the confirm dialog says its keys, `?` opens the
help over it, Enter or `y` confirms without Tab, and at 80x24 the preflight and the patch below
the fold scroll into view with PageDown / Down."""

from __future__ import annotations

from textual.widgets import Static

from tests.ui.test_80x24 import demo_like_app
from tests.ui.test_mitigation_snapshots import DEP, sim, wait
from tui.core.cluster.base import EditArgsRequest
from tui.screens.confirm import ConfirmScreen
from tui.screens.help import HelpScreen
from tui.screens.prompt import scale_prompt

SIZE = (80, 24)


async def _open(pilot, cluster, fleet) -> tuple[ConfirmScreen, list]:
    plan = await cluster.plan_edit_args(EditArgsRequest(fleet.namespace, DEP, {}, preset="seqs-50"))
    results: list = []
    dialog = ConfirmScreen(plan)
    await pilot.app.push_screen(dialog, results.append)
    await pilot.pause()
    return dialog, results


async def test_confirm_dialog_shows_its_keys_and_help_opens_over_it(tmp_path):
    fleet, cluster = sim(tmp_path)
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog, _ = await _open(pilot, cluster, fleet)
        hint = str(dialog.query_one("#confirm-keys", Static).render())
        for word in ("enter", "y", "esc", "?"):
            assert word in hint, hint
        assert dialog.query_one("#confirm-keys").region.bottom <= SIZE[1]  # on screen at 80x24
        await pilot.press("question_mark")
        await wait(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert any("Confirm" in what for _k, what, _w in app.screen.rows), app.screen.rows
        await pilot.press("escape")
        await wait(pilot, lambda: app.screen is dialog)


async def test_enter_confirms_without_tab(tmp_path):
    fleet, cluster = sim(tmp_path)
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _dialog, results = await _open(pilot, cluster, fleet)
        await pilot.press("enter")
        await wait(pilot, lambda: results)
        assert results == [True]


async def test_y_confirms_and_esc_cancels(tmp_path):
    fleet, cluster = sim(tmp_path)
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        _dialog, results = await _open(pilot, cluster, fleet)
        await pilot.press("y")
        await wait(pilot, lambda: results)
        _dialog, results2 = await _open(pilot, cluster, fleet)
        await pilot.press("escape")
        await wait(pilot, lambda: results2)
        assert (results, results2) == ([True], [False])


async def test_body_scrolls_with_pagedown_and_down_at_80x24(tmp_path):
    fleet, cluster = sim(tmp_path)
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog, _ = await _open(pilot, cluster, fleet)
        body = dialog.query_one("#confirm-body")
        assert body.max_scroll_y > 0  # the preflight and the patch are below the fold
        await pilot.press("pagedown")
        await wait(pilot, lambda: body.scroll_y > 0)
        before = body.scroll_y
        await pilot.press("up")
        await wait(pilot, lambda: body.scroll_y < before)


async def test_scale_prompt_says_enter_and_esc():
    screen = scale_prompt("deployment/llama-8b -n inference", 4, 12)
    from tests.ui.conftest import make_app

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(screen)
        await pilot.pause()
        text = " ".join(str(s.render()) for s in screen.query(Static))
        assert "enter" in text and "esc" in text, text


async def test_the_capacity_warning_is_said_once_in_the_confirm_dialog(tmp_path):
    # The demo's plan carried the fit warning twice in its warnings, and the dialog said it again
    # under the preflight: three copies of one line, pushing the patch below the fold.
    fleet, cluster = sim(tmp_path)
    plan = await cluster.plan_edit_args(EditArgsRequest(fleet.namespace, DEP, {"max-num-seqs": "32"},
                                                        fits_max_num_seqs=16, fits_why="capacity plan"))
    fit = [w for w in plan.warnings if "that fits this replica" in w]
    assert len(fit) == 1, plan.warnings
    assert plan.preflight is not None and plan.preflight.status == "warn", plan.preflight
    app = demo_like_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        dialog = ConfirmScreen(plan)
        await pilot.app.push_screen(dialog)
        await wait(pilot, lambda: bool(dialog.query("#confirm-preflight")))
        text = "\n".join(str(s.render()) for s in dialog.query(Static))
        assert text.count("that fits this replica") == 1, text
        assert "preflight: WARN" in text


async def test_the_scale_prompt_shows_its_label_and_suggestion_whole_at_80_and_120_columns():
    # The one-line prompt cut its title at 60% of the width: at 120 columns it read "(now 4,
    # kvwatch suggests 13:  13", its "replicas:" label and closing parenthesis gone.
    from tests.ui.conftest import make_app

    for size in ((80, 24), (120, 30)):
        screen = scale_prompt("deployment/llama-8b -n inference", 4, 13)
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await app.push_screen(screen)
            await wait(pilot, lambda s=screen: bool(s.query("#prompt-input")))
            for sid in ("#prompt-input", "#prompt-keys"):
                assert screen.query_one(sid).region.right <= size[0], (size, sid)
            shown = app.export_screenshot().replace("&#160;", " ")
            assert "replicas:" in shown and "now 4" in shown and "suggests 13" in shown, size
            if size[0] >= 120:
                assert "kvwatch suggests 13 (pre-filled" in shown, shown

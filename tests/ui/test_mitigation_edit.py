"""Pilot tests of the edit-args form over the Kubernetes emulator (official client, real HTTP):
inline validation, presets, the live diff, confirm/cancel, the exact patch, the rollout view,
and a concurrent change that must be refused without losing the other writer's change."""

from __future__ import annotations

import json

from textual.widgets import Button, Static

from widgets.field_row import FieldRow

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.ui.kube_app import Pages, kube_app, notes, select, start, until
from tui.screens.confirm import ConfirmScreen
from tui.screens.edit_args import EditArgsScreen
from tui.screens.rollout import RolloutScreen

DEP_PATH = f"/apis/apps/v1/namespaces/{NS}/deployments/llama"


def changed_lines(diff: str) -> list[str]:
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]


async def open_form(pilot, env: Env, src) -> EditArgsScreen:
    pages = Pages(env)
    pods = [p["metadata"]["name"] for p in env.pods()]
    for p in pods:
        pages.set(p, 40, 12)
    await start(pilot, src)
    select(pilot, pods[0])
    await pilot.press("e")
    return await until(pilot, lambda: isinstance(pilot.app.screen, EditArgsScreen) and pilot.app.screen.cmd is not None
                       and pilot.app.screen)


async def set_field(pilot, form: EditArgsScreen, name: str, text: str) -> None:
    box = form.edit_field(name)  # the field's Input, made when first edited
    await pilot.pause()
    box.value = ""
    await pilot.press(*list(text))
    await pilot.pause()


def error_of(form: EditArgsScreen, name: str) -> str:
    found = form.query(f"#e-{name}")  # mounted on its first error
    w = found.first(Static) if found else None
    return str(w.render()) if w is not None and w.display else ""


async def test_edit_form_validates_applies_presets_and_sends_the_exact_patch(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, env, src)
        # current values as the container runs them; defaults as placeholders
        assert form.value_of("max-num-seqs") == "256"
        assert form.value_of("block-size") == "" and "16" in form.query_one("#r-block-size", FieldRow).placeholder
        # inline validation errors, and nothing can be applied
        await set_field(pilot, form, "gpu-memory-utilization", "1.5")
        assert "must be > 0 and <= 1" in error_of(form, "gpu-memory-utilization")
        await set_field(pilot, form, "max-num-batched-tokens", "100")
        assert ">= --max-num-seqs (256)" in error_of(form, "max-num-batched-tokens")
        await set_field(pilot, form, "block-size", "sixteen")
        assert "not a whole number" in error_of(form, "block-size")
        assert form.query_one("#edit-apply", Button).disabled
        await pilot.press("f8")
        await pilot.pause()
        assert isinstance(app.screen, EditArgsScreen) and "fix the fields marked in red first" in notes(app)
        # reset, then the runbook preset: cut max-num-seqs by 50%
        await pilot.press("f7")
        await pilot.pause()
        assert not form.errors and error_of(form, "gpu-memory-utilization") == ""
        await pilot.press("f3")
        await pilot.pause()
        assert form.value_of("max-num-seqs") == "128"
        assert changed_lines(form.diff) == ["-- 256", "+- 128"]
        await pilot.press("f4")
        await pilot.pause()
        assert changed_lines(form.diff) == ["-- 256", "+- 128", "-- 0.9", "+- 0.7"]
        assert not form.query_one("#edit-apply", Button).disabled
        assert env.writes() == []  # typing and the live diff send nothing
        # review: the dialog shows the diff and the patch, its body focused (it scrolls); esc
        # cancels and sends nothing
        await pilot.press("f8")
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        assert app.focused is dialog.query_one("#confirm-body")
        assert changed_lines(dialog.plan.diff) == ["-- 256", "+- 128", "-- 0.9", "+- 0.7"]
        assert dialog.plan.preflight is not None
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen))
        assert env.writes() == [] and "edit args: cancelled, nothing was sent" in notes(app)
        # confirm: dry run, then the patch, then straight into the rollout view
        await pilot.press("f8")
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and app.screen)
        plan = dialog.plan
        await pilot.press("enter")
        rollout = await until(pilot, lambda: isinstance(app.screen, RolloutScreen) and app.screen.status and app.screen)
        patches = [c for c in env.writes() if c.method == "PATCH"]
        assert [(c.path, c.query.get("dryRun"), c.content_type) for c in patches] == [
            (DEP_PATH, "All", "application/json-patch+json"),
            (DEP_PATH, None, "application/json-patch+json"),
        ]
        assert patches[1].body == json.loads(json.dumps(plan.patch))
        args = env.vllm()["args"]
        assert args[args.index("--max-num-seqs") + 1] == "128" and args[args.index("--gpu-memory-utilization") + 1] == "0.7"
        assert rollout.status.generation >= 2 and rollout.status.new_rs is not None
        entries = env.audit.read()
        assert [(e["action"], e["result"]["ok"]) for e in entries] == [("edit", True)]
        assert "args changed; rollout started" in " ".join(notes(app))


async def test_a_concurrent_change_is_refused_and_the_form_shows_the_new_state(env: Env) -> None:
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, env, src)
        await pilot.press("f3")
        await pilot.pause()
        await pilot.press("f8")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        # another client edits the Deployment while the dialog is open
        old = env.deployment()
        new = json.loads(json.dumps(old))
        c = new["spec"]["template"]["spec"]["containers"][0]
        c["args"][c["args"].index("--max-num-seqs") + 1] = "200"
        c["args"] += ["--enable-chunked-prefill"]
        env.emu._update("deployments", old, new)
        await pilot.press("enter")
        await until(pilot, lambda: any("changed since it was read" in n for n in notes(app)))
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen)
                    and form.value_of("max-num-seqs") == "200")
        assert form.value_of("enable-chunked-prefill") == "true"
        assert any("the form shows its new state" in n for n in notes(app))
        args = env.vllm()["args"]  # nothing the other client wrote is lost
        assert args[args.index("--max-num-seqs") + 1] == "200" and "--enable-chunked-prefill" in args
        assert [c.query.get("dryRun") for c in env.writes() if c.method == "PATCH"] == ["All"]
        assert [e["result"]["ok"] for e in env.audit.read()] == [False]

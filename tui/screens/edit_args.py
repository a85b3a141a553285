"""Edit the KV-relevant engine args of a replica's owner (runbook emergency-mitigation steps 2-4).

One field per flag with the value the container runs with (or the engine default, as the
placeholder), inline validation, the incident presets, and the exact diff of the container spec
as you type. `f8` plans the change on the cluster (re-reading the Deployment, with the KV
preflight), shows the confirm dialog, applies it (server-side dry run, then the patch) and goes
straight to the rollout view. A refused patch (someone changed the Deployment) reloads the form
with the new state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.app import ComposeResult
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Static

from tui.actions import PRESET_KEYS, bindings
from tui.core import engines
from tui.core.cluster import args as A
from tui.core.cluster.args import sglang_rules
from tui.core.cluster.base import Cluster, ClusterError, DeploymentInfo, EditArgsRequest
from tui.core.model import FleetState, ReplicaView
from tui.core.textsafe import clean
from widgets.diff_view import DiffView, notes_text
from widgets.field_row import INPUT_W, FieldEditor, FieldRow
from widgets.footer import KvFooter
from widgets.quiet import FormButton, StyledOnOpening
from widgets import undrawn
from widgets.format import num, pct, rate

if TYPE_CHECKING:
    from tui.app import KvwatchApp


NOTE_MIN = 30  # columns of help text beside a field, else it wraps below it
LABEL_W = 26  # the flags' column


def _field_id(name: str) -> str:
    return "f-" + name


class EditArgsScreen(StyledOnOpening, Screen):
    app: KvwatchApp  # the running app, typed (textual types it App[Any])
    # tui/actions.py: cancel, review, reset, presets; then Tab as Textual binds it, but run as
    # the app reads the key (priority): keys typed right behind it go where it moved the focus
    BINDINGS = [*bindings("editargs"),
                Binding("tab", "move_focus(1)", "Next", show=False, priority=True),
                Binding("shift+tab", "move_focus(-1)", "Previous", show=False, priority=True)]
    # Focus goes to the first field once the Deployment is read (_fill). Textual's auto-focus
    # would first give it to the fields' scroll container, and each move of focus into or out
    # of a container restyles everything inside it: ~60 widgets, twice, and a full repaint.
    AUTO_FOCUS = ""
    DEFAULT_CSS = """
    EditArgsScreen #edit-title { height: auto; padding: 0 1; background: $surface; }
    EditArgsScreen #edit-main { height: 1fr; }
    EditArgsScreen #edit-fields { width: 3fr; max-width: 96; height: 1fr; padding: 0 1; }
    EditArgsScreen #edit-side { width: 2fr; height: 1fr; padding: 0 1; }
    EditArgsScreen .row Input.-invalid { background: $error 30%; }
    EditArgsScreen .note-below { display: none; height: auto; color: $text-muted; padding: 0 0 0 2; }
    EditArgsScreen.-narrow .note-below { display: block; }
    EditArgsScreen .err { height: auto; color: $error; padding: 0 0 0 2; }
    EditArgsScreen #edit-presets { height: auto; margin: 1 0 0 0; grid-size: 3; grid-gutter: 0 1; }
    EditArgsScreen #edit-presets Button { width: 100%; }
    EditArgsScreen #edit-diff-box { height: 1fr; border: round $panel; }
    EditArgsScreen #edit-notes { height: auto; }
    EditArgsScreen #edit-actions { height: auto; align-horizontal: right; }
    """

    def __init__(self, cluster: Cluster, namespace: str, name: str, *, kind: str = "Deployment",
                 replica: str | None = None, cache_config: Mapping[str, Any] | None = None,
                 generation: str | None = None, suggest: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.suggest = dict(suggest or {})  # values to pre-fill (capacity planner, runbook step)
        self.cluster = cluster
        self.namespace = namespace
        self.name_ = name
        self.kind = kind
        self.replica = replica
        self._cache_config = dict(cache_config) if cache_config is not None else None
        self._generation = generation
        self.info: DeploymentInfo | None = None
        self.container: dict[str, Any] | None = None
        self.cmd: A.VllmCommand | None = None
        self.initial: dict[str, str] = {}  # field -> text the form started with
        self.errors: dict[str, str] = {}
        self.changes: dict[str, Any] = {}  # typed values that differ from the running ones
        self.diff = ""
        self.load_error: str | None = None
        self.busy = False
        self.done = False  # applied: the screen has been replaced by the rollout view
        # the form's rows by field, kept as built (a query walks the whole form: validating it
        # looked up 18 widgets, a tenth of an opening); a row's Input is made when it is first
        # edited (widgets/field_row.py)
        self._rows: dict[str, FieldRow] = {}
        self._lines: dict[str, Static] = {}  # "nb-<field>" / "e-<field>": the lines below a row (_below)

    # -- context from the live fleet ----------------------------------------------------------
    def _view(self) -> ReplicaView | None:
        state = getattr(self.app.monitor, "state", None)
        if state is None or self.replica is None:
            return None
        return next((v for v in state.replicas if v.name == self.replica), None)

    def capacity_fit(self) -> tuple[int | None, str]:
        """The max-num-seqs that fits the replica's traffic, from its capacity plan (the figure
        the runbook's cap step and the planner `c` give), for the preflight."""
        snap = self.app.monitor.replica_snapshot(self.replica) if self.replica else None
        if snap is None:
            return None, ""
        from tui.core.diagnosis.capacity import plan_for_history

        def arg(name: str) -> int | None:
            v = self.cmd.value(name) if self.cmd is not None else None
            return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        p = plan_for_history(snap.history, t=self.app.monitor.thresholds, max_model_len=arg("max-model-len"),
                             current_max_num_seqs=arg("max-num-seqs"))
        return p.suggested_max_num_seqs, "capacity plan, as the runbook and `c` say"

    @property
    def cache_config(self) -> Mapping[str, Any]:
        if self._cache_config is not None:
            return self._cache_config
        v = self._view()
        return dict(v.cache_config) if v is not None else {}

    @property
    def engine(self) -> engines.Engine:
        """The replica's engine (its last page said which): its flags make the form."""
        v = self._view()
        return engines.get(v.engine) if v is not None and v.engine else engines.VLLM

    def _presets(self) -> list[tuple[str, str, str, str]]:
        """(slot, the engine's preset, key, label): the keys and buttons name a slot by vLLM's
        preset; another engine fills the same slots with its own."""
        if self.engine.name != sglang_rules.ENGINE_NAME:
            return [(p, p, key, label) for p, key, label in PRESET_KEYS]
        return [(p, sp, key, label) for (p, key, _), (sp, label) in zip(PRESET_KEYS, sglang_rules.PRESET_LABELS.items(), strict=True)]

    @property
    def generation(self) -> str:
        if self._generation:
            return self._generation
        v = self._view()
        return "v0" if v is not None and v.generation == "v0" else "v1"

    @property
    def observed(self) -> dict[str, Any]:
        return A.observed_from_cache_config(self.cache_config) if self.cache_config else {}

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="edit-title")
        with Horizontal(id="edit-main", classes="-undrawn"):
            with VerticalScroll(id="edit-fields"):
                # longer flags (SGLang's) widen the label column
                label_w = max(LABEL_W, max(len(n) for n in self.engine.editable) + 4)
                for i, name in enumerate(self.engine.editable):
                    # the first field, focused once filled, has its Input from the start
                    editor = self._editor_for(name) if i == 0 else None
                    row = self._rows[name] = FieldRow(f"--{name}", label_w, field=name, editor=editor,
                                                      classes="row", id=f"r-{name}")
                    yield row
                    # below the row, mounted when first needed (_below): the help when too narrow
                    # for it beside the field (80x24), then the field's error
                # drawn (not -undrawn): inside the scroll, focus order and scrolling to a preset read its place
                with Grid(id="edit-presets"):
                    for p, _, key, preset_label in self._presets():
                        yield FormButton(f"{key} {preset_label}", id=f"preset-{p.replace('.', '_')}", compact=True)
            with Vertical(id="edit-side", classes="-undrawn"):
                with VerticalScroll(id="edit-diff-box"):
                    yield DiffView(self.app.palette() if hasattr(self.app, "palette") else None, id="edit-diff")
                yield Static("", id="edit-notes")
                with Horizontal(id="edit-actions", classes="-undrawn"):
                    yield FormButton("Cancel", id="edit-cancel", compact=True)
                    yield FormButton("Review & apply (f8)", id="edit-apply", variant="warning", compact=True, disabled=True)
        yield KvFooter()

    def _editor_for(self, name: str) -> FieldEditor:
        spec = self.engine.arg_specs[name]
        suggest = None
        if spec.kind == "bool":
            suggest = SuggestFromList(["true", "false"])
        elif spec.kind == "choice":
            suggest = SuggestFromList(list(spec.choices))
        return FieldEditor(name, id=_field_id(name), suggester=suggest, select_on_focus=True, compact=True,
                           can_focus=self.cmd is not None)

    def value_of(self, name: str) -> str:
        """The text in a field, as typed (not stripped)."""
        return self._rows[name].text

    def set_value(self, name: str, text: str) -> None:
        """Puts `text` in a field, as typing it would (validated and diffed by the caller)."""
        self._rows[name].set_text(text)

    def edit_field(self, name: str) -> FieldEditor:
        """Gives the focus to a field's Input, made now if it has none. Synchronous: a key
        queued behind the one that moved goes to this field (the Input is in the DOM and
        focused at once; its mount completes before it handles that key)."""
        row = self._rows[name]
        editor = row.editor
        if editor is None:
            editor = self._editor_for(name)
            with self.prevent(Input.Changed):  # the row's text, not a change
                editor.value, editor.placeholder = row.value, row.placeholder
            editor.set_class(row.has_class("-invalid"), "-invalid")
            row.adopt(editor)
            row.mount(editor)
        assert isinstance(editor, FieldEditor)
        if self.cmd is not None and not editor.can_focus:
            editor.can_focus = True
        if editor.can_focus:
            self.set_focus(editor)
            # a new Input has no place on screen yet to scroll to (set_focus scrolls to it): its row has
            row.scroll_visible(animate=False)
        return editor

    def move_field(self, editor: FieldEditor, step: int) -> None:
        """Tab, Enter and the arrows in a field: the next or previous field, and past the last
        (or before the first) whatever follows (or precedes) the fields."""
        names = list(self.engine.editable)
        i = names.index(editor.field) + step
        if 0 <= i < len(names):
            self.edit_field(names[i])
        elif step > 0:
            self.focus_next()
        else:
            self.focus_previous()

    def action_move_focus(self, step: int) -> None:
        if isinstance(self.focused, FieldEditor):  # the fields' own order (fields without an Input yet)
            self.move_field(self.focused, step)
        elif step > 0:
            self.focus_next()
        else:
            self.focus_previous()

    @on(FieldRow.Picked)
    def _picked(self, event: FieldRow.Picked) -> None:
        if self.cmd is not None:
            self.edit_field(event.row.field)

    def _note_below(self, name: str) -> Static:
        line = self._below("nb", name)
        assert line is not None  # created when missing
        return line

    def _below(self, kind: str, name: str, create: bool = True) -> Static | None:
        """The line under a field's row: its help ("nb", shown when narrow) or its error ("e"),
        mounted the first time it has something to say (most forms never show either: 18
        widgets fewer to build on opening)."""
        line = self._lines.get(f"{kind}-{name}")
        if line is not None or not create:
            return line
        line = self._lines[f"{kind}-{name}"] = Static("", classes="note note-below" if kind == "nb" else "err",
                                                      id=f"{kind}-{name}")
        above = self._lines.get(f"nb-{name}") if kind == "e" else None
        self.query_one("#edit-fields").mount(line, after=above if above is not None else self._rows[name])
        return line

    def first_resume(self) -> None:
        if self.cmd is None:  # still reading: the fields look disabled until filled
            self._set_fields_disabled(True)

    def _set_fields_disabled(self, disabled: bool) -> None:
        """The fields are built enabled but out of reach (the first field's Input not focusable,
        the rows not yet clickable) until the Deployment is read: enabling nine disabled rows
        restyles each on every opening, where the read is usually done before the first frame.
        Disabled (dimmed) only while it is not."""
        for name in self.engine.editable:
            row = self._rows[name]
            if row.disabled != disabled:
                row.disabled = disabled
            if row.editor is not None:
                row.editor.can_focus = not disabled

    def on_resize(self) -> None:
        fields = self.query_one("#edit-fields")
        # label 26 + input 16 + the help: under NOTE_MIN columns of help, it goes below the field
        narrow = bool(fields.size.width) and fields.size.width - 2 - LABEL_W - INPUT_W < NOTE_MIN
        if narrow != self.has_class("-narrow"):
            self.set_class(narrow, "-narrow")
            for name in self.engine.editable:
                row = self._rows[name]
                row.set_note(row.note, show=not narrow)
                if narrow and row.note:
                    self._note_below(name).update(row.note)
        # the apply button keeps its key in sight when the side panel is narrow (80 columns): under
        # 34 columns, its padding and the diff box inside it 32 (an undrawn container is not sized)
        box = self.query_one("#edit-diff-box")
        self.query_one("#edit-apply", Button).label = "Review (f8)" if 0 < box.outer_size.width < 32 else "Review & apply (f8)"

    def _title(self) -> Text:
        t = Text(f"edit engine args · {self.kind.lower()}/{clean(self.name_)} -n {clean(self.namespace)}", style="bold")
        t.append(f" · context {clean(self.cluster.context)}")
        if self.cluster.production:
            t.append("  PRODUCTION", style="bold reverse red")
        v = self._view()
        if v is not None:
            m = v.metrics
            t.append(f"\n{clean(v.name)}: {v.verdict}  KV {pct(m.kv_usage, 100)}  running {num(m.running)}  "
                     f"waiting {num(m.waiting)}  preempt {rate(m.preemptions_per_s)}/s", style="dim")
        if self.cmd is not None:
            t.append(f"\ncontainer {clean(self.cmd.container)} · {clean(self.cmd.form)} · engine {self.cmd.generation}",
                     style="dim")
        return t

    def content_shown(self) -> bool:
        """The form is filled from the Deployment, or says why it cannot be (the app holds the
        collector until a frame shows this: tui/app.py _display)."""
        return self.cmd is not None or self.load_error is not None

    def on_mount(self) -> None:
        undrawn.leave_out(self)
        self.query_one("#edit-diff", DiffView).show("reading the Deployment...")
        self._load()

    def show_state(self, state: FleetState) -> None:  # live replica numbers in the title
        self.query_one("#edit-title", Static).update(self._title())
        # presets follow the verdict: one that would make it worse is greyed out, with the why
        for p, _key, _label in PRESET_KEYS:
            why = self._preset_refusal(p)
            btn = self.query_one(f"#preset-{p.replace('.', '_')}", Button)
            btn.disabled, btn.tooltip = bool(why), why

    # -- loading ------------------------------------------------------------------------------
    @work(exclusive=True, group="edit-load", exit_on_error=False)
    async def _load(self, note: str | None = None) -> None:
        try:
            info = await self.cluster.get_deployment(self.namespace, self.name_, self.kind)
            containers = [c.as_dict() for c in info.containers]
            found = A.find_vllm_container(containers)
            if found is None:
                raise ClusterError("bad-input", f"{self.kind.lower()}/{self.name_} has no vLLM container")
            container = dict(found[1])
            cmd = A.parse_container(container, self.generation)
            if cmd.engine != self.engine.name:
                raise A.ArgError(f"the container starts {cmd.eng.label}, the replica spoke {self.engine.label}: "
                                 "reopen the form once its metrics say the same")
        except ClusterError as e:
            self.load_error = e.message
        except A.ArgError as e:
            self.load_error = str(e)
        except Exception as e:  # noqa: BLE001 - the dashboard keeps running
            self.load_error = f"unexpected error: {type(e).__name__}: {e}"
        else:
            self.load_error = None
            self.info, self.container, self.cmd = info, container, cmd
            self._fill()
        if self.load_error:
            self.query_one("#edit-diff", DiffView).show("")
            self.query_one("#edit-notes", Static).update(notes_text("cannot edit", [self.load_error], "bold red", "x "))
            if self.cmd is None:
                self._set_fields_disabled(True)
            if self.focused is None:  # nothing to type into: the keys scroll the (disabled) fields
                self.query_one("#edit-fields").focus()
        elif note:
            self.app.notify(clean(note), severity="warning", timeout=10, markup=False)
        self.query_one("#edit-title", Static).update(self._title())

    def _fill(self) -> None:
        assert self.cmd is not None
        # the values set here are validated once, below: each Input.Changed revalidated the
        # whole form again (four passes an opening)
        with self.prevent(Input.Changed):
            self.initial = {}
            for name in self.engine.editable:
                given = self.cmd.values.get(name)
                val = given if given is not None and not given.is_default else None  # written in the spec
                written = val is not None
                self.initial[name] = val.display() if val is not None else ""
                default = A.eff_before(self.cmd, name, self.observed) if not written else None
                shown = A.format_value(default) if default is not None else ("(model)" if name in ("max-model-len", "context-length") else "none")
                self._rows[name].set_text(self.initial[name], "" if written else "default " + shown)
                if val is not None:
                    note = "env $" + val.env_var if val.env_var else "set in the " + ("script" if self.cmd.form == "shell" else "args")
                elif self.observed.get(name) is not None:
                    note = "not set; the engine reports " + A.format_value(self.observed[name])
                else:
                    note = "not set; " + self.engine.arg_specs[name].note
                self._rows[name].set_note(Text(clean(note)))
                if self.has_class("-narrow"):
                    self._note_below(name).update(Text(clean(note)))
            self._set_fields_disabled(False)
            self.edit_field(self.engine.editable[0])
            done = []
            for flag, value in self.suggest.items():  # typed in like a preset: validated and diffed, not applied
                if flag in self.engine.editable:
                    if self.value_of(flag).strip() != value:
                        self.set_value(flag, value)
                        done.append(f"{flag}={value}")
        self._revalidate()
        if done:
            self.app.notify("pre-filled: " + ", ".join(done) + " (review the diff, f8 to apply)",
                            title="suggested by kvwatch", timeout=6, markup=False)

    # -- validation and the live diff -----------------------------------------------------------
    def raw_changes(self) -> dict[str, str]:
        out = {}
        for name in self.engine.editable:
            text = self.value_of(name).strip()
            if text != self.initial.get(name, ""):
                out[name] = text
        return out

    def _revalidate(self) -> None:
        if self.cmd is None or self.container is None:
            return
        raw = self.raw_changes()
        cleared = [n for n, v in raw.items() if v == ""]
        errors: dict[str, str] = {n: "empty: type a value (the engine default is not restored by clearing)"
                                  for n in cleared}
        raw = {n: v for n, v in raw.items() if v != ""}
        v = A.validate(self.cmd, raw, self.observed)
        errors.update(v.errors)
        self.errors = errors
        self.changes = dict(v.changes) if not errors else {}
        notes: list[Text] = []
        self.diff = ""
        if self.changes:
            try:
                rw = A.rewrite_container(self.container, self.cmd, self.changes)
                self.diff = A.args_diff(self.container, rw.container, f"{self.kind.lower()}/{self.name_}/{self.cmd.container}")
                if rw.notes:
                    notes.append(notes_text("notes", rw.notes, "dim"))
            except A.ArgError as e:
                errors["_"] = str(e)
        for name in self.engine.editable:
            msg = errors.get(name, "")
            err = self._below("e", name, create=bool(msg))
            if err is not None:
                err.update(Text(clean(msg)) if msg else "")
                err.display = bool(msg)
            row = self._rows[name]
            row.set_class(bool(msg), "-invalid")
            if row.editor is not None:
                row.editor.set_class(bool(msg), "-invalid")
        if errors.get("_"):
            notes.insert(0, notes_text("cannot rewrite the container", [errors["_"]], "bold red", "x "))
        warnings = list(self.cmd.warnings) + list(v.warnings)
        if warnings:
            notes.append(notes_text("warnings", warnings, "yellow"))
        self.query_one("#edit-diff", DiffView).show(self.diff if self.diff else ("fix the errors on the left" if errors else
                                                                                   "no change yet: edit a field or press a preset"))
        joined = Text()
        for i, n in enumerate(notes):
            if i:
                joined.append("\n")
            joined.append_text(n)
        self.query_one("#edit-notes", Static).update(joined)
        self.query_one("#edit-apply", Button).disabled = not (self.changes and not errors) or self.busy

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        if event.input.id and event.input.id.startswith("f-"):
            self._revalidate()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, FieldEditor):
            self.move_field(event.input, 1)

    # -- presets ------------------------------------------------------------------------------
    def action_preset(self, key: str) -> None:
        if self.cmd is None:
            return
        key = {p: sp for p, sp, _, _ in self._presets()}.get(key, key)
        why = self._preset_refusal(key)
        if why:  # presets follow the verdict (tui/core/diagnosis/gmu_policy.py)
            self.app.notify(clean(why), title=f"preset {key} not offered", severity="warning", timeout=8, markup=False)
            return
        try:
            values = A.preset(self.cmd, key, self.observed)
        except A.ArgError as e:
            self.app.notify(clean(str(e)), title="preset", severity="error", timeout=5, markup=False)
            return
        for name, val in values.items():
            self.set_value(name, A.format_value(val))
        self._revalidate()

    def _preset_refusal(self, key: str) -> str | None:
        from tui.core.diagnosis.gmu_policy import preset_refusal

        v = self._view()
        if v is None:
            return None
        pod = v.pod
        oom = pod is not None and (pod.last_termination_reason == "OOMKilled" or pod.last_exit_code == 137)
        return preset_refusal(key, v.verdict, oom)

    @on(Button.Pressed)
    def _button(self, event: Button.Pressed) -> None:
        bid = event.button.id or ""
        if bid.startswith("preset-"):
            self.action_preset(bid[len("preset-"):].replace("_", "."))
        elif bid == "edit-apply":
            self.action_review()
        elif bid == "edit-cancel":
            self.action_cancel()

    def action_reset(self) -> None:
        for name in self.engine.editable:
            self.set_value(name, self.initial.get(name, ""))
        self._revalidate()

    def action_cancel(self) -> None:
        if self.busy:
            return
        self.app.pop_screen()

    # -- plan, confirm, apply, rollout ----------------------------------------------------------
    def action_review(self) -> None:
        if self.busy:
            return
        if self.errors:
            self.app.notify("fix the fields marked in red first", severity="error", timeout=4)
            return
        if not self.changes:
            self.app.notify("nothing to change yet", severity="warning", timeout=3)
            return
        self._apply()

    @work(exclusive=True, group="edit-apply", exit_on_error=False)
    async def _apply(self) -> None:
        from .confirm import confirm_and_apply

        self.busy = True
        self.query_one("#edit-apply", Button).disabled = True
        try:
            fits, why = self.capacity_fit()
            try:
                plan = await self.cluster.plan_edit_args(EditArgsRequest(
                    self.namespace, self.name_, self.raw_changes_typed(), kind=self.kind,
                    container=self.cmd.container if self.cmd else None, cache_config=self.cache_config or None,
                    generation=self.generation, fits_max_num_seqs=fits, fits_why=why))
            except ClusterError as e:
                self.app.notify(clean(e.message), title="edit", severity="error", timeout=10, markup=False)
                return
            result = await confirm_and_apply(self, self.cluster, plan, "edit args")
            if result is None:
                return
            if result.ok:
                from .rollout import RolloutScreen

                self.done = True
                self.app.switch_screen(RolloutScreen(self.cluster, self.namespace, self.name_, kind=self.kind))
                return
            if (result.details or {}).get("kind") == "conflict":
                cur = (result.details or {}).get("current_args")
                note = "the Deployment changed since it was read: the form shows its new state"
                if cur:
                    note += "; now: " + " ".join(str(x) for x in cur)
                self._load(note)
        finally:
            self.busy = False
            if not self.done:
                self._revalidate()

    def raw_changes_typed(self) -> dict[str, Any]:
        """The validated change set (typed values), as the plan takes it."""
        return dict(self.changes)

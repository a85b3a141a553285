"""Every key action kvwatch offers, declared once: the bindings of the app and each screen, the
help screen, key remapping (`[keys]` in the config, by id) and the command palette read it.

An entry's order here is its order in the footer and the help, so a screen's bindings are the
entries whose `scopes` name it, in this order. Binding ids are stable: users remap by them.
Pure data plus a `Binding` factory: nothing here imports the app or a screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

from tui.core.cluster.presets import PRESETS

# scopes: "app" (every screen) or a screen's registry name (`SCOPE` on the screen class)
APP = "app"


@dataclass(frozen=True)
class Action:
    id: str  # binding id: what `[keys]` remaps
    key: str  # default key(s), Textual names, comma-separated
    action: str  # the Textual action string it runs
    description: str
    scopes: tuple[str, ...]
    show: bool = True  # in the footer
    mutates: bool = False  # changes the cluster (hidden when read-only)
    palette: bool = True  # offered in the command palette (not modal-only keys like esc)
    # app action ids whose key this screen binding may take: the same intent for this screen
    # (ctrl+r reloads what the screen shows). Any other app key keeps one meaning everywhere.
    refines: tuple[str, ...] = ()

    def binding(self) -> Binding:
        return Binding(self.key, self.action, self.description, show=self.show, id=self.id)


# edit form presets: (preset, key, button label); the description is the engine's preset text
PRESET_KEYS = (
    ("seqs-25", "f2", "seqs -25%"),
    ("seqs-50", "f3", "seqs -50%"),
    ("gmu-0.7", "f4", "gmu 0.7"),
    ("gmu-0.6", "f5", "gmu 0.6"),
    ("batched-50", "f6", "batched /2"),
)


def _a(id: str, key: str, action: str, description: str, *scopes: str, **kw) -> Action:
    return Action(id, key, action, description, scopes, **kw)


FLEET, TRIAGE, DETAIL = "fleet", "triage", "detail"
_MIT = (FLEET, TRIAGE)  # mitigation keys: the fleet screen and one replica's diagnosis
_OPEN = (FLEET, DETAIL)  # t / g / c open a replica's diagnosis from the fleet and detail screens

ACTIONS: tuple[Action, ...] = (
    # -- app: every screen ------------------------------------------------------------------
    _a("quit", "q", "quit", "Quit", APP),
    _a("help", "question_mark", "help", "Help", APP),
    _a("pause", "p", "toggle_pause", "Pause", APP),
    _a("refresh", "ctrl+r", "refresh_now", "Refresh", APP, show=False),
    _a("screenshot", "ctrl+s", "screenshot", "Screenshot", APP, show=False),
    _a("report", "R", "write_report", "Write the incident report (when recording)", APP, show=False),
    _a("cycle_theme", "ctrl+t", "cycle_theme", "Next theme", APP, show=False),
    _a("bell", "ctrl+b", "toggle_bell", "Bell on kv-pressure", APP, show=False),
    # replay only (the app's check_action hides them in live modes)
    _a("replay_back", "less_than_sign", "replay_step(-1)", "Step back", APP),
    _a("replay_forward", "greater_than_sign", "replay_step(1)", "Step", APP),
    _a("replay_next", "n", "replay_next_change", "Next change", APP),
    _a("replay_seek", "T", "replay_seek", "Seek (time)", APP),
    # -- fleet ------------------------------------------------------------------------------
    _a("filter", "slash", "filter", "Filter", FLEET),
    _a("clear_filter", "escape", "clear_filter", "Clear", FLEET, show=False, palette=False),
    _a("detail", "enter", "detail", "Detail", FLEET),
    _a("faults", "ctrl+z", "faults", "Faults only", FLEET, show=False),
    _a("sort_kv", "K", "sort('kv')", "Sort KV", FLEET, show=False),
    _a("sort_queue", "Q", "sort('queue')", "Sort queue", FLEET, show=False),
    _a("sort_name", "N", "sort('name')", "Sort name", FLEET, show=False),
    _a("sort_severity", "V", "sort('severity')", "Sort severity", FLEET, show=False),
    _a("sort_group", "G", "sort('group')", "Group by owner", FLEET, show=False),
    _a("down", "j", "cursor(1)", "Down", FLEET, show=False, palette=False),
    _a("up", "k", "cursor(-1)", "Up", FLEET, show=False, palette=False),
    # -- detail and triage: back ------------------------------------------------------------
    _a("back", "escape", "app.pop_screen", "Back", DETAIL, TRIAGE, palette=False),
    _a("back2", "left_square_bracket", "app.pop_screen", "Back", DETAIL, show=False, palette=False),
    _a("full_labels", "m", "full_labels", "Full labels", DETAIL, show=False),  # long model names, uncut
    # -- triage: its modes (the same ids as the fleet's t / g / c: remapping one remaps all) ----
    _a("triage", "t", "diagnosis('triage')", "Triage", TRIAGE),
    _a("runbook", "g", "diagnosis('runbook')", "Runbook", TRIAGE),
    _a("capacity", "c", "diagnosis('capacity')", "Capacity", TRIAGE),
    _a("triage_fetch", "f", "fetch", "Fetch logs/events", TRIAGE, show=False),
    # -- mitigation (tui/screens/mitigation.py gates them: replay, no cluster, read-only, RBAC) --
    _a("edit_args", "e", "edit_args", "Edit args", *_MIT, mutates=True),
    _a("drain", "ctrl+d", "drain", "Drain", *_MIT, mutates=True),
    _a("rollout_status", "z", "rollout_status", "Rollout", *_MIT),
    _a("rollout_restart", "r", "rollout_restart", "Restart", *_MIT, show=False, mutates=True),
    _a("scale", "s", "scale", "Scale", *_MIT, show=False, mutates=True),
    _a("rollback", "ctrl+l", "rollback", "Roll back", *_MIT, show=False, mutates=True),
    _a("logs", "l", "logs", "Logs", *_MIT),
    _a("events", "v", "events", "Events", *_MIT, show=False),
    _a("describe", "y", "describe", "Describe (YAML)", *_MIT, show=False),
    _a("command", "colon", "command", "Command", FLEET, show=False),
    # -- fleet and detail: open a replica's diagnosis. `t` has its own action there, so that a
    # replay can hide it and let the app's `T` (seek) through; `g` then `t` reaches the triage.
    _a("triage", "t", "triage", "Triage", *_OPEN),
    _a("runbook", "g", "diagnosis('runbook')", "Runbook", *_OPEN, show=False),
    _a("capacity", "c", "diagnosis('capacity')", "Capacity", *_OPEN, show=False),
    _a("gpu", "u", "gpu", "GPUs", *_OPEN, show=False),  # the replica's GPU panel (tui/screens/gpu.py)
    # -- modal and sub-screens ---------------------------------------------------------------
    _a("close", "escape,q,question_mark", "dismiss", "Close", "help", palette=False, refines=("quit", "help")),
    _a("help_search", "slash", "search", "Search", "help", palette=False),
    _a("seek_cancel", "escape", "cancel", "Cancel", "seek", palette=False),
    _a("prompt_cancel", "escape", "cancel", "Cancel", "prompt", palette=False),
    _a("confirm_ok", "enter,y", "confirm", "Confirm", "confirm", palette=False),
    # a modal screen stops the app's keys: the dialog binds the app's help itself (same id)
    _a("help", "question_mark", "help", "Help", "confirm", palette=False),
    _a("confirm_cancel", "escape", "cancel", "Cancel", "confirm", palette=False),
    _a("rollout_back", "escape", "app.pop_screen", "Back", "rollout", palette=False),
    _a("rollout_refresh", "ctrl+r", "refresh_rollout", "Refresh", "rollout", refines=("refresh",)),
    _a("events_back", "escape", "app.pop_screen", "Back", "events", palette=False),
    _a("events_reload", "ctrl+r", "reload", "Reload", "events", refines=("refresh",)),
    _a("events_warnings", "w", "toggle_warnings", "Warnings only", "events"),
    _a("describe_back", "escape", "app.pop_screen", "Back", "describe", palette=False),
    _a("gpu_back", "escape", "app.pop_screen", "Back", "gpu", palette=False),
    _a("describe_reload", "ctrl+r", "reload", "Reload", "describe", refines=("refresh",)),
    _a("logs_back", "escape", "back", "Back", "logs", palette=False),  # clears a search first
    _a("logs_previous", "P", "toggle_previous", "Previous container", "logs"),  # p: pause
    _a("logs_filter", "f", "toggle_filter", "Filter", "logs"),
    _a("logs_search", "slash", "search", "Search", "logs"),
    # next match: the replay's "next change" key, for this screen's text (replay has no logs)
    _a("logs_next", "n,enter", "next_match(1)", "Next match", "logs", refines=("replay_next",)),
    _a("logs_prev", "N", "next_match(-1)", "Previous match", "logs", show=False),
    _a("logs_wrap", "w", "toggle_wrap", "Wrap", "logs", show=False),
    _a("logs_range", "t", "cycle_range", "Time range", "logs", show=False),  # all / 5 min / 1 min / incident
    _a("logs_reload", "ctrl+r", "reload", "Reload", "logs", refines=("refresh",)),
    _a("logs_follow", "space", "toggle_follow", "Follow", "logs"),
    _a("drain_cancel", "c", "cancel_drain", "Cancel drain", "drain", mutates=True),
    _a("drain_restore", "u", "restore", "Restore replicas", "drain", mutates=True),
    _a("drain_back", "escape", "back", "Back", "drain", palette=False),
    _a("edit_cancel", "escape", "cancel", "Cancel", "editargs", palette=False),
    _a("edit_review", "f8", "review", "Review & apply", "editargs", mutates=True),  # ctrl+s: screenshot
    _a("edit_reset", "f7", "reset", "Reset", "editargs"),  # ctrl+u belongs to Input
    *(_a(f"edit_preset_{p.replace('-', '_').replace('.', '')}", key, f"preset('{p}')", PRESETS[p], "editargs",
         show=False) for p, key, _ in PRESET_KEYS),
)


def actions_for(scope: str) -> list[Action]:
    """The entries a scope binds, in footer order."""
    return [a for a in ACTIONS if scope in a.scopes]


def bindings(scope: str, *, only: tuple[str, ...] | None = None) -> list[BindingType]:
    """A screen's (or the app's) BINDINGS; `only` keeps just those binding ids."""
    return [a.binding() for a in actions_for(scope) if only is None or a.id in only]


def default_keys() -> dict[str, str]:
    """{binding id: default key(s)}: the first declaration of an id wins (ids shared by screens
    share their key)."""
    out: dict[str, str] = {}
    for a in ACTIONS:
        out.setdefault(a.id, a.key)
    return out


def action_by_id(binding_id: str, scope: str) -> Action | None:
    return next((a for a in ACTIONS if a.id == binding_id and scope in a.scopes), None)


def scope_of_class(cls: type) -> str:
    """A screen class's scope: its name without "Screen", lower case (FleetScreen -> "fleet")."""
    return cls.__name__.replace("Screen", "").lower()


def scope_of(screen: object) -> str:
    return scope_of_class(type(screen))


def key_name(key: str) -> str:
    """One Textual key name as the help and the palette print it."""
    return {"question_mark": "?", "slash": "/", "left_square_bracket": "[", "escape": "esc",
            "less_than_sign": "<", "greater_than_sign": ">", "space": "space",
            "colon": ":"}.get(key, key)


def keys_text(keys: str) -> str:
    """"escape,q" -> "esc, q"."""
    return ", ".join(key_name(k.strip()) for k in keys.split(","))


# keys Textual keeps for itself on every screen: quit, copy, command palette, focus moves
RESERVED = {"ctrl+q": "quit", "ctrl+c": "copy", "ctrl+p": "command palette", "tab": "next field",
            "shift+tab": "previous field"}


def _split(keys: str) -> set[str]:
    return {k.strip() for k in keys.split(",") if k.strip()}


def remap_problems(keys: dict[str, str]) -> list[tuple[str, str]]:
    """[(binding id, why)] for each `[keys]` remap that lands on a key another action uses where
    both apply (the same screen, or an app key and any screen), or on a key Textual reserves.
    Ids no action has are left to the caller (reported separately)."""
    effective = {a: _split(keys.get(a.id, a.key)) for a in ACTIONS}
    problems: dict[str, str] = {}
    for a in ACTIONS:
        if a.id not in keys:
            continue
        mine = effective[a]
        for k in sorted(mine & set(RESERVED)):
            problems.setdefault(a.id, f"{k} is Textual's {RESERVED[k]} key")
        for other in ACTIONS:
            if other.id == a.id or not (mine & effective[other]):
                continue
            shared = set(a.scopes) & set(other.scopes)
            where = sorted(shared) or (sorted(other.scopes) if APP in a.scopes else
                                       sorted(a.scopes) if APP in other.scopes else [])
            if where:
                key = sorted(mine & effective[other])[0]
                problems.setdefault(a.id, f"{key} is already {other.description!r} ({other.id}) "
                                          f"on {', '.join(where)}")
    return [(bid, problems[bid]) for bid in sorted(problems)]

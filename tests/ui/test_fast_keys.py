"""Keys typed at full speed after `/` or `:` belong to the prompt, never to the fleet screen.

A real pty (tests/ui/ptyrun.py): the whole string reaches kvwatch in one read, as from `tmux
send-keys` or a paste, so the keys are queued before the prompt's input has focus. The demo's
simulated cluster is behind the app, so a key that leaked through as a hotkey (`r` restart, `e`
edit args, `s` scale) would open its mutation dialog.
"""

from __future__ import annotations

import json
import os

from tests.ui.ptyrun import run_in_pty

# The demo's pipeline in a child program; a timer writes what is on screen to $OUT and exits.
CHILD = """
import json, os
from tui.app import KvwatchApp
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.sim import SimCluster
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet
from tui.core.sources.demo import DemoSource

out = os.environ["OUT"]
fleet = SimFleet("steady", replicas=3, speed=1.0, seed=1)
fleet.start()

class App(KvwatchApp):
    CSS_PATH = os.path.join(os.getcwd(), "tui", KvwatchApp.CSS_PATH)  # a class defined in -c has no file

    def on_mount(self):  # Textual runs KvwatchApp.on_mount too (handlers run along the MRO)
        self.set_timer({dump_at}, self.dump)

    def dump(self):
        from textual.widgets import Input
        inputs = {{}}
        for screen in self.screen_stack:
            for box in screen.query(Input):
                inputs[f"{{type(screen).__name__}}#{{box.id}}"] = box.value
        fleet_screen = self.screen_stack[1]
        json.dump({{"stack": [type(s).__name__ for s in self.screen_stack], "inputs": inputs,
                   "filter": fleet_screen.filter, "rows": len(self.monitor.state.replicas)}}, open(out, "w"))
        self.exit()

cluster = SimCluster(fleet, audit=AuditLog(os.environ["AUDIT"]))
try:
    App(Monitor(DemoSource(cluster)), 0.5, config=None).run()
finally:
    fleet.stop()
"""


def _typed(tmp_path, keys: bytes) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR",)}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", KVWATCH_CONFIG=os.devnull + ".none",
               OUT=str(tmp_path / "out.json"), AUDIT=str(tmp_path / "audit.jsonl"))
    run = run_in_pty(CHILD.format(dump_at=6.0), 120, 36, 9.0, env, keys=[(4.0, keys)], quit_key=None)
    assert (tmp_path / "out.json").exists(), run.output[-2000:]
    return json.loads((tmp_path / "out.json").read_text())


def test_filter_typed_at_full_speed_goes_to_the_filter(tmp_path) -> None:
    seen = _typed(tmp_path, b"/r2-1")
    assert seen["rows"] == 3  # the table had replicas to act on
    assert seen["stack"][1:] == ["FleetScreen"], seen  # no restart (r) confirm dialog
    assert seen["filter"] == "r2-1", seen
    assert seen["inputs"]["FleetScreen#filter"] == "r2-1"


def test_command_typed_at_full_speed_goes_to_the_prompt(tmp_path) -> None:
    seen = _typed(tmp_path, b":events")
    assert seen["rows"] == 3
    assert seen["stack"][1:] == ["FleetScreen", "PromptScreen"], seen  # no edit-args (e) form
    assert seen["inputs"]["PromptScreen#prompt-input"] == "events", seen


def test_command_and_enter_at_full_speed_runs_the_command(tmp_path) -> None:
    seen = _typed(tmp_path, b":events\r")
    assert seen["stack"][1:] == ["FleetScreen", "EventsScreen"], seen
    assert not (tmp_path / "audit.jsonl").exists() or "restart" not in (tmp_path / "audit.jsonl").read_text()

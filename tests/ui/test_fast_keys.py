"""Keys typed at full speed after `/` or `:` belong to the prompt, never to the fleet screen.

A real pty (tests/ui/ptyscreen.py): once the fleet table is up, the whole string is written in
one go, as from `tmux send-keys` or a paste, so the keys are queued before the prompt's input has
focus. The demo's simulated cluster is behind the app, so a key that leaked through as a hotkey
(`r` restart, `e` edit args, `s` scale) would open its mutation dialog. The child writes what is
on screen to $OUT as it changes; the test waits for the state it checks, never for a time.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Callable

from tests.ui.ptyscreen import PtyScreen

# The demo's pipeline in a child program; a timer writes what is on screen to $OUT (atomically).
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
import asyncio
GATE = asyncio.Event()  # set by SIGUSR1 (the test), see App.on_mount
fleet.start()

class App(KvwatchApp):
    CSS_PATH = os.path.join(os.getcwd(), "tui", KvwatchApp.CSS_PATH)  # a class defined in -c has no file

    def on_mount(self):  # Textual runs KvwatchApp.on_mount too (handlers run along the MRO)
        self.set_interval(0.1, self.dump)
        import asyncio, signal
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, GATE.set)  # before any key

    def dump(self):
        from textual.widgets import Input
        if len(self.screen_stack) < 2:
            return
        inputs = {}
        for screen in self.screen_stack:
            for box in screen.query(Input):
                inputs[f"{type(screen).__name__}#{box.id}"] = box.value
        fleet_screen = self.screen_stack[1]
        with open(out + ".tmp", "w") as f:
            json.dump({"stack": [type(s).__name__ for s in self.screen_stack], "inputs": inputs,
                       "filter": fleet_screen.filter, "rows": len(self.monitor.state.replicas),
                       "held": self.keyhold.held}, f)
        os.replace(out + ".tmp", out)

class Cluster(SimCluster):
    async def get_deployment(self, *a, **kw):  # a slow API server ($GATE): answers on SIGUSR1
        if os.environ.get("GATE"):
            await GATE.wait()
        return await super().get_deployment(*a, **kw)

cluster = Cluster(fleet, audit=AuditLog(os.environ["AUDIT"]))
try:
    App(Monitor(DemoSource(cluster)), 0.5, config=None).run()
finally:
    fleet.stop()
"""


def _typed(tmp_path, keys: bytes, handled: Callable[[dict], bool],
           meanwhile: Callable[[dict], bool] | None = None) -> dict:
    """What is on screen once `handled(state)` holds, after `keys` were written in one go to a
    dashboard showing its fleet. With `meanwhile`, the cluster's Deployment read answers only
    once `meanwhile(state)` holds (a slow API server, released by what is on screen)."""
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR",)}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", KVWATCH_CONFIG=os.devnull + ".none",
               OUT=str(out), AUDIT=str(tmp_path / "audit.jsonl"))
    if meanwhile is not None:
        env["GATE"] = "1"
    last: dict = {}

    def state() -> dict:
        try:
            last.update(json.loads(out.read_text()))
        except (OSError, ValueError):
            pass
        return last

    with PtyScreen(CHILD, 120, 36, env) as term:
        term.wait_for(lambda _: (s := state()) and s["rows"] == 3 and s["stack"][1:] == ["FleetScreen"],
                      120, "the fleet table with its 3 replicas")
        os.write(term.fd, keys)  # one write: every key is queued before the first is handled
        if meanwhile is not None:
            term.wait_for(lambda _: meanwhile(state()), 60, f"the keys {keys!r} while the read waits; last {last}")
            os.kill(term.pid, signal.SIGUSR1)  # the Deployment read answers now
        term.wait_for(lambda _: handled(state()), 60, f"the keys {keys!r} handled; last state {last}")
    return dict(last)


def test_filter_typed_at_full_speed_goes_to_the_filter(tmp_path) -> None:
    seen = _typed(tmp_path, b"/r2-1", lambda s: s["filter"] == "r2-1" or s["stack"][1:] != ["FleetScreen"])
    assert seen["rows"] == 3  # the table had replicas to act on
    assert seen["stack"][1:] == ["FleetScreen"], seen  # no restart (r) confirm dialog
    assert seen["filter"] == "r2-1", seen
    assert seen["inputs"]["FleetScreen#filter"] == "r2-1"


def test_command_typed_at_full_speed_goes_to_the_prompt(tmp_path) -> None:
    seen = _typed(tmp_path, b":events", lambda s: s["inputs"].get("PromptScreen#prompt-input") == "events"
                  or s["stack"][-1] not in ("FleetScreen", "PromptScreen"))
    assert seen["rows"] == 3
    assert seen["stack"][1:] == ["FleetScreen", "PromptScreen"], seen  # no edit-args (e) form
    assert seen["inputs"]["PromptScreen#prompt-input"] == "events", seen


def test_command_and_enter_at_full_speed_runs_the_command(tmp_path) -> None:
    seen = _typed(tmp_path, b":events\r", lambda s: s["stack"][-1] not in ("FleetScreen", "PromptScreen"))
    assert seen["stack"][1:] == ["FleetScreen", "EventsScreen"], seen
    assert not (tmp_path / "audit.jsonl").exists() or "restart" not in (tmp_path / "audit.jsonl").read_text()


def test_scale_count_and_enter_typed_before_the_prompt_opens_go_to_the_prompt(tmp_path) -> None:
    # `s` reads the Deployment before its prompt opens; on a slow API server the count and enter
    # typed meanwhile used to reach the fleet screen (enter: the detail screen; the prompt then
    # opened on top of it, empty, waiting)
    def handled(s: dict) -> bool:
        top = s["stack"][-1]
        return top not in ("FleetScreen", "PromptScreen") or (top == "PromptScreen" and s["stack"][-2] != "FleetScreen")

    def meanwhile(s: dict) -> bool:  # both keys kept for the prompt, or (the defect) acted on
        return s["held"] == 2 or s["stack"][-1] != "FleetScreen"

    seen = _typed(tmp_path, b"s4\r", handled, meanwhile)
    assert seen["stack"][1:] == ["FleetScreen", "ConfirmScreen"], seen  # the scale to 4, to confirm

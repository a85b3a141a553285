"""One label, one number: at one moment the fleet table's PRE/s, the diagnosis evidence's
"preemptions/s", the detail screen's "preempt N/s" and triage's "preemptions/s" of one replica
and `--json`'s are the same number (one window per signal, tui/core/signal_windows.py), and no evidence list
says one signal twice."""

from __future__ import annotations

import re

from tests.ui.conftest import prime
from tests.ui.scripted import ScriptedSource, gpu, page
from tui.app import KvwatchApp
from tui.core.export import fleet_json
from tui.core.model import Scrape
from tui.core.monitor import Monitor
from tui.screens.detail import DetailScreen
from tui.screens.triage import TriageScreen

NAME = "vllm-0"
# preemptions per 5 s poll: 30 per 30 s window (1.0/s over the window) while the last interval
# swings from 0 to 12 (0 to 2.4/s): a screen on another window shows another number
BURSTS = (3, 0, 9, 0, 6, 12)


class BurstySource(ScriptedSource):
    def __init__(self) -> None:
        super().__init__({NAME: "bursty", "vllm-1": "healthy"}, step=5.0)

    async def poll(self):
        out = await super().poll()
        total = float(sum(BURSTS[i % len(BURSTS)] for i in range(self.n)))
        out[0] = Scrape(self.t, NAME, page(0.97, 3, 12, total, 300.0 * self.n), gpu=gpu(92, 35), group="grp")
        return out


def _number(text: str, after: str) -> float:
    m = re.search(re.escape(after) + r"\s*([0-9.]+)", text)
    assert m, (after, text)
    return float(m.group(1))


async def test_every_screen_shows_one_preemption_rate_at_one_moment() -> None:
    app = KvwatchApp(Monitor(BurstySource()), 1.0, autostart=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await prime(pilot, 12)  # the last interval: 12 preemptions in 5 s (2.4/s); the window: 1.0/s
        view = next(v for v in app.monitor.state.replicas if v.name == NAME)
        assert view.verdict == "kv-pressure", view.finding.summary
        row = next(r for r in fleet_json(app.monitor.state)["replicas"] if r["name"] == NAME)  # --json's line
        as_json = [row["preemptions_per_s"]] + [_number(e["text"], "preemptions/s") for e in row["evidence"]
                                                if e["text"].startswith("preemptions/s")]
        table = app.screen.query_one("FleetTable")
        cell = float(table.get_cell(NAME, "preempt").plain)
        lines = [e.text for e in view.finding.evidence]
        evidence = _number(next(t for t in lines if t.startswith("preemptions/s")), "preemptions/s")
        # the detail screen (no refresh in between: the same moment)
        table.move_cursor(row=table.get_row_index(NAME))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        detail_text = str(app.screen.query_one("#evidence").render())
        detail = _number(detail_text, "preempt")
        detail_ev = _number(detail_text, "preemptions/s")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, TriageScreen)
        tri_text = app.screen._body.plain
        triage = [float(x) for x in re.findall(r"preemptions/s(?: \([^)]*\))? ([0-9.]+)", tri_text)]
        assert triage, tri_text
    numbers = {"table PRE/s": cell, "evidence": evidence, "detail": detail, "detail evidence": detail_ev,
               **{f"triage {i}": x for i, x in enumerate(triage)}, **{f"--json {i}": x for i, x in enumerate(as_json)}}
    assert set(numbers.values()) == {1.0}, (numbers, lines)


async def test_no_evidence_list_says_one_signal_twice() -> None:
    """Each replica's evidence has one line per signal: a rate and the count it rests on, a
    queue and its share waiting for capacity, GPU utilisation against its two marks."""
    src = ScriptedSource({"p": "pressure", "c": "compute", "k": "capped", "h": "healthy", "s": "stalled",
                          "f": "fault"}, step=5.0)
    app = KvwatchApp(Monitor(src), 1.0, autostart=False)
    async with app.run_test(size=(160, 45)) as pilot:
        for _ in range(10):
            await prime(pilot, 1)
            for v in app.monitor.state.replicas:
                texts = [e.text for e in v.finding.evidence if e.op != "info"]
                heads = [_head(t) for t in texts]
                dup = {h for h in heads if heads.count(h) > 1}
                assert not dup, (v.name, v.verdict, texts)


def _head(text: str) -> str:
    """The signal a line is about: its words before the first number ("preemptions/s",
    "waiting", "GPU util"); "... in the last 3 intervals" and "waiting for capacity" are the
    preemption and queue lines' words too."""
    words = re.split(r"\s[0-9(–]", text, maxsplit=1)[0]
    words = re.sub(r"^(SGLang |vLLM )", "", words)
    for family in ("preempt", "waiting", "GPU util"):
        if words.startswith(family):
            return family
    return words

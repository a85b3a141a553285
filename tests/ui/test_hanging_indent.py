"""Runbook and triage text wraps under its own indent at 80 columns: a step's description, an
evidence line or a `│` detail that runs past the width goes on under where it started, never back
at the left edge among the step numbers ("take it out of rotation ... (in-flight requests finish"
then "elsewhere)" at column 1 before)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from tests.ui.conftest import prime
from tests.ui.kube_app import until
from tests.ui.test_80x24 import HOT, demo_like_app
from tui.screens.triage import TriageScreen
from widgets.hanging import Hanging


def _lines(renderable, width: int) -> list[str]:
    console = Console(width=width, file=open("/dev/null", "w"), color_system=None)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get().splitlines()


def test_a_long_indented_line_wraps_under_its_indent_and_keeps_its_bar():
    t = Text("  4 · skip    Cordon\n       take it out of rotation before changing it (in-flight requests finish"
             " elsewhere)\n      │ KV capacity = 167,040 tokens (vLLM's kv_cache_size_tokens label, per engine)\n")
    out = _lines(Hanging(t), 40)
    assert out[0] == "  4 · skip    Cordon"
    body = [ln for ln in out[1:] if ln.strip() and "│" not in ln]
    assert len(body) >= 2 and all(ln.startswith("       ") and ln[7] != " " for ln in body), out
    bars = [ln for ln in out if "│" in ln]
    assert len(bars) >= 2 and all(ln.startswith("      │ ") for ln in bars), out
    assert " ".join(ln.replace("│", " ").strip() for ln in out if ln.strip()).split() == " ".join(
        t.plain.replace("│", " ").split()).split()  # nothing lost or reordered


def test_styles_survive_the_wrap():
    t = Text("   ")
    t.append("red words " * 6, style="red")
    segs = list(Console(width=20, color_system="truecolor").render(Hanging(t)))
    red = "".join(s.text if s.style is not None and s.style.color is not None else " " for s in segs)
    assert red.split() == ("red words " * 6).split()


async def test_the_runbook_at_80x24_wraps_under_the_steps_indent(tmp_path):
    app = demo_like_app(tmp_path, HOT)
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 3)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, TriageScreen) and app.screen.book is not None)
        await pilot.pause()
        lines = [s.text for s in app.screen._compositor.render_strips()]
        tail = [ln for ln in lines if "elsewhere)" in ln]  # step 4's description, wrapped at 80
        assert tail and tail[0].startswith(" " * 7), "\n".join(lines)

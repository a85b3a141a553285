"""`R` and `:report` write the report of the running session beside its recording and say where;
without a recording they say why not, and write nothing."""

from __future__ import annotations

from tests.gameday import SteppedDemo, SteppedDemoSource
from tests.ui.kube_app import until
from tui.app import KvwatchApp
from tui.core.cluster.audit import AuditLog
from tui.core.monitor import Monitor
from tui.core.record import Recorder
from tui.report_key import NOT_RECORDING
from tui.screens.prompt import PromptScreen


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_the_report_key_and_command_write_the_sessions_report(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    demo = SteppedDemo("long-prompts", replicas=2, seed=3, audit=AuditLog(tmp_path / "audit.jsonl"))
    rec = Recorder(str(tmp_path / "session.jsonl.gz"))
    app = KvwatchApp(Monitor(SteppedDemoSource(demo), on_scrapes=rec.write), 1.0, autostart=False)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            for _ in range(20):
                await app.refresh_once()
                await pilot.pause()
            assert any(v.verdict == "kv-pressure" for v in app.monitor.state.replicas)
            await pilot.press("R")
            said = await until(pilot, lambda: next((t for t in toasts(app) if t.startswith("report written: ")), None),
                               timeout=60, what=lambda: "; ".join(toasts(app)))
            first = said.removeprefix("report written: ")
            assert first.startswith(str(tmp_path / "session-report-")) and first.endswith(".html")
            page = open(first, encoding="utf-8").read()
            assert "kv-pressure" in page and "session.jsonl.gz" in page
            # `:report` does the same from the command line
            app._notifications.clear()
            await pilot.press("colon")
            await until(pilot, lambda: isinstance(app.screen, PromptScreen))
            await pilot.press(*"report", "enter")
            await until(pilot, lambda: any(t.startswith("report written: ") for t in toasts(app)), timeout=60,
                        what=lambda: "; ".join(toasts(app)))
    finally:
        rec.close()


async def test_without_a_recording_the_key_says_why_and_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    demo = SteppedDemo("long-prompts", replicas=1, seed=3, audit=AuditLog(tmp_path / "audit.jsonl"))
    app = KvwatchApp(Monitor(SteppedDemoSource(demo)), 1.0, autostart=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await app.refresh_once()
        await pilot.press("R")
        await until(pilot, lambda: NOT_RECORDING in toasts(app))
    assert not list(tmp_path.glob("*report*"))

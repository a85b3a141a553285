"""`kvwatch --prometheus URL --json` against a misbehaving Prometheus API (tests/promfaults.py):
a body trickled a byte at a time is cut at --prom-timeout (a total deadline), an answer too large
or with far more points than asked for is refused with a clear error while the run goes on and
--duration is honoured, and a partial answer (`warnings`) is shown and leaves the missing pods
stale, not down."""

from __future__ import annotations

import time
from pathlib import Path

from tests.faultserver import run_cli
from tests.promfaults import PromFaults


def _errors(lines: list[dict]) -> list[str]:
    return [x["error"] for x in lines if "error" in x]


async def test_a_trickled_body_is_cut_at_the_prom_timeout(tmp_path: Path) -> None:
    async with PromFaults(lifetime=60) as pf:
        # a byte a second: never idle as long as the timeout, so only a total deadline cuts it
        url = await pf.add("trickle", every=1.0)
        t0 = time.monotonic()
        run = await run_cli(str(tmp_path), "--prometheus", url, "--json", "--duration", "12", "--interval", "1",
                            "--prom-timeout", "2.5", timeout=40)
        took = time.monotonic() - t0
    assert run.rc is not None, f"still running after 40 s: {run.out[-500:]!r} {run.err[-500:]!r}"
    assert "Traceback" not in run.err
    errs = _errors(run.json_lines())
    cut = [e for e in errs if "did not answer within 2.5s" in e]
    assert len(cut) >= 3, errs  # every refresh tried again, none wedged
    assert all(e in cut or "before --duration ended" in e for e in errs), errs
    assert took < 25, took


async def test_a_huge_answer_is_refused_and_memory_stays_bounded(tmp_path: Path) -> None:
    async with PromFaults(lifetime=90) as pf:
        url = await pf.add("huge", mb=200)
        t0 = time.monotonic()
        run = await run_cli(str(tmp_path), "--prometheus", url, "--json", "--duration", "5", "--interval", "1",
                            "--prom-timeout", "30", timeout=60)
        took = time.monotonic() - t0
    assert run.rc is not None and "Traceback" not in run.err, run.err[-2000:]
    errs = _errors(run.json_lines())
    assert errs and any("MiB" in e and "more than" in e and "--prom-max-mib" in e for e in errs), errs
    assert run.peak_rss_mb < 450, f"peak RSS {run.peak_rss_mb:.0f} MB"
    assert took < 20, took  # --duration 5 honoured (plus start-up)


async def test_a_range_answer_with_too_many_points_is_refused_and_live_goes_on(tmp_path: Path) -> None:
    async with PromFaults(lifetime=60) as pf:
        url = await pf.add("points", points=100_000)
        run = await run_cli(str(tmp_path), "--prometheus", url, "--json", "--duration", "8", "--interval", "1",
                            timeout=45)
    assert run.rc == 0 and "Traceback" not in run.err, run.err[-2000:]
    lines = run.json_lines()
    errs = _errors(lines)
    assert errs and "points" in errs[0] and "100000" in errs[0], errs
    live = [x for x in lines if "error" not in x]
    assert live and [r["name"] for r in live[-1]["replicas"]] == ["vllm-a"], live[-1:]
    assert live[-1]["replicas"][0]["state"] == "ok"


async def test_a_partial_answer_shows_its_warning_and_leaves_missing_pods_stale(tmp_path: Path) -> None:
    async with PromFaults(lifetime=60) as pf:
        url = await pf.add("partial", full=2, warning="store 10.0.0.7:10901 unavailable \x1b[31m")
        run = await run_cli(str(tmp_path), "--prometheus", url, "--json", "--duration", "5", "--interval", "0.5",
                            timeout=45)
    assert run.rc == 0, run.err[-2000:]
    lines = [x for x in run.json_lines() if "error" not in x]
    last = lines[-1]
    by = {r["name"]: r for r in last["replicas"]}
    assert by["vllm-a"]["state"] == "ok"
    assert by["vllm-b"]["state"] == "stale", by["vllm-b"]  # not down: the store did not answer
    assert not by["vllm-b"]["error"] and by["vllm-b"].get("age_s", 0) > 0, by["vllm-b"]
    notes = " ".join(last.get("source_warnings") or [])
    assert "store 10.0.0.7:10901 unavailable" in notes and "\x1b" not in notes, last
    assert "partial" in notes


async def test_the_tui_flashes_a_partial_answer_and_keeps_the_missing_pod(tmp_path: Path) -> None:
    from tests.ui.kube_app import notes, until
    from tui.app import KvwatchApp
    from tui.core.monitor import Monitor
    from tui.core.sources.prometheus import PrometheusSource

    async with PromFaults(lifetime=60) as pf:
        url = await pf.add("partial", full=2, warning="store 10.0.0.7:10901 unavailable")
        app = KvwatchApp(Monitor(PrometheusSource(url, gpu=False)), 0.3)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: any("partial answer" in n for n in notes(app)), timeout=20,
                        what=lambda: notes(app))
            assert any("store 10.0.0.7:10901 unavailable" in n for n in notes(app))
            views = {v.name: v for v in app.monitor.state.replicas}
            assert views["vllm-b"].state == "stale" and not views["vllm-b"].error

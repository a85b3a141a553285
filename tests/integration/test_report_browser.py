"""The HTML report in a real headless browser (Debian's chromium): it loads with no network
request but its own file, no console error or failed load, draws its pictures at desktop and at
phone width without the page itself overflowing sideways, follows the dark preference and prints
on white. Skipped only where no chromium is installed (`apt-get install chromium`).

With KVWATCH_REPORT_SHOTS=DIR the pages are also captured there as PNG (how the README's
screenshots under screenshots/report/ are taken)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import Browser, chromium
from tests.unit.test_report import audit_log, incident
from tui.cli import main

pytestmark = pytest.mark.skipif(chromium() is None, reason="chromium is not installed")
COMMITTED = Path(__file__).resolve().parents[2] / "screenshots" / "report" / "gameday.html"


def pages(tmp_path: Path) -> list[Path]:
    path, t0 = incident(tmp_path)
    out = tmp_path / "incident.html"
    assert main(["report", str(path), "--audit", str(audit_log(tmp_path / "audit.jsonl", t0)), "-o", str(out)]) == 0
    return [out] + ([COMMITTED] if COMMITTED.exists() else [])


async def test_the_html_report_renders_offline_in_chromium(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    shots = os.environ.get("KVWATCH_REPORT_SHOTS")
    async with Browser() as b:
        for page in pages(tmp_path):
            url = page.as_uri()
            for width in (1280, 390):
                load = await b.open(url, width)
                assert load.requests == [url], load.requests  # the page, and nothing else
                assert not load.errors, load.errors
                figures = await b.evaluate(
                    "[...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect().width)")
                assert len(figures) == 5 and all(w > 300 for w in figures), figures
                marks = await b.evaluate("document.querySelectorAll('figure svg rect, figure svg polyline').length")
                assert marks > 10
                # the page does not scroll sideways: wide tables and pictures scroll in their own box
                over = await b.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                assert over <= 0, f"{page.name} at {width}px overflows by {over}px"
                title = await b.evaluate("document.querySelector('h1').textContent")
                assert title.startswith("Incident report: ")
                if shots:
                    await b.screenshot(Path(shots) / f"{page.stem}-{width}.png")
            dark = await b.open(url, 1280, dark=True)
            assert not dark.errors
            bg = await b.evaluate("getComputedStyle(document.body).backgroundColor")
            assert bg == "rgb(15, 17, 21)", bg
            if shots:
                await b.screenshot(Path(shots) / f"{page.stem}-dark.png", full_page=False)
            await b.print_media()
            bg = await b.evaluate("getComputedStyle(document.body).backgroundColor")
            assert bg == "rgb(255, 255, 255)", bg

"""80x24 (an SSH session on a bastion): fleet totals, `?` and `q` stay visible, the banner keeps
"enter: evidence", detail plots too small to read become numbers, the edit form's help wraps.
Snapshots of the fleet, detail, edit form and a confirm dialog at 80x24, each with a flash
message showing (deterministic: the stepped simulated cluster, UTC)."""

from __future__ import annotations

from textual.widgets import Static
from widgets.footer import footer_keys

from tests.ui.conftest import PROFILES, prime
from tests.ui.scripted import ScriptedSource
from tests.ui.test_mitigation_snapshots import DEP, edit_form_after_preset, sim
from tui.app import KvwatchApp
from tui.core.cluster.base import EditArgsRequest
from tui.core.config import Config
from tui.core.monitor import Monitor
from tui.screens.confirm import ConfirmScreen
from tui.screens.detail import DetailScreen
from widgets.header import FleetHeader, PressureBanner

SIZE = (80, 24)
FLASH = "saved /home/op/.local/share/kvwatch/screenshots/kvwatch_2026-01-01.svg"
HOT = {f"llama-8b-7d9f-{c}{c}{c}{c}{c}": "pressure" for c in "abcd"} | {"llama-8b-ok": "healthy"}


def demo_like_app(tmp_path, profiles=None) -> KvwatchApp:
    """The scripted fleet under a demo-length source name, with the simulated cluster behind the
    mitigation keys (so the footer is as full as in `kvwatch demo`)."""
    src = ScriptedSource(dict(profiles or PROFILES))
    src.description = "demo: 5 simulated replicas · long-prompts"
    app = KvwatchApp(Monitor(src), 1.0, autostart=False, config=Config(bell=False))
    app.cluster = sim(tmp_path)[1]
    return app


async def test_fleet_keeps_totals_banner_hint_help_and_quit(tmp_path):
    app = demo_like_app(tmp_path, HOT)
    async with app.run_test(size=SIZE) as pilot:
        await prime(pilot, 3)
        first = str(app.screen.query_one(FleetHeader).text).split("\n")[0]
        assert "run " in first[:78] and "wait " in first[:78], first
        banner = str(app.screen.query_one(PressureBanner).render())
        assert "enter: evidence" in banner[:78], banner
        keys = {k.key: k for k in footer_keys(app.screen)}
        for key in ("q", "question_mark"):
            assert key in keys, sorted(keys)
            region = keys[key].region
            assert region.width > 0 and region.right <= SIZE[0], (key, region)
            covered = [k.key for k in keys.values() if k is not keys[key] and k.region.overlaps(region)]
            assert covered == [], (key, covered)  # e.g. under the docked "^p palette"


async def test_header_keeps_the_fleet_preemption_rate_with_its_unit(tmp_path):
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await prime(pilot, 4)
        header = app.screen.query_one(FleetHeader)
        first = str(header.text).split("\n")[0]
        shown = first[:header.content_size.width - 1]  # the last cell is the ellipsis when cut
        assert "preempt " in shown and "/s" in shown[shown.index("preempt "):], (shown, first)


async def test_detail_shows_numbers_when_plots_would_be_unreadable(tmp_path):
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await prime(pilot, 4)
        await app.push_screen(DetailScreen("llama-8b-7d9f-abcde"))
        await pilot.pause()
        numbers = app.screen.query_one("#plot-numbers", Static)
        assert numbers.display and not app.screen.query_one("#plots").display
        text = str(numbers.render())
        assert "KV usage" in text and "0.97" in text, text
    app = demo_like_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:  # room enough: plots
        await prime(pilot, 4)
        await app.push_screen(DetailScreen("llama-8b-7d9f-abcde"))
        await pilot.pause()
        assert app.screen.query_one("#plots").display and not app.screen.query_one("#plot-numbers").display


async def test_edit_form_help_is_readable_at_80_columns(tmp_path):
    fleet, cluster = sim(tmp_path)
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        form = await edit_form_after_preset(pilot, fleet, cluster)
        notes = [n for n in form.query(".note") if n.display and "engine default" in str(n.render())]
        assert notes, [str(n.render()) for n in form.query(".note")]
        assert all(n.region.width >= 30 for n in notes), [n.region for n in notes]


def _snapshot(snap_compare, tmp_path, setup) -> bool:
    """Snapshot at 80x24 after `setup(pilot, fleet, cluster)`, with a flash message showing."""
    fleet, cluster = sim(tmp_path)

    async def run_before(pilot):
        await prime(pilot, 4)
        await setup(pilot, fleet, cluster)
        pilot.app.notify(FLASH, timeout=60)
        await pilot.pause()

    return snap_compare(demo_like_app(tmp_path), terminal_size=SIZE, run_before=run_before)


async def _nothing(pilot, fleet, cluster) -> None:
    pass


async def _detail(pilot, fleet, cluster) -> None:
    await pilot.app.push_screen(DetailScreen("llama-8b-7d9f-abcde"))


async def _confirm(pilot, fleet, cluster) -> None:
    plan = await cluster.plan_edit_args(EditArgsRequest(fleet.namespace, DEP, {}, preset="seqs-50"))
    await pilot.app.push_screen(ConfirmScreen(plan))


def test_fleet_80x24_snapshot(snap_compare, tmp_path):
    assert _snapshot(snap_compare, tmp_path, _nothing)


def test_detail_80x24_snapshot(snap_compare, tmp_path):
    assert _snapshot(snap_compare, tmp_path, _detail)


def test_edit_form_80x24_snapshot(snap_compare, tmp_path):
    assert _snapshot(snap_compare, tmp_path, edit_form_after_preset)


def test_confirm_80x24_snapshot(snap_compare, tmp_path):
    assert _snapshot(snap_compare, tmp_path, _confirm)

"""`u` on a replica: its GPU panel (memory and utilisation bars, temperature and power, throttle
reasons in words, the processes using each GPU), from a DCGM exporter page served on loopback,
from the demo's simulated fleet, and from NVML faked at the pynvml edge; "no data" with the reason
where a source gave nothing; every label escaped; it fits 80x24; esc goes back."""

from __future__ import annotations

import re

from textual.widgets import Static
from widgets.footer import footer_keys

from tests.faultserver import FaultServer
from tests.ui.conftest import prime
from tests.ui.kube_app import until
from tests.ui.scripted import ScriptedSource
from tests.unit.test_gpu_samplers import h100
from tests.unit.test_gpu_view import DCGM_PAGE, GIB, PowerNvml
from tui.app import KvwatchApp
from tui.core.cluster.sim import SimCluster
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet
from tui.core.sources.demo import DemoSource
from tui.core.sources.direct import DirectSource, Target
from tui.core.sources.gpu.nvml import NvmlSampler
from tui.screens.detail import DetailScreen
from tui.screens.fleet import FleetScreen
from tui.screens.gpu import GpuScreen
from widgets.fleet_table import FleetTable

ESC = re.compile(r"[\x1b\x07\x9b]")
# a hostile model name and container: escape sequences and markup must reach the screen as text
HOSTILE = DCGM_PAGE.replace('modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",container="vllm"',
                            'modelName="NVIDIA H100 \\u001b[2J[b]x[/b]",Hostname="node-a",container="vllm\\u0007"')


def shown(screen: GpuScreen) -> str:
    return (str(screen.query_one("#gpu-title", Static).render()) + "\n"
            + str(screen.query_one("#gpu-text", Static).render()))


async def open_u(pilot, name: str) -> GpuScreen:
    app = pilot.app
    table = app.screen.query_one(FleetTable)
    table.move_cursor(row=table.get_row_index(name))
    await pilot.press("u")
    return await until(pilot, lambda: isinstance(app.screen, GpuScreen) and app.screen)


async def test_u_on_a_dcgm_page_shows_bars_values_throttle_words_and_the_pod() -> None:
    async with FaultServer(lifetime=60) as fs:
        vllm = await fs.add("healthy")
        dcgm = await fs.add("text", text=HOSTILE)
        src = DirectSource([Target("vllm-a", vllm, gpu_url=dcgm), Target("vllm-b", vllm)], timeout=3.0)
        app = KvwatchApp(Monitor(src), 0.5)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: {r.name for r in app.monitor.state.replicas if r.state == "ok"}
                        == {"vllm-a", "vllm-b"}, timeout=20)
            await until(pilot, lambda: app.screen.query_one(FleetTable).row_count == 2)
            screen = await open_u(pilot, "vllm-a")
            text = await until(pilot, lambda: "GPU 1" in shown(screen) and shown(screen), what=lambda: shown(screen))
            assert "2 GPU(s) via DCGM exporter" in text and "(simulated)" not in text
            mem0 = next(line for line in text.splitlines() if "memory" in line)
            assert "█" in mem0 and "░" in mem0 and " 89%" in mem0 and "70.3/79.1 GiB" in mem0, mem0
            assert "power 612 W" in text  # 612.5 rounds to even
            assert "throttle power cap, HW slowdown, thermal (hardware)" in text
            assert "pod inference/vllm-a  container vllm" in text
            # GPU 1: no util, temperature or power series, and no pod mapped: said, never 0
            gpu1 = text.split("GPU 1", 1)[1]
            assert "util   no data (DCGM exporter did not report it)" in gpu1
            assert "temp no data   power no data" in gpu1
            assert "processes no data (DCGM exporter lists none for this GPU)" in gpu1
            assert "throttle none active" in gpu1
            assert not ESC.search(text) and "[b]x[/b]" in text  # label values shown as text
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen))
            # the replica without a GPU page: no data, and why
            screen = await open_u(pilot, "vllm-b")
            text = await until(pilot, lambda: "local driver:" in shown(screen) and "asking" not in shown(screen)
                               and shown(screen), what=lambda: shown(screen))
            assert "no data: no DCGM exporter page given for this replica (--gpu-url)" in text
            assert "█" not in text and " 0%" not in text


async def test_u_on_the_demo_shows_the_simulated_gpus_and_a_throttled_node() -> None:
    fleet = SimFleet("throttled-node", replicas=2, speed=10.0, seed=1)
    fleet.start()
    try:
        app = KvwatchApp(Monitor(DemoSource(SimCluster(fleet))), 0.25)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: len([r for r in app.monitor.state.replicas if r.pod is not None]) == 2,
                        timeout=30)
            victim = app.monitor.state.replicas[0]
            fleet.set_node_fault(victim.pod.node, throttle_mask=0x40 | 0x4)
            await until(pilot, lambda: app.screen.query_one(FleetTable).row_count == 2)
            screen = await open_u(pilot, victim.name)
            text = await until(pilot, lambda: "thermal (hardware)" in shown(screen) and shown(screen),
                               timeout=20, what=lambda: shown(screen))
            assert "1 GPU(s) via DCGM exporter (simulated), matched by its own exporter page" in text
            assert f"node {victim.pod.node}" in text and "NVIDIA" in text
            assert "power cap, thermal (hardware)" in text
            assert f"pod inference/{victim.name}  container vllm" in text
            assert "memory " in text and "█" in text and "GiB" in text and "temp " in text and " W" in text
            # from the detail screen too, for its replica; esc comes back to it
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, FleetScreen))
            await pilot.press("enter")
            detail = await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen)
            await pilot.press("u")
            screen = await until(pilot, lambda: isinstance(app.screen, GpuScreen) and app.screen)
            assert screen.replica == detail.replica
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is detail)
    finally:
        fleet.stop()


class NvmlSource(ScriptedSource):
    """The scripted replicas, their GPUs read through NvmlSampler from a pynvml-shaped fake."""

    def __init__(self, lib) -> None:
        super().__init__({"local-0": "healthy"})
        self.sampler = NvmlSampler(lib)

    async def poll(self):
        from dataclasses import replace

        return [replace(s, gpu=self.sampler.sample()) for s in await super().poll()]


async def test_u_with_nvml_lists_pids_and_their_memory() -> None:
    lib = PowerNvml([h100(power_mw=601170, limit_mw=700000, reasons=0x1, procs=[(1234, 70 * GIB), (4242, None)])])
    app = KvwatchApp(Monitor(NvmlSource(lib)), 1.0, autostart=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 2)
        await pilot.press("u")
        screen = await until(pilot, lambda: isinstance(app.screen, GpuScreen) and app.screen)
        text = shown(screen)
        assert "1 GPU(s) via local NVML" in text and "temp 61 C   power 601 W of 700 W limit" in text
        assert "throttle none active" in text  # gpu_idle is not throttling
        assert "pid 1234  python3 -m vllm\\x1b[2J  70.0 GiB" in text
        assert "pid 4242  memory not reported" in text
        assert not ESC.search(text)


async def test_u_with_no_gpu_source_says_no_data_and_why() -> None:
    class NoGpu(ScriptedSource):
        async def poll(self):
            from dataclasses import replace

            return [replace(s, gpu=None) for s in await super().poll()]

    app = KvwatchApp(Monitor(NoGpu({"r0": "healthy", "r1-down": "down"})), 1.0, autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await prime(pilot, 2)
        screen = await open_u(pilot, "r0")
        text = shown(screen)
        assert "no data: the source (scripted: 2 replicas) gave no GPU series for it" in text
        assert "GiB" not in text and "0%" not in text
        await pilot.press("question_mark")  # the help lists this screen's keys
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        rows = {(k, d) for k, d, _ in app.screen.rows}
        assert ("esc", "Back") in rows, sorted(rows)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        screen = await open_u(pilot, "r1-down")  # never scraped: nothing to show, and why
        assert "no data: no good scrape of this replica yet" in shown(screen)


async def test_the_gpu_panel_fits_80x24() -> None:
    async with FaultServer(lifetime=60) as fs:
        vllm = await fs.add("healthy")
        dcgm = await fs.add("text", text=DCGM_PAGE)
        app = KvwatchApp(Monitor(DirectSource([Target("vllm-a", vllm, gpu_url=dcgm)], timeout=3.0)), 0.5)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.screen.query_one(FleetTable).row_count == 1, timeout=20)
            await until(pilot, lambda: app.monitor.state.replicas[0].state == "ok", timeout=20)
            screen = await open_u(pilot, "vllm-a")
            await until(pilot, lambda: "GPU 1" in shown(screen))
            await pilot.pause()
            assert screen.query_one("#gpu-text", Static).size.width <= 78
            rendered = shown(screen).splitlines()
            assert max(len(line) for line in rendered) <= 78, max(rendered, key=len)
            # GPU 0's block, up to its processes, is on screen without scrolling
            body = screen.query_one("#gpu-body")
            block = shown(screen).split("\nGPU 1")[0].splitlines()
            assert len(block) - 1 <= body.size.height and any("processes" in line for line in block)
            keys = sorted(k.key for k in footer_keys(screen) if k.region.right <= 80 and k.region.width)
            assert {"escape", "q", "question_mark"} <= set(keys), keys


async def test_after_a_failed_scrape_the_panel_says_its_values_are_the_last_good_ones() -> None:
    class Fails(ScriptedSource):
        async def poll(self):
            from dataclasses import replace

            out = await super().poll()
            return out if self.n <= 2 else [replace(s, sample=None, gpu=None, error="connection refused") for s in out]

    app = KvwatchApp(Monitor(Fails({"r0": "fault"})), 1.0, autostart=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await prime(pilot, 3)
        await pilot.press("u")
        screen = await until(pilot, lambda: isinstance(app.screen, GpuScreen) and app.screen)
        text = shown(screen)
        assert "the last scrape failed: values of the last good scrape, 5s ago" in text, text
        assert "throttle thermal (hardware)" in text

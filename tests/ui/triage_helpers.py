"""Sources and a simulated cluster for the triage / runbook / capacity screen tests.

The metrics are scripted (deterministic, as in scripted.py); what only a cluster knows (pods,
owners, logs, events, rollouts, args) comes from the demo's real simulated cluster, stepped.
"""

from __future__ import annotations

from pathlib import Path

from tests.ui.scripted import TTFT_BOUNDS, ScriptedSource, gpu, page
from tui.app import KvwatchApp
from tui.core.cluster.audit import AuditLog
from tui.core.cluster.base import EditArgsRequest
from tui.core.cluster.sim import SimCluster
from tui.core.diagnosis import Thresholds
from tui.core.model import EngineSample, Histogram, PodInfo, Sample, Scrape
from tui.core.monitor import Monitor
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9
DEP = "llama-8b"
TOK_BOUNDS = (100.0, 400.0, 1000.0, 2000.0, 5000.0, float("inf"))
# the real V0 log of shared/reference/engine-args.md: "# GPU blocks: 5691", block size 16
V0_LOG_CACHE = {"num_gpu_blocks": "5691", "block_size": "16", "gpu_memory_utilization": "0.9"}


def tok_hist(per_bucket: tuple[float, ...]) -> Histogram:
    """Cumulative histogram over TOK_BOUNDS from per-bucket counts."""
    cum, total = [], 0.0
    for c in per_bucket:
        total += c
        cum.append(total)
    return Histogram(TOK_BOUNDS, tuple(cum), 0.0, total)


def sized_page(n: int, cache: dict[str, str]) -> Sample:
    """A pressured replica whose request-length histograms grow by 20 requests per poll: prompts
    mostly 1000-2000 tokens, outputs mostly 100-400."""
    base = page(0.97, 3, 12, 4.0 * n, 300.0 * n)
    eng = base.engines["0"]
    hists = dict(eng.hists)
    hists["prompt_len"] = tok_hist((0, 0, 2 * n, 18 * n, 0, 0))
    hists["gen_len"] = tok_hist((0, 18 * n, 2 * n, 0, 0, 0))
    return Sample(engines={"0": EngineSample(eng.values, hists)}, generation="v1", model_name="llama-8b",
                  cache_config=cache)


class TriageSource(ScriptedSource):
    """ScriptedSource plus profiles for these tests and the pods of a (simulated) cluster:
    `recovering` (calm for `calm_for` polls, pressure for `recover_after`, then clean), `sized` (pressure with
    request-length histograms and cache_config labels)."""

    def __init__(self, profiles: dict[str, str], pods: dict[str, PodInfo] | None = None, *,
                 recover_after: int = 6, calm_for: int = 0, cache: dict[str, str] | None = None, **kw) -> None:
        super().__init__(profiles, **kw)
        self.calm_for = calm_for
        self.pods = pods or {}
        self.recover_after = recover_after
        self.cache = dict(cache or V0_LOG_CACHE)

    async def poll(self):
        base = {s.replica: s for s in await super().poll()}
        out = []
        n = self.n
        for name, prof in self.profiles.items():
            if prof == "recovering":
                # calm for `calm_for` polls (the latency baseline), pressure, then clean
                k = min(max(n - self.calm_for, 0), self.recover_after)  # preemptions stop when pressure ends
                pressured = self.calm_for < n <= self.calm_for + self.recover_after
                slow = 10 * k  # TTFT: 10 requests a poll, ~4 s under pressure, ~80 ms otherwise
                fast = 10 * n - slow
                ttft = (0, fast, fast, fast, fast, fast, fast + slow, fast + slow)
                s = Scrape(self.t, name, page(0.97 if pressured else 0.4, 3 if pressured else 30,
                                              12 if pressured else 0, 4.0 * k, 300.0 * n, ttft),
                           gpu=gpu(92, 35 if pressured else 70), group="grp")
            elif prof == "sized":
                s = Scrape(self.t, name, sized_page(n, self.cache), gpu=gpu(92, 35), group="grp")
            else:
                s = base[name]
            pod = self.pods.get(name)
            if pod is not None:
                s = Scrape(s.ts, s.replica, s.sample, s.error, gpu=s.gpu, pod=pod, group=pod.owner_name)
            out.append(s)
        return out


def app_for(source: ScriptedSource, cluster: SimCluster | None = None, thresholds: Thresholds | None = None,
            **kw) -> KvwatchApp:
    app = KvwatchApp(Monitor(source, thresholds=thresholds), 1.0, autostart=False, **kw)
    if cluster is not None:
        app.cluster = cluster  # what `kvwatch demo` / kube mode provide through the source
    return app


def sim_cluster(tmp_path: Path, scenario: str = "steady", replicas: int = 2) -> tuple[SimFleet, SimCluster]:
    f = SimFleet(scenario, replicas=replicas, seed=3, start_time=T0)
    return f, SimCluster(f, audit=AuditLog(tmp_path / "audit.jsonl"), load_delay_s=30)


async def roll_out(c: SimCluster, ns: str, changes: dict) -> None:
    """Edit the Deployment's args through the cluster and wait for the rollout to finish."""
    plan = await c.plan_edit_args(EditArgsRequest(ns, DEP, changes))
    assert plan.ok, plan.errors
    assert (await c.apply(plan)).ok
    for _ in range(60):
        if (await c.rollout_status(ns, DEP)).finished:
            return
        await c.sleep(5)
    raise AssertionError("rollout did not finish")


async def open_on(pilot, name: str, key: str) -> None:
    """Select `name` on the fleet screen, press `key`, and wait for the screen's cluster reads."""
    table = pilot.app.screen.query_one("FleetTable")
    row = table.get_row_index(name)  # by the row key (the replica name): a long name is cut on screen
    table.move_cursor(row=row)
    await pilot.pause()
    await pilot.press(key)
    await settle(pilot)


async def settle(pilot) -> None:
    """Let the workers (cluster reads, RBAC check) finish, then refresh once so the view redraws."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.app.refresh_once()
    await pilot.pause()


__all__ = ["DEP", "T0", "TTFT_BOUNDS", "TriageSource", "app_for", "open_on", "roll_out", "settle", "sim_cluster",
           "tok_hist"]

"""Labelled synthetic traces of every verdict, for the accuracy benchmark and the tests.

Each trace is a sequence of phases; a phase says what the replica is doing (KV usage, queue,
preemption rate, token progress, GPU and API-server CPU) and which verdict a careful SRE would
give it. Values carry noise (Poisson counts, jittered gauges, transient queue blips), and the
suite mixes look-alikes on purpose: KV high without preemption, GPU memory at 90% on an idle
pre-allocated pool, a lone preemption, a queue held by the concurrency cap, a wedged engine at
100% GPU util. Pages are produced in three vLLM dialects (newest V1, 0.8-era V1, V0) and
written in the scrape-log format, so the benchmark runs the whole path: log -> parser ->
history -> diagnosis, exactly like `kvwatch diagnose`.

Phase boundaries are the ground-truth onsets. "down" is labelled from `stale_s` after the
first failed scrape (before that the replica is stale and keeps its last verdict); the scrapes
in between are unlabelled (None).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Iterator

from tui.core.model import EngineSample, GpuDevice, GpuSample, Histogram, PodInfo, Sample, Scrape
from tui.core.record.render import render_sample

INF = math.inf
TTFT_B = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
          20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, INF)
ITL_B = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
         40.0, 80.0, INF)
E2E_B = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
         480.0, 960.0, 1920.0, 7680.0, INF)
TOK_B = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, INF)
ITER_B = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, INF)
GPU_TOTAL = 80 * 1024**3


@dataclass(frozen=True)
class Phase:
    label: str | None  # the verdict a careful SRE gives this phase (None: not scored)
    duration: float
    kv: tuple[float, float] = (0.40, 0.40)  # start, end (linear over the phase)
    running: tuple[float, float] = (16.0, 16.0)
    pinned: int | None = None  # running held exactly at this cap
    waiting: tuple[float, float] = (0.0, 0.0)
    deferred_share: float = 0.0
    blips: float = 0.04  # chance per scrape of a transient 1-2 request queue
    preempt_rate: float = 0.0  # per second
    req_rate: float = 4.0
    gen_tps: float = 900.0
    steps_per_s: float = 25.0
    progress: bool = True  # False: counters frozen (wedged engine)
    prompt_len: float = 600.0
    max_tokens: float = 256.0
    ttft: float = 0.15
    itl: float = 0.03
    gpu_mem_pct: float = 90.0  # pre-allocated pool: high whatever the KV usage
    gpu_util: tuple[float, float] = (50.0, 50.0)
    throttle: tuple[str, ...] = ()
    ecc: float = 0.0
    cpu: float = 0.30  # API-server cores
    swapped: float = 0.0  # V0 swap-mode preemption
    down: str | None = None  # scrape error text: the endpoint does not answer


@dataclass(frozen=True)
class Scenario:
    name: str
    phases: tuple[Phase, ...]
    dialect: str = "v1"  # "v1", "v1-early", "v0"
    interval: float = 5.0
    gpu: bool = True  # GPU data available
    cpu_metric: bool = True  # process_cpu_seconds_total exposed (absent with --api-server-count > 1)
    max_num_seqs: int | None = None  # exposed to kvwatch (cache_config label) when set
    stale_s: float = 15.0  # the history's stale window (Windows.stale_s)
    tags: tuple[str, ...] = ()

    @property
    def duration(self) -> float:
        return sum(p.duration for p in self.phases)

    def onsets(self, t0: float = 0.0) -> list[tuple[float, str]]:
        """(time, verdict) where each labelled phase begins (down: after the stale window)."""
        out, t, prev = [], t0, None
        for p in self.phases:
            start = t + (self.stale_s if p.down else 0.0)
            if p.label is not None and p.label != prev:
                out.append((start, p.label))
            prev = p.label if p.label is not None else prev
            t += p.duration
        return out


@dataclass
class _Counters:
    preempt: float = 0.0
    gen: float = 0.0
    prompt: float = 0.0
    reqs: float = 0.0
    cpu: float = 0.0
    hists: dict = field(default_factory=dict)  # canon -> [bounds, counts list, sum, count]


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, int(round(rng.gauss(lam, math.sqrt(lam)))))
    k, p, limit = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _observe(c: _Counters, canon: str, bounds: tuple, values: list[float]) -> None:
    h = c.hists.get(canon)
    if h is None:
        h = c.hists[canon] = [bounds, [0.0] * len(bounds), 0.0, 0.0]
    counts = h[1]
    for v in values:
        for i, b in enumerate(bounds):
            if v <= b:
                for j in range(i, len(bounds)):
                    counts[j] += 1
                break
        h[2] += v
        h[3] += 1


def _lerp(a: tuple[float, float], f: float) -> float:
    return a[0] + (a[1] - a[0]) * f


def generate(scn: Scenario, seed: int = 0, t0: float = 1_750_000_000.0) -> Iterator[tuple[Scrape, str | None]]:
    """(scrape, label) per scrape interval. Scrapes carry a Sample and the page text (`raw`) in
    the scenario's dialect; failed scrapes carry `error`."""
    rng = random.Random(f"{scn.name}:{seed}")
    c = _Counters(cpu=rng.uniform(50, 500))
    ts = t0
    down_since: float | None = None
    cache = {"block_size": "16", "num_gpu_blocks": "27000", "gpu_memory_utilization": "0.9"}
    if scn.max_num_seqs:
        cache["max_num_seqs"] = str(scn.max_num_seqs)
    phase_start = t0
    for ph in scn.phases:
        end = phase_start + ph.duration
        while ts < end - 1e-9:
            f = (ts - phase_start) / ph.duration if ph.duration else 0.0
            dt = scn.interval
            if ph.down:
                down_since = ts if down_since is None else down_since
                label = ph.label if ts - down_since >= scn.stale_s else None
                yield Scrape(ts=ts, replica=scn.name, error=ph.down), label
                ts += dt
                continue
            down_since = None
            # counters over the interval that ends now
            if ph.progress:
                rq = _poisson(rng, ph.req_rate * dt)
                c.reqs += rq
                c.gen += _poisson(rng, ph.gen_tps * dt) if ph.gen_tps * dt < 30 else max(
                    0.0, round(rng.gauss(ph.gen_tps * dt, 0.05 * ph.gen_tps * dt)))
                c.prompt += sum(rng.lognormvariate(math.log(ph.prompt_len), 0.6) for _ in range(rq))
                steps = _poisson(rng, ph.steps_per_s * dt)
                _observe(c, "iteration_tokens", ITER_B,
                         [rng.lognormvariate(math.log(max(1.0, _lerp(ph.running, f))), 0.4) for _ in range(min(steps, 40))])
                _observe(c, "ttft", TTFT_B, [rng.lognormvariate(math.log(ph.ttft), 0.5) for _ in range(rq)])
                _observe(c, "itl", ITL_B, [rng.lognormvariate(math.log(ph.itl), 0.25) for _ in range(rq)])
                _observe(c, "e2e", E2E_B, [rng.lognormvariate(math.log(ph.ttft + ph.itl * ph.max_tokens * 0.6), 0.4)
                                           for _ in range(rq)])
                _observe(c, "prompt_len", TOK_B, [rng.lognormvariate(math.log(ph.prompt_len), 0.6) for _ in range(rq)])
                _observe(c, "max_tokens", TOK_B, [rng.lognormvariate(math.log(ph.max_tokens), 0.2) for _ in range(rq)])
                _observe(c, "gen_len", TOK_B, [rng.lognormvariate(math.log(ph.max_tokens * 0.6), 0.4) for _ in range(rq)])
                c.preempt += _poisson(rng, ph.preempt_rate * dt)
            c.cpu += max(0.0, rng.gauss(ph.cpu, 0.03 * max(ph.cpu, 0.1))) * dt
            # gauges now
            kv = min(1.0, max(0.0, rng.gauss(_lerp(ph.kv, f), 0.01)))
            if ph.pinned is not None:
                running = float(ph.pinned)
            else:
                mean = _lerp(ph.running, f)
                running = float(max(0, round(rng.gauss(mean, 0.25 * math.sqrt(mean) + 0.3)))) if mean > 0 else 0.0
            wmean = _lerp(ph.waiting, f)
            waiting = float(max(0, round(rng.gauss(wmean, 0.3 * math.sqrt(wmean))))) if wmean > 0 else 0.0
            if waiting == 0 and rng.random() < ph.blips:
                waiting = float(rng.choice((1, 1, 2)))
            wdef = float(round(waiting * ph.deferred_share))
            values = {
                "kv_usage": kv,
                "running": running,
                "waiting": waiting,
                "preemptions": c.preempt,
                "generation_tokens": c.gen,
                "prompt_tokens": round(c.prompt),
                "requests_success": c.reqs,
            }
            if scn.dialect == "v1":
                values["waiting_capacity"] = waiting - wdef
                values["waiting_deferred"] = wdef
            if scn.dialect == "v0":
                values["swapped"] = ph.swapped
            hists = {k: Histogram(h[0], tuple(h[1]), h[2], h[3]) for k, h in c.hists.items()}
            sample = Sample(
                engines={"0" if scn.dialect == "v1" else "": EngineSample(values=values, hists=hists)},
                generation="v0" if scn.dialect == "v0" else "v1",
                model_name="meta-llama/Llama-3.1-8B-Instruct",
                cache_config=dict(cache),
                process_cpu_seconds=c.cpu if scn.cpu_metric else None,
            )
            gpu = None
            if scn.gpu:
                util = min(100.0, max(0.0, rng.gauss(_lerp(ph.gpu_util, f), 3.0)))
                gpu = GpuSample(devices=(GpuDevice(
                    index="0", name="NVIDIA H100 80GB HBM3",
                    memory_used_bytes=GPU_TOTAL * min(1.0, ph.gpu_mem_pct / 100 + rng.gauss(0, 0.002)),
                    memory_total_bytes=GPU_TOTAL, util_pct=util, throttle_reasons=ph.throttle,
                    ecc_uncorrected=ph.ecc),), source="sim")
            raw = render_sample(sample, scn.dialect)
            pod = PodInfo(namespace="inference", name=scn.name)
            yield Scrape(ts=ts, replica=scn.name, sample=sample, raw=raw, gpu=gpu, pod=pod), ph.label
            ts += dt
        phase_start = end


# -- the suite ---------------------------------------------------------------------------------



def _pressure(d: float, **kw) -> Phase:
    base = dict(kv=(0.96, 0.99), running=(6, 3), waiting=(6, 25), preempt_rate=0.5, gpu_util=(40, 35),
                ttft=2.5, itl=0.09, prompt_len=6000, max_tokens=2000, gpu_mem_pct=91, req_rate=2.0, gen_tps=250)
    base.update(kw)
    return Phase("kv-pressure", d, **base)


def _capped(d: float, cap: int = 64, **kw) -> Phase:
    base = dict(kv=(0.45, 0.55), pinned=cap, waiting=(3, 30), preempt_rate=0.0, gpu_util=(70, 72),
                req_rate=9.0, gen_tps=2200, ttft=1.2, blips=0.0)
    base.update(kw)
    return Phase("concurrency-capped", d, **base)


def _compute(d: float, **kw) -> Phase:
    base = dict(kv=(0.55, 0.7), running=(60, 70), gpu_util=(93, 96), gen_tps=4000, req_rate=14.0, itl=0.06,
                cpu=0.55, steps_per_s=20)
    base.update(kw)
    return Phase("compute-bound", d, **base)


def _host(d: float, **kw) -> Phase:
    base = dict(kv=(0.08, 0.1), running=(2, 2), waiting=(1, 6), blips=0.0, gpu_util=(18, 15), cpu=0.97,
                gen_tps=120, req_rate=1.0, ttft=1.8, gpu_mem_pct=90)
    base.update(kw)
    return Phase("host-bound", d, **base)


def _stalled(d: float, **kw) -> Phase:
    base = dict(kv=(0.62, 0.62), running=(12, 12), pinned=12, waiting=(8, 14), progress=False, gpu_util=(100, 100),
                blips=0.0)
    base.update(kw)
    return Phase("stalled", d, **base)


def _fault(d: float, **kw) -> Phase:
    base = dict(throttle=("hw_thermal_slowdown",), gpu_util=(99, 99), itl=0.12, ttft=0.6, kv=(0.5, 0.55))
    base.update(kw)
    return Phase("node-fault", d, **base)


def suite(seed: int = 0) -> list[Scenario]:
    """Every verdict, transitions, look-alikes, noisy and borderline cases, three dialects,
    traces without GPU data. Durations and levels are jittered by `seed`."""
    r = random.Random(seed)

    def j(x: float, spread: float = 0.15) -> float:
        return x * r.uniform(1 - spread, 1 + spread)

    def warm(label: str = "healthy", d: float = 90) -> Phase:
        return Phase(label, round(j(d)), kv=(j(0.3), j(0.55)), running=(j(14), j(18)), gpu_util=(j(45), j(55)))

    base: list[tuple[str, tuple[Phase, ...], dict]] = [
        ("steady", (Phase("healthy", 600, kv=(j(0.35), j(0.5)), running=(j(18), j(20))),), {}),
        ("steady-high-kv-no-preempt", (Phase("healthy", 400, kv=(0.91, 0.94), running=(30, 30), gpu_util=(70, 72),
                                             gpu_mem_pct=92),), {"tags": ("look-alike",)}),
        ("idle-preallocated", (Phase("healthy", 300, kv=(0.0, 0.0), running=(0, 0), req_rate=0.0, gen_tps=0.0,
                                     steps_per_s=0.0, gpu_util=(0, 2), gpu_mem_pct=92, blips=0.0, cpu=0.02),),
                               {"tags": ("look-alike",)}),
        ("light-traffic-high-mem-low-util", (Phase("healthy", 300, kv=(0.1, 0.15), running=(2, 3), req_rate=0.5,
                                                   gen_tps=90, gpu_util=(12, 20), gpu_mem_pct=93, cpu=0.1),),
                                             {"tags": ("look-alike",)}),
        ("lone-preemption", (Phase("healthy", 300, kv=(0.88, 0.93), running=(40, 42), preempt_rate=0.004,
                                   gpu_util=(75, 75)),), {"tags": ("borderline",)}),
        ("long-prompts", (warm(), Phase("healthy", round(j(60)), kv=(0.6, 0.88), running=(20, 12), prompt_len=3000),
                          _pressure(round(j(240))), Phase("healthy", 180, kv=(0.7, 0.6), running=(10, 12))), {}),
        ("long-prompts-intermittent", (warm(), _pressure(round(j(300)), preempt_rate=0.12, kv=(0.9, 0.95),
                                                         waiting=(1, 3))), {"tags": ("borderline",)}),
        ("burst", (warm(), _pressure(round(j(60, 0.3)), waiting=(20, 8), running=(10, 6)),
                   Phase("healthy", 200, kv=(0.75, 0.5))), {}),
        ("compute-bound", (warm(), _compute(round(j(300)))), {}),
        ("host-bound", (warm(), _host(round(j(300)))), {}),
        ("host-bound-no-queue", (warm(), _host(round(j(240)), waiting=(0, 0))), {}),
        ("throttled-node", (warm(), _fault(round(j(240))), Phase("healthy", 120)), {}),
        ("ecc-node", (warm(), _fault(round(j(180)), throttle=(), ecc=2.0)), {}),
        ("concurrency-capped", (warm(), _capped(round(j(300)), cap=r.choice((32, 64, 128)))), {}),
        ("stalled", (warm(), _stalled(round(j(200)))), {}),
        # a deferred queue is a stall only while generation does not advance (beside a generating
        # engine it is admission held elsewhere: the LoRA slots, a KV transfer)
        ("stalled-deferred", (warm(), Phase("stalled", round(j(200)), running=(2, 2), waiting=(10, 16),
                                            deferred_share=1.0, progress=False, blips=0.0, kv=(0.2, 0.2))),
                             {"dialects": ("v1",)}),
        ("down", (warm(), Phase("down", 90, down="connection refused"), Phase("healthy", 120)), {}),
        # transitions between look-alikes
        ("pressure-then-wedge", (warm(), _pressure(round(j(150))), _stalled(150, kv=(0.99, 0.99), pinned=4,
                                                                           waiting=(25, 30))), {}),
        ("cap-raised-into-pressure", (warm(), _capped(round(j(150))), _pressure(round(j(200)))), {}),
        ("compute-then-throttle", (warm(), _compute(round(j(150))), _fault(150, running=(60, 60))), {}),
        ("capped-then-host", (warm(), _capped(150), _host(150)), {}),
    ]
    out: list[Scenario] = []
    for name, phases, kw in base:
        kw = dict(kw)
        # waiting by reason (the only trace of a "deferred" stall) exists in the newest V1 only
        for dialect in kw.pop("dialects", ("v1", "v1-early", "v0")):
            out.append(Scenario(f"{name}.{dialect}", phases, dialect=dialect, **kw))
    # noisy: 2 s scrapes (fewer events per interval); no GPU data; known max-num-seqs
    for name, phases, kw in base[:16]:
        kw = {k: v for k, v in kw.items() if k != "dialects"}
        out.append(Scenario(f"{name}.fast", phases, interval=2.0, **kw))
    for name in ("long-prompts", "burst", "concurrency-capped", "stalled", "host-bound", "steady", "down"):
        phases, kw = next((p, k) for n, p, k in base if n == name)
        out.append(Scenario(f"{name}.nogpu", phases, gpu=False, tags=("no-gpu",) + kw.get("tags", ())))
    capped = next(p for n, p, _ in base if n == "concurrency-capped")
    cap = capped[1].pinned
    out.append(Scenario("concurrency-capped.known-cap", capped, max_num_seqs=cap))
    return out


# -- traces: what the benchmark scores --------------------------------------------------------


@dataclass(frozen=True)
class Trace:
    """One replica's labelled scrapes, and the onsets (time, verdict) where its label changes."""

    name: str
    interval: float
    rows: tuple[tuple[Scrape, str | None], ...]
    onsets: tuple[tuple[float, str], ...]
    source: str = "synthetic"  # or "sim"


def synthetic_traces(seed: int = 0) -> list[Trace]:
    out = []
    for scn in suite(seed):
        rows = tuple(generate(scn, seed))
        out.append(Trace(scn.name, scn.interval, rows, tuple(scn.onsets(rows[0][0].ts)), "synthetic"))
    return out


# Simulator scenarios and the truth about each replica at a scrape, read from the model's
# internal state (never from its metrics page): thrashing = the engine has started preempting;
# capped = requests wait while `running` is at max-num-seqs; a throttled node = its fault.
SIM_SCENARIOS = ("steady", "long-prompts", "burst", "compute-bound", "host-bound", "throttled-node")


def _sim_label(scenario: str, replica, t_rel: float, state: dict) -> str | None:
    if t_rel < 10.0:
        return None  # engines warming up
    engines = replica.engines
    if replica.node.throttle_mask or replica.node.xid or replica.node.ecc_dbe:
        return "node-fault"
    if scenario == "long-prompts":
        pre = sum(e.c.preemptions for e in engines)
        if pre > 0 and "first_preempt" not in state:
            state["first_preempt"] = t_rel
        return "kv-pressure" if "first_preempt" in state else "healthy"
    if scenario == "burst":
        cap = replica.resolved.max_num_seqs
        waiting = sum(e.num_waiting for e in engines)
        at_cap = all(e.num_running >= cap - 1 for e in engines)
        if waiting >= 3 and at_cap:
            return "concurrency-capped"
        return "healthy" if waiting == 0 else None  # a queue of 1-2 at the edges: not scored
    if scenario in ("compute-bound", "host-bound"):
        return scenario
    return "healthy"


def sim_traces(seed: int = 0, duration: float = 420.0, interval: float = 5.0, replicas: int = 3,
               v0_replicas: int = 1) -> list[Trace]:
    """Labelled traces from the simulated fleet (tui.core.sim): pages as its servers render them,
    GPU data as its DCGM pages report it, parsed like a live scrape."""
    from tui.core.metrics.extract import parse_dcgm, parse_vllm, to_gpu, to_sample
    from tui.core.sim.exposition import PageRenderer, render_dcgm
    from tui.core.sim.fleet import SimFleet
    from tui.core.sim.replica import READY

    out = []
    t0 = 1_750_000_000.0
    for scenario in SIM_SCENARIOS:
        fleet = SimFleet(scenario, replicas=replicas, seed=seed, v0_replicas=v0_replicas, start_time=t0)
        names = fleet.replica_names()
        pages = {n: PageRenderer(fleet.replica(n)) for n in names}
        rows: dict[str, list] = {n: [] for n in names}
        state: dict[str, dict] = {n: {} for n in names}
        t = 0.0
        while t < duration - 1e-9:
            fleet.advance(interval)
            t += interval
            for n in names:
                r = fleet.replica(n)
                if r.state != READY:
                    rows[n].append((Scrape(ts=t0 + t, replica=n, error="HTTP 503"), None))
                    continue
                text = pages[n].render()
                gpu = to_gpu(parse_dcgm(render_dcgm(r)))
                s = Scrape(ts=t0 + t, replica=n, sample=to_sample(parse_vllm(text)), raw=text, gpu=gpu)
                rows[n].append((s, _sim_label(scenario, r, t, state[n])))
        for n in names:
            onsets, prev = [], None
            for s, label in rows[n]:
                if label is not None and label != prev:
                    onsets.append((s.ts, label))
                    prev = label
            out.append(Trace(f"sim:{scenario}:{n}", interval, tuple(rows[n]), tuple(onsets), "sim"))
    return out

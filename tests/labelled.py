"""Labelled traces of what vLLM and SGLang really expose, as files: one trace per file in
tests/unit/data/labelled/ (the format is documented in that folder's README.md).

Pages are written in the engines' own metric names and labels, as their metric code emits them:
vLLM V1 (vllm/v1/metrics/loggers.py: `engine` and `model_name` labels, `num_requests_waiting_by_reason`
with reason capacity|deferred, `lora_requests_info` whose value is a timestamp and whose labels
carry `max_lora` and comma-separated adapter lists, one series per distinct label set, kept for
the life of the process) and SGLang (python/sglang/srt/metrics/collector.py: scheduler gauges
per `tp_rank`/`pp_rank`/`dp_rank`, `num_retracted_requests_total` as a counter or, in other
versions, only `num_retracted_reqs`, a gauge of the requests retracted at the last retraction;
tokenizer counters without ranks; `process_cpu_seconds_total` per `component`).

`python -m tests.labelled` regenerates the files (deterministic); `load()` reads them back as
`Trace`s for the suite and bench/bench_diagnosis.py.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from dataclasses import dataclass, field

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "data", "labelled")
T0 = 1_764_000_000.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU_TOTAL = 80 * 1024**3


@dataclass(frozen=True)
class Phase:
    """What one replica does for `duration` seconds, and the verdict a careful SRE gives it.
    Ranges (start, end) are interpolated over the phase."""

    label: str | None
    duration: float
    kv: tuple[float, float] = (0.4, 0.4)
    kv_noise: float = 0.01
    running: tuple[float, float] = (16, 16)
    pinned: int | None = None
    waiting: tuple[float, float] = (0, 0)
    deferred: float = 0.0  # share of waiting that is "deferred" (LoRA budget)
    blips: float = 0.0  # chance per scrape of a 1-3 request queue
    preempts: float = 0.0  # per second (Poisson), or see `bursts`
    bursts: tuple[float, float] | None = None  # retraction bursts every (lo, hi) seconds
    gen_tps: float = 900.0
    util: tuple[float, float] = (50, 50)
    util_noise: float = 3.0
    cpu: float = 0.3
    lora: tuple[int, int] | None = None  # (max_lora, adapters in use): slots full, the rest wait
    ranks: tuple[tuple[float, float, float], ...] = ()  # SGLang dp ranks: (kv lo, kv hi, queue)


@dataclass(frozen=True)
class Replica:
    name: str
    phases: tuple[Phase, ...]
    engine: str = "vllm"  # "vllm" (V1 page) or "sglang"
    retract: str = "counter"  # SGLang: "counter" or "gauge" (num_retracted_reqs only)
    model: str = MODEL


@dataclass(frozen=True)
class Spec:
    name: str
    interval: float
    replicas: tuple[Replica, ...]
    # fleet label per phase window: ((start_s, end_s, "imbalanced" | "balanced"), ...)
    fleet: tuple[tuple[float, float, str], ...] = ()
    note: str = ""


@dataclass
class _State:
    gen: float = 0.0
    prompt: float = 0.0
    reqs: float = 0.0
    preempt: float = 0.0
    cpu: float = 100.0
    next_burst: float | None = None
    gauge: float = 0.0
    lora_series: dict = field(default_factory=dict)  # label set -> last timestamp


def _lerp(a: tuple[float, float], f: float) -> float:
    return a[0] + (a[1] - a[0]) * f


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    k, p, lim = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= lim:
            return k
        k += 1


def _num(v: float) -> str:
    return repr(float(v))


def _vllm_page(rp: Replica, ph: Phase, st: _State, g: dict, ts: float) -> str:
    m = f'model_name="{rp.model}",engine="0"'
    wdef = round(g["waiting"] * ph.deferred)
    lines = [
        "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{m}}} {_num(g['running'])}",
        "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{m}}} {_num(g['waiting'])}",
        "# TYPE vllm:num_requests_waiting_by_reason gauge",
        f'vllm:num_requests_waiting_by_reason{{{m},reason="capacity"}} {_num(g["waiting"] - wdef)}',
        f'vllm:num_requests_waiting_by_reason{{{m},reason="deferred"}} {_num(wdef)}',
        "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{m}}} {_num(g['kv'])}",
        "# TYPE vllm:num_preemptions_total counter", f"vllm:num_preemptions_total{{{m}}} {_num(st.preempt)}",
        "# TYPE vllm:prompt_tokens_total counter", f"vllm:prompt_tokens_total{{{m}}} {_num(st.prompt)}",
        "# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{m}}} {_num(st.gen)}",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{{m},finished_reason="stop"}} {_num(st.reqs)}',
        "# TYPE vllm:cache_config_info gauge",
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",'
        'num_gpu_blocks="27000",enable_prefix_caching="True"} 1.0',
    ]
    if ph.lora is not None:
        max_lora, in_use = ph.lora
        names_ = [f"adapter-{i}" for i in range(in_use)]
        running, waiting = names_[:max_lora], names_[max_lora:] if wdef else []
        key = (str(max_lora), ",".join(running), ",".join(waiting))
        st.lora_series[key] = ts  # set_to_current_time(); older label sets stay on the page
    if st.lora_series:
        lines.append("# TYPE vllm:lora_requests_info gauge")
        for (mx, run, wait), t in st.lora_series.items():
            lines.append(f'vllm:lora_requests_info{{max_lora="{mx}",running_lora_adapters="{run}",'
                         f'waiting_lora_adapters="{wait}"}} {_num(t)}')
    lines += ["# TYPE process_cpu_seconds_total counter", f"process_cpu_seconds_total {_num(st.cpu)}"]
    return "\n".join(lines) + "\n"


def _sglang_page(rp: Replica, ph: Phase, st: _State, g: dict, rng: random.Random) -> str:
    base = f'engine_type="unified",model_name="{rp.model}",pp_rank="0",tp_rank="0"'
    ranks = g["ranks"]
    fams: dict[str, list[str]] = {n: [] for n in (
        "num_running_reqs", "num_queue_reqs", "token_usage", "num_used_tokens", "max_total_num_tokens",
        "gen_throughput", "cache_hit_rate")}
    for i, (kv, run, q) in enumerate(ranks):
        lab = base + (f',dp_rank="{i}"' if len(ranks) > 1 else "")
        pool = 400_000.0
        vals = {"num_running_reqs": run, "num_queue_reqs": q, "token_usage": kv, "num_used_tokens": round(kv * pool),
                "max_total_num_tokens": pool, "gen_throughput": g["gen_tps"] / len(ranks),
                "cache_hit_rate": 0.3}
        for n, v in vals.items():
            fams[n].append(f"sglang:{n}{{{lab}}} {_num(v)}")
    lines = []
    for n, rows in fams.items():
        lines += [f"# TYPE sglang:{n} gauge", *rows]
    if rp.retract == "counter":
        lines += ["# TYPE sglang:num_retracted_requests_total counter",
                  f"sglang:num_retracted_requests_total{{{base}}} {_num(st.preempt)}"]
    else:
        lines += ["# TYPE sglang:num_retracted_reqs gauge", f"sglang:num_retracted_reqs{{{base}}} {_num(st.gauge)}"]
    tok = f'model_name="{rp.model}"'
    lines += [
        "# TYPE sglang:prompt_tokens_total counter", f"sglang:prompt_tokens_total{{{tok}}} {_num(st.prompt)}",
        "# TYPE sglang:generation_tokens_total counter", f"sglang:generation_tokens_total{{{tok}}} {_num(st.gen)}",
        "# TYPE sglang:num_requests_total counter", f"sglang:num_requests_total{{{tok}}} {_num(st.reqs)}",
        "# TYPE process_cpu_seconds_total counter",
        f'process_cpu_seconds_total{{component="tokenizer"}} {_num(st.cpu)}',
        f'process_cpu_seconds_total{{component="scheduler",dp_rank="0"}} {_num(st.cpu * 3.1)}',
    ]
    return "\n".join(lines) + "\n"


def _replica_rows(spec: Spec, rp: Replica, rng: random.Random) -> list[dict]:
    st = _State(cpu=rng.uniform(50, 500))
    out, t_phase = [], 0.0
    ts = spec.interval
    dt = spec.interval
    for ph in rp.phases:
        end = t_phase + ph.duration
        if ph.bursts is not None:
            st.next_burst = t_phase + rng.uniform(*ph.bursts) / 2
        while ts <= end + 1e-9:
            f = (ts - t_phase) / ph.duration
            # counters over the interval that ends now
            if ph.gen_tps > 0:  # a wedged engine's counters do not move at all
                st.gen += max(0.0, round(rng.gauss(ph.gen_tps * dt, 0.05 * ph.gen_tps * dt + 1)))
            rq = _poisson(rng, ph.gen_tps / 250 * dt)
            st.reqs += rq
            st.prompt += rq * rng.uniform(300, 900)
            st.cpu += max(0.0, rng.gauss(ph.cpu, 0.03)) * dt
            st.gauge = 0.0
            if ph.bursts is not None:
                while st.next_burst is not None and st.next_burst <= ts:
                    n = rng.choice((1, 1, 2))
                    st.preempt += n
                    st.gauge = float(n)  # the gauge shows the last retraction until the next log
                    st.next_burst += rng.uniform(*ph.bursts)
            else:
                st.preempt += _poisson(rng, ph.preempts * dt)
            kv = min(1.0, max(0.0, rng.gauss(_lerp(ph.kv, f), ph.kv_noise)))
            if ph.pinned is not None:
                running = float(ph.pinned)
            else:
                mean = _lerp(ph.running, f)
                running = float(max(0, round(rng.gauss(mean, 0.25 * math.sqrt(mean) + 0.3)))) if mean > 0 else 0.0
            wmean = _lerp(ph.waiting, f)
            waiting = float(max(0, round(rng.gauss(wmean, 0.3 * math.sqrt(wmean))))) if wmean > 0 else 0.0
            if waiting == 0 and rng.random() < ph.blips:
                waiting = float(rng.choice((1, 2, 3)))
            util = min(100.0, max(0.0, rng.gauss(_lerp(ph.util, f), ph.util_noise)))
            g = {"kv": kv, "running": running, "waiting": waiting, "gen_tps": ph.gen_tps}
            if rp.engine == "sglang":
                ranks = ph.ranks or ((ph.kv[0], ph.kv[1], -1.0),)
                g["ranks"] = []
                for lo, hi, q in ranks:
                    if q < 0:  # the single-rank pod: the phase's own numbers
                        g["ranks"].append((kv, running, waiting))
                        continue
                    rkv = min(1.0, max(0.0, rng.uniform(lo, hi)))
                    rq_ = float(max(0, round(rng.gauss(q, 0.25 * q)))) if q > 0 else 0.0
                    if rq_ == 0 and rng.random() < ph.blips / len(ranks):
                        rq_ = float(rng.choice((1, 2, 3)))
                    g["ranks"].append((rkv, float(max(1, round(rng.gauss(running / len(ranks), 1.5)))), rq_))
                page = _sglang_page(rp, ph, st, g, rng)
            else:
                page = _vllm_page(rp, ph, st, g, T0 + ts)
            rec = {"ts": T0 + ts, "replica": rp.name, "label": ph.label, "metrics": page,
                   "gpu": {"memory_used_bytes": GPU_TOTAL * 0.9, "memory_total_bytes": GPU_TOTAL,
                           "utilization_pct": round(util, 1), "throttle_reasons": []}}
            for lo, hi, lab in spec.fleet:
                if lo <= ts < hi:
                    rec["fleet"] = lab
            out.append(rec)
            ts += dt
        t_phase = end
    return out


# -- the traces --------------------------------------------------------------------------------


def _warm(d: float = 60, **kw) -> Phase:
    base = dict(kv=(0.3, 0.4), running=(12, 16), util=(45, 55))
    base.update(kw)
    return Phase("healthy", d, **base)


def specs() -> list[Spec]:
    out = []
    # 1. --max-loras 4, traffic over 10 adapters: the adapter slots hold admission, generation advances
    out.append(Spec("vllm-lora-starved", 5.0, (Replica("lora-0", (
        _warm(60),
        Phase("lora-capped", 300, kv=(0.24, 0.27), running=(15, 18), waiting=(31, 31), deferred=0.9, gen_tps=720,
              util=(55, 60), lora=(4, 10)),
        _warm(60, lora=(4, 4))),),),
        note="--max-loras 4 with traffic over 10 adapters: waiting 31, 28 deferred, 650-800 tokens/s"))
    # 2. SGLang data parallel: rank 2 of 8 full with its own queue, the others 0.21-0.59; a healthy
    # DP pod beside it (a different model: no fleet imbalance between them)
    ranks_hot = tuple((0.95, 1.0, 28.0) if i == 2 else (0.21, 0.59, 0.0) for i in range(8))
    ranks_ok = tuple((0.21, 0.59, 0.0) for _ in range(8))
    out.append(Spec("sglang-dp-one-rank-full", 5.0, (
        Replica("sgl-dp-hot", (Phase("healthy", 60, ranks=ranks_ok, running=(160, 160), gen_tps=3000, util=(60, 65)),
                               Phase("kv-pressure", 300, ranks=ranks_hot, running=(160, 160), gen_tps=2600,
                                     bursts=(8, 20), util=(60, 65)),
                               Phase("healthy", 90, ranks=ranks_ok, running=(160, 160), gen_tps=3000, util=(60, 65))),
                engine="sglang", model="Qwen/Qwen2.5-72B-Instruct"),
        Replica("sgl-dp-ok", (Phase("healthy", 450, ranks=ranks_ok, running=(160, 160), gen_tps=3000,
                                    util=(60, 65), blips=0.3),), engine="sglang", model="Qwen/Qwen2.5-7B-Instruct")),
        note="8 dp ranks; rank 2 at token usage 0.95-1.00 with a queue of 19-39"))
    # 3. SGLang retraction cadence: retractions every 10-20 s in a KV-pressure phase, 2 s scrapes,
    # as a counter and as the gauge only
    for form in ("counter", "gauge"):
        out.append(Spec(f"sglang-retract-cadence-{form}", 2.0, (Replica(f"sgl-{form}", (
            _warm(60, kv=(0.4, 0.6)),
            Phase("kv-pressure", 320, kv=(0.96, 0.99), kv_noise=0.008, running=(40, 30), waiting=(6, 55),
                  bursts=(10, 20), gen_tps=1500, util=(70, 75)),
            _warm(80, kv=(0.7, 0.5), waiting=(0, 0))), engine="sglang", retract=form),),
            note="retractions every 10-20 s (SGLang tightens admission after each)"))
    # 4. steady overload: queue 64-85, KV 0.79-0.89, GPU util averaging 73% (a few samples >= 80%)
    out.append(Spec("vllm-steady-overload-util-noise", 5.0, (Replica("ovl-0", (
        _warm(60),
        Phase("overloaded", 600, kv=(0.79, 0.89), kv_noise=0.02, pinned=256, waiting=(64, 85), gen_tps=2600,
              util=(74, 74), util_noise=4.5)),),),
        note="queue 64-85 for minutes; 9 of 225 utilisation samples reach 80%"))
    # 5a. slow onset: the pool fills over 3 minutes with queue blips, then preemption
    out.append(Spec("vllm-slow-onset", 5.0, (Replica("slow-0", (
        _warm(60),
        Phase("healthy", 180, kv=(0.55, 0.93), kv_noise=0.02, running=(20, 34), blips=0.25, util=(55, 65)),
        Phase("kv-pressure", 240, kv=(0.95, 0.99), running=(30, 22), waiting=(4, 20), preempts=0.4, util=(55, 50),
              gen_tps=500)),),),
        note="the pool fills over 3 minutes, queue blips, then preemption"))
    # 5b. a queue held at the cap with KV noise across 0.90, nothing preempted
    out.append(Spec("vllm-cap-kv-noise", 5.0, (Replica("capnoise-0", (
        _warm(60),
        Phase("overloaded", 480, kv=(0.90, 0.90), kv_noise=0.02, pinned=128, waiting=(5, 15), gen_tps=2400,
              util=(70, 72))),),),
        note="running at the cap, KV 0.86-0.94, queue 5-15, no preemption"))
    # 5c. chunked prefill, ~48k-token prompts, 2048-token budget: running swings, the queue persists
    out.append(Spec("vllm-chunked-long-prompts", 5.0, (Replica("chunk-0", (
        _warm(60),
        Phase("overloaded", 600, kv=(0.35, 0.45), kv_noise=0.04, running=(6, 6), waiting=(8, 12), gen_tps=300,
              util=(78, 78), util_noise=5.0)),),),
        note="48k-token prompts through a 2048-token prefill budget"))
    # 21.6 a livelock: nothing runs, a queue waits, KV empty, counters frozen
    out.append(Spec("vllm-livelock-empty-kv", 5.0, (Replica("live-0", (
        _warm(60),
        Phase("stalled", 240, kv=(0.0, 0.0), kv_noise=0.0, running=(0, 0), waiting=(6, 6), gen_tps=0.0, util=(3, 3))),),),
        note="running 0, waiting 6, KV 0.0 (vllm-metal issue 479)"))
    # imbalance: one hot replica of four, the others idle; then all busy; then all idle
    hot = (_warm(60), Phase("kv-pressure", 240, kv=(0.95, 0.99), running=(30, 24), waiting=(10, 25), preempts=0.4,
                            gen_tps=500), _warm(60))
    idle = (Phase("healthy", 360, kv=(0.03, 0.06), running=(1, 2), gen_tps=60, util=(8, 10)),)
    out.append(Spec("vllm-fleet-imbalance", 5.0, tuple(
        Replica(f"imb-{i}", hot if i == 0 else idle) for i in range(4)),
        fleet=((0, 60, "balanced"), (60, 305, "imbalanced"), (320, 400, "balanced")),
        note="one replica pressured while three of the same model idle"))
    busy = (Phase("overloaded", 300, kv=(0.80, 0.86), pinned=128, waiting=(20, 30), gen_tps=2400, util=(72, 74)),)
    out.append(Spec("vllm-fleet-all-busy", 5.0, tuple(Replica(f"busy-{i}", busy) for i in range(3)),
                    fleet=((0, 400, "balanced"),), note="every replica queued: scale out, not rebalance"))
    out.append(Spec("vllm-fleet-all-idle", 5.0, tuple(Replica(f"idle-{i}", idle) for i in range(3)),
                    fleet=((0, 400, "balanced"),), note="every replica idle"))
    return out


def build(spec: Spec) -> list[dict]:
    rows = []
    for rp in spec.replicas:
        rows += _replica_rows(spec, rp, random.Random(f"{spec.name}:{rp.name}"))
    rows.sort(key=lambda r: (r["ts"], r["replica"]))
    for r in rows:
        r["trace"], r["interval"] = spec.name, spec.interval
    return rows


def write_all(folder: str = DATA) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    out = []
    for spec in specs():
        path = os.path.join(folder, spec.name + ".jsonl.gz")
        # mtime 0: the same trace gives the same bytes
        with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
            for r in build(spec):
                f.write((json.dumps(r, separators=(",", ":")) + "\n").encode())
        out.append(path)
    return out


# -- reading them back -------------------------------------------------------------------------


def load(folder: str = DATA) -> list:
    """Every labelled trace in `folder`, one `Trace` per replica (name `file:replica`); the
    fleet labels are on `fleet_labels(path)`."""
    from tests.scenarios import Trace
    from tui.core.record import record_to_scrape

    out = []
    for fn in sorted(os.listdir(folder)):
        if not fn.endswith(".jsonl.gz"):
            continue
        with gzip.open(os.path.join(folder, fn), "rt") as f:
            recs = [json.loads(line) for line in f]
        by_rep: dict[str, list] = {}
        for r in recs:
            by_rep.setdefault(r["replica"], []).append((record_to_scrape(r), r.get("label")))
        for rep, rows in by_rep.items():
            onsets, prev = [], None
            for s, lab in rows:
                if lab is not None and lab != prev:
                    onsets.append((s.ts, lab))
                    prev = lab
            out.append(Trace(f"{fn[:-9]}:{rep}", recs[0]["interval"], tuple(rows), tuple(onsets), "labelled"))
    return out


def fleet_labels(path: str) -> dict[float, str]:
    with gzip.open(path, "rt") as f:
        return {r["ts"]: r["fleet"] for r in map(json.loads, f) if "fleet" in r}


if __name__ == "__main__":
    for p in write_all():
        print(p, os.path.getsize(p))


# -- scoring (the suite's tests and bench/bench_diagnosis.py) ------------------------------------


@dataclass
class TraceScore:
    """One replica of one labelled file, diagnosed from the file."""

    name: str
    interval: float
    pairs: list  # (label, verdict) per scored scrape
    points: list  # (ts, verdict, label) per scrape
    onsets: list  # (ts, label) where the label changes (the first one: the trace's start)
    detections: list  # (label, seconds from onset to the first matching verdict, or None)
    changes: int  # verdict changes after the first verdict
    labelled_changes: int
    hours: float
    stalled_while_advancing: int
    finding: object = None  # the last verdict with its evidence (offline ReplicaTimeline)


def score_file(path: str) -> list[TraceScore]:
    """Diagnose one labelled file with `kvwatch diagnose`'s path (file -> parser -> history ->
    rules) and score every replica: per scrape against its label, except the first two
    intervals after each onset (the verdict may take that long), and unlabelled scrapes."""
    from tui.core.offline import diagnose_file

    res = diagnose_file(path, keep_points=True)
    assert not res.problems, res.problems
    labels: dict[tuple[str, float], str | None] = {}
    gens: dict[tuple[str, float], float] = {}
    interval = 5.0
    with gzip.open(path, "rt") as f:
        for r in map(json.loads, f):
            labels[(r["replica"], r["ts"])] = r.get("label")
            interval = r.get("interval", interval)
            gens[(r["replica"], r["ts"])] = _gen_counter(r["metrics"])
    out = []
    base = os.path.basename(path).split(".jsonl")[0]
    for rep, tl in sorted(res.replicas.items()):
        pts = [(ts, v, labels.get((rep, ts))) for ts, v in tl.points]
        onsets, prev = [], None
        for ts, _, lab in pts:
            if lab is not None and lab != prev:
                onsets.append((ts, lab))
                prev = lab
        pairs = []
        for ts, v, lab in pts:
            last_on = max((t for t, _ in onsets if t <= ts), default=pts[0][0])
            if lab is not None and (ts - last_on >= 2 * interval or last_on == onsets[0][0]) and v != "unknown":
                pairs.append((lab, v))
        det = []
        for i, (t_on, lab) in enumerate(onsets[1:], 1):
            t_next = onsets[i + 1][0] if i + 1 < len(onsets) else math.inf
            hit = next((ts for ts, v, _ in pts if t_on <= ts < t_next and v == lab), None)
            det.append((lab, None if hit is None else hit - t_on))
        verdicts = [v for _, v, _ in pts if v != "unknown"]
        changes = sum(1 for a, b in zip(verdicts, verdicts[1:], strict=False) if a != b)
        adv = 0
        prev_gen = None
        for ts, v, _ in pts:
            g = gens.get((rep, ts))
            if v == "stalled" and g is not None and prev_gen is not None and g > prev_gen:
                adv += 1
            prev_gen = g
        hours = (pts[-1][0] - pts[0][0] + interval) / 3600 if pts else 0.0
        out.append(TraceScore(f"{base}:{rep}", interval, pairs, pts, onsets, det, changes, len(onsets) - 1,
                              hours, adv, tl))
    return out


def _gen_counter(page: str) -> float | None:
    for line in page.splitlines():
        if line.startswith(("vllm:generation_tokens_total", "sglang:generation_tokens_total")):
            return float(line.rsplit(" ", 1)[1])
    return None


def paths(folder: str = DATA) -> list[str]:
    return [os.path.join(folder, fn) for fn in sorted(os.listdir(folder)) if fn.endswith(".jsonl.gz")]


def precision_recall(pairs) -> dict[str, tuple[float, float, int]]:
    """verdict -> (precision, recall, support) over (label, verdict) pairs."""
    out = {}
    for v in sorted({a for a, _ in pairs}):
        tp = sum(1 for a, b in pairs if a == v == b)
        fn = sum(1 for a, b in pairs if a == v != b)
        fp = sum(1 for a, b in pairs if b == v != a)
        out[v] = (tp / (tp + fp) if tp + fp else 0.0, tp / (tp + fn) if tp + fn else 0.0, tp + fn)
    return out


def fleet_points(path: str) -> list[tuple[float, tuple[str, ...], str | None]]:
    """(poll time, model groups in imbalance, fleet label) per poll of the file, through the
    live Monitor (as `--json` and the banner see it)."""
    from tui.core.monitor import Monitor
    from tui.core.record import read_log
    from tui.core.sources.replay import polls

    labels = {}
    with gzip.open(path, "rt") as f:
        for r in map(json.loads, f):
            if "fleet" in r:
                labels[r["ts"]] = r["fleet"]
    mon = Monitor()
    out = []
    for batch in polls(sorted(read_log(path), key=lambda s: s.ts)):
        state = mon.ingest(batch)
        ts = batch[0].ts
        out.append((ts, tuple(i.group for i in state.imbalance), labels.get(ts)))
    return out

"""Do the generated Prometheus alerts fire when the dashboard names the verdict?

For every labelled trace of the diagnosis suite (the same traces bench_diagnosis.py scores:
whatever tests/scenarios.py holds), the trace's scrapes become Prometheus input series (the
engine's page as scraped, its GPU as a DCGM exporter reports it, `up` 0 while the endpoint
fails) and real Prometheus evaluates the rules `kvwatch rules --scrape-interval <the trace's>`
writes, through `promtool test rules`: one alert_rule_test per scrape and alert, expecting
nothing, so promtool lists every alert that fires. That timeline is compared with kvwatch's own
verdict timeline for the trace (`kvwatch diagnose` on its scrape log).

Scoring, per verdict v: a point is scored unless it lies within the alert's `for:` plus one
scrape interval after the verdict entered or left v (the alert is allowed that long to follow);
agreement = scored points where both name v / scored points where either does. Also: no
kv-pressure alert on any look-alike trace (one never labelled kv-pressure).

Usage: .venv/bin/python bench/bench_alert_rules.py [--seed N] [--no-sim] [--only SUBSTRING] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import yaml  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench_diagnosis import run_trace  # noqa: E402
from tests.scenarios import sim_traces, synthetic_traces  # noqa: E402
from tui.core.alerting import ALERTS, RuleOptions, build_groups, render  # noqa: E402
from tui.core.alerting.generate import duration  # noqa: E402
from tui.core.metrics.names import THROTTLE_BITS  # noqa: E402

TARGETS = {"kv-pressure": 0.95}  # every other verdict: 0.90
SCORED = [(a, v) for a, v, _, _ in ALERTS if v != "alarm"]  # the fleet alarm is not a verdict
# The engine series the rules read (a page carries many more; histograms are large).
WANT = re.compile(r"^(vllm:(kv_cache_usage_perc|gpu_cache_usage_perc|num_requests_(waiting|running|swapped|"
                  r"waiting_by_reason)|num_preemptions(_total)?|generation_tokens_total|prompt_tokens_total|"
                  r"iteration_tokens_total_count|time_to_first_token_seconds_bucket)|sglang:.*|"
                  r"process_cpu_seconds_total)$")
_GO_DUR = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")


def _go_seconds(s: str) -> float:
    mult = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * mult[u] for n, u in _GO_DUR.findall(s))


def _series_name(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _gpu_series(gpu, who: dict[str, str]) -> dict[str, float]:
    out = {}
    for d in gpu.devices:
        lab = {**who, "gpu": str(d.index)}
        if d.util_pct is not None:
            out[_series_name("DCGM_FI_DEV_GPU_UTIL", lab)] = d.util_pct
        mask = sum(bit for bit, name in THROTTLE_BITS.items() if name in d.throttle_reasons)
        out[_series_name("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", lab)] = mask
        out[_series_name("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", lab)] = d.ecc_uncorrected or 0.0
        out[_series_name("DCGM_FI_DEV_XID_ERRORS", lab)] = d.xid_errors or 0.0
    return out


def input_series(tr) -> list[dict]:
    """promtool input series for one trace: one value per scrape, `stale` from a failed scrape on."""
    who = {"namespace": "inference", "pod": tr.name.replace(":", "-")}
    steps: list[dict[str, float] | None] = []
    for s, _ in tr.rows:
        if s.sample is None or not s.raw:
            steps.append(None)
            continue
        vals: dict[str, float] = {}
        for fam in text_string_to_metric_families(s.raw):
            for smp in fam.samples:
                if WANT.match(smp.name):
                    vals[_series_name(smp.name, {**smp.labels, **who})] = smp.value
        if s.gpu is not None:
            vals.update(_gpu_series(s.gpu, who))
        steps.append(vals)
    names = sorted({k for st in steps if st for k in st})
    out = [{"series": _series_name("up", {**who, "job": "vllm"}),
            "values": " ".join("0" if st is None else "1" for st in steps)}]
    for n in names:
        vals, gone = [], True
        for st in steps:
            v = None if st is None else st.get(n)
            if v is None:
                vals.append("_" if gone else "stale")
                gone = True
            else:
                vals.append(repr(float(v)))
                gone = False
        out.append({"series": n, "values": " ".join(vals)})
    return out


def fired(tr, rule_file: str, tmp: str) -> dict[float, set[str]]:
    """The alerts firing at each scrape of `tr` (seconds from the trace's start), from promtool."""
    iv = duration(tr.interval)
    n = len(tr.rows)
    tests = [{"eval_time": duration(i * tr.interval), "alertname": a} for i in range(n) for a, _ in SCORED]
    doc = {"rule_files": [rule_file], "evaluation_interval": iv,
           "tests": [{"interval": iv, "input_series": input_series(tr), "alert_rule_test": tests}]}
    path = os.path.join(tmp, "t.yml")
    with open(path, "w") as fh:
        yaml.safe_dump(doc, fh, width=1 << 20)
    res = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True, timeout=600)
    out: dict[float, set[str]] = {}
    if res.returncode and "FAILED:" not in res.stdout + res.stderr:
        raise RuntimeError(f"promtool: {res.stdout}{res.stderr}"[-2000:])
    for m in re.finditer(r"alertname: (\S+), time: (\S+),\s*\n\s*exp:\[\],\s*\n\s*got:\[\s*\n\s*0:",
                         res.stdout + res.stderr):
        out.setdefault(_go_seconds(m.group(2)), set()).add(m.group(1))
    return out


def rule_text(interval: float) -> str:
    return render(build_groups(o=RuleOptions(scrape_interval_s=interval)))


def score(traces, verbose: bool = False, jobs: int = 2):
    agree = {v: [0, 0] for _, v in SCORED}  # both, either
    acc = {v: [0, 0] for _, v in SCORED}  # equal, scored
    false_kv: dict[str, int] = {}
    rules: dict[float, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for tr in traces:
            if tr.interval not in rules:
                rules[tr.interval] = os.path.join(tmp, f"rules-{tr.interval:g}.yml")
                with open(rules[tr.interval], "w") as fh:
                    fh.write(rule_text(tr.interval))

        def one(i_tr):
            i, tr = i_tr
            d = os.path.join(tmp, str(i))
            os.mkdir(d)
            return fired(tr, rules[tr.interval], d)

        with ThreadPoolExecutor(max(1, jobs)) as ex:  # promtool runs as its own process
            fires = list(ex.map(one, enumerate(traces)))
        for tr, fire in zip(traces, fires, strict=True):
            pred, problems = run_trace(tr, tmp)
            assert not problems, problems
            t0 = tr.rows[0][0].ts
            kv_label = any(label == "kv-pressure" for _, label in tr.rows)
            groups = build_groups(o=RuleOptions(scrape_interval_s=tr.interval))
            for_s = {r["alert"]: _go_seconds(r.get("for", "0s")) for r in groups[0]["rules"] if "alert" in r}
            for alert, v in SCORED:
                grace = for_s[alert] + tr.interval
                changes = []
                prev = None
                for s, _ in tr.rows:
                    now = pred.get(s.ts) == v
                    if prev is not None and now != prev:
                        changes.append(s.ts)
                    prev = now
                wrong = []
                for s, _ in tr.rows:
                    a = alert in fire.get(round(s.ts - t0, 3), set())
                    if alert == "KVWatchKVCachePressure" and a and not kv_label:
                        false_kv[tr.name] = false_kv.get(tr.name, 0) + 1
                    if any(0 <= s.ts - c < grace for c in changes):
                        continue
                    k = pred.get(s.ts) == v
                    acc[v][0] += a == k
                    acc[v][1] += 1
                    if a or k:
                        agree[v][1] += 1
                        agree[v][0] += a and k
                        if not (a and k):
                            wrong.append((s.ts - t0, pred.get(s.ts), a))
                if verbose and wrong:
                    print(f"  {tr.name} {v}: {len(wrong)} disagree, e.g. {wrong[:4]}", file=sys.stderr)
    return agree, acc, false_kv


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="only traces whose name contains this")
    ap.add_argument("--no-sim", action="store_true", help="synthetic traces only (skip the simulator)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--jobs", type=int, default=2, help="promtool processes at once")
    ap.add_argument("--verbose", action="store_true", help="list the disagreeing points per trace")
    args = ap.parse_args()
    t = time.perf_counter()
    traces = synthetic_traces(args.seed) + ([] if args.no_sim else sim_traces(args.seed))
    traces = [tr for tr in traces if args.only in tr.name]
    agree, acc, false_kv = score(traces, args.verbose, args.jobs)
    elapsed = time.perf_counter() - t
    ok = not false_kv
    report = {"seed": args.seed, "traces": len(traces), "verdicts": {}, "false_kv_pressure_alerts": false_kv,
              "seconds": round(elapsed, 1)}
    for alert, v in SCORED:
        both, either = agree[v]
        if not either:
            continue
        share = both / either
        target = TARGETS.get(v, 0.90)
        ok &= share >= target
        report["verdicts"][v] = {"alert": alert, "agreement": round(share, 4), "points_either": either,
                                 "accuracy": round(acc[v][0] / acc[v][1], 4), "target": target,
                                 "pass": share >= target}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"alerts vs verdicts: {len(traces)} traces, seed {args.seed}, promtool "
              f"({elapsed:.1f} s)")
        print(f"{'verdict':<20}{'alert':<26}{'agreement':>10}{'points':>8}{'accuracy':>10}  target")
        for v, r in report["verdicts"].items():
            print(f"{v:<20}{r['alert']:<26}{r['agreement']:>10.3f}{r['points_either']:>8}{r['accuracy']:>10.3f}"
                  f"  >= {r['target']:.2f} {'ok' if r['pass'] else 'FAIL'}")
        print("kv-pressure alerts on look-alike traces:", false_kv or "none")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Accuracy of the diagnosis on the labelled scenario suite: per-verdict precision and recall,
seconds from onset to detection, and verdict changes per replica-hour (against the labelled ones).

Three sources of labelled traces: the synthetic scenarios (tests/scenarios.py), the simulator,
and the engine-page traces in tests/unit/data/labelled/ (pages as vLLM and SGLang write them:
LoRA adapter slots, data-parallel ranks, SGLang retraction cadence, overloads, a livelock, fleet
imbalance; format in that folder's README.md), which also score the fleet imbalance finding.

Every trace is written as a scrape log (the `kvwatch diagnose` format, pages in the trace's
vLLM dialect) and diagnosed from the file, so the whole path is measured: reader -> parser ->
history -> rules. Scoring:
  * per scrape, against the phase label; the first two scrape intervals after each labelled
    onset are not scored (the verdict is allowed that long to catch up), nor unlabelled scrapes;
  * detection: for each onset after the start of a trace, the time until the verdict first
    equals the label (missed if it never does before the next onset).

Usage: .venv/bin/python bench/bench_diagnosis.py [--seed N] [--json] [--only SUBSTRING] [--no-sim]
                                                [--no-labelled] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests import labelled  # noqa: E402
from tests.scenarios import sim_traces, synthetic_traces  # noqa: E402
from tui.core.model import VERDICTS  # noqa: E402
from tui.core.offline import diagnose_file  # noqa: E402
from tui.core.record import Recorder  # noqa: E402

TARGETS = {"kv-pressure": 0.95}  # every other verdict: 0.90
NO_FALSE_KV = ("compute", "host", "capped", "stalled", "steady", "idle", "light", "throttled", "ecc", "burst")


def run_trace(tr, tmp: str):
    path = os.path.join(tmp, tr.name.replace(":", "_") + ".jsonl.gz")
    with Recorder(path) as rec:
        rec.write(s for s, _ in tr.rows)
    res = diagnose_file(path, keep_points=True)
    replica = tr.rows[0][0].replica
    return dict(res.replicas[replica].points), res.problems


def score(traces):
    conf: dict[tuple[str, str], int] = {}
    latencies: dict[str, list[float]] = {}
    misses: dict[str, int] = {}
    false_kv: dict[str, int] = {}
    per_trace = []
    with tempfile.TemporaryDirectory() as tmp:
        for scn in traces:
            pred, problems = run_trace(scn, tmp)
            assert not problems, problems
            rows, onsets = scn.rows, scn.onsets
            grace = 2 * scn.interval
            t_start = rows[0][0].ts
            wrong = 0
            for s, label in rows:
                if label is None:
                    continue
                last_on = max((t for t, _ in onsets if t <= s.ts), default=t_start)
                if s.ts - last_on < grace:
                    continue
                p = pred.get(s.ts, "missing")
                conf[(label, p)] = conf.get((label, p), 0) + 1
                wrong += p != label
                if p == "kv-pressure" and label != "kv-pressure" and any(k in scn.name for k in NO_FALSE_KV) \
                        and "long-prompts" not in scn.name:
                    false_kv[scn.name] = false_kv.get(scn.name, 0) + 1
            for i, (t_on, v) in enumerate(onsets):
                if t_on <= t_start:
                    continue
                t_next = onsets[i + 1][0] if i + 1 < len(onsets) else float("inf")
                hit = next((ts for ts, p in sorted(pred.items()) if t_on <= ts < t_next and p == v), None)
                if hit is None:
                    misses[v] = misses.get(v, 0) + 1
                else:
                    latencies.setdefault(v, []).append((hit - t_on, (hit - t_on) / scn.interval))
            seq = [p for _, p in sorted(pred.items()) if p != "unknown"]
            changes = sum(1 for a, b in zip(seq, seq[1:], strict=False) if a != b)
            hours = (rows[-1][0].ts - t_start + scn.interval) / 3600
            per_trace.append((scn.name, len(rows), wrong, changes, max(0, len(onsets) - 1), hours))
    return conf, latencies, misses, false_kv, per_trace


def score_pages(conf, latencies, misses, per_trace, only: str = ""):
    """The engine-page traces (tests/unit/data/labelled), scored like the others; returns the
    scrapes judged `stalled` while generation advanced, and the fleet imbalance figures."""
    stalled_adv: dict[str, int] = {}
    fleet = {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "detections": [], "files": 0}
    for path in labelled.paths():
        if only and only not in os.path.basename(path):
            continue
        for sc in labelled.score_file(path):
            for a, b in sc.pairs:
                conf[(a, b)] = conf.get((a, b), 0) + 1
            for lab, d in sc.detections:
                if d is None:
                    misses[lab] = misses.get(lab, 0) + 1
                else:
                    latencies.setdefault(lab, []).append((d, d / sc.interval))
            per_trace.append((sc.name, len(sc.points), sum(a != b for a, b in sc.pairs), sc.changes,
                              sc.labelled_changes, sc.hours))
            if sc.stalled_while_advancing:
                stalled_adv[sc.name] = sc.stalled_while_advancing
        pts = labelled.fleet_points(path)
        if not any(lab for _, _, lab in pts):
            continue
        fleet["files"] += 1
        interval = pts[1][0] - pts[0][0] if len(pts) > 1 else 5.0
        onsets, prev = [], None
        for ts, _, lab in pts:
            if lab is not None and lab != prev:
                onsets.append((ts, lab))
                prev = lab
        for ts, groups, lab in pts:
            if lab is None or any(0 < ts - t0 < 2 * interval for t0, _ in onsets[1:]):
                continue
            on = bool(groups)
            key = ("tp" if on else "fn") if lab == "imbalanced" else ("fp" if on else "tn")
            fleet[key] += 1
        for i, (t0, lab) in enumerate(onsets):
            if lab != "imbalanced":
                continue
            t_next = onsets[i + 1][0] if i + 1 < len(onsets) else float("inf")
            hit = next((ts for ts, g, _ in pts if t0 <= ts < t_next and g), None)
            fleet["detections"].append(None if hit is None else (hit - t0) / interval)
    return stalled_adv, fleet


def diagnose_cost(seed: int, replicas: int = 256) -> float:
    """Microseconds per replica per refresh: `replicas` histories fed one pressure trace
    (measured first, before the suite fills memory)."""
    from tui.core.diagnosis import Thresholds, diagnose
    from tests.scenarios import generate, suite
    from tui.core.history import ReplicaHistory

    scn = next(x for x in suite(seed) if x.name == "long-prompts.v1")
    rows = list(generate(scn, seed))
    t = Thresholds()
    hs = [ReplicaHistory(f"r{i}") for i in range(replicas)]
    total, n = 0.0, 0
    for s, _ in rows:
        for h in hs:
            h.add(s)
        t0 = time.perf_counter()
        for h in hs:
            diagnose(h, s.ts, t)
        total += time.perf_counter() - t0
        n += 1
    return total / n / replicas * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", default="", help="only traces whose name contains this")
    ap.add_argument("--no-sim", action="store_true", help="synthetic traces only (skip the simulator)")
    ap.add_argument("--no-labelled", action="store_true", help="skip the engine-page traces (tests/unit/data/labelled)")
    ap.add_argument("--verbose", action="store_true", help="list traces with misclassified scrapes")
    args = ap.parse_args()
    cost = diagnose_cost(args.seed)
    t = time.perf_counter()
    traces = synthetic_traces(args.seed) + ([] if args.no_sim else sim_traces(args.seed))
    scenarios = [tr for tr in traces if args.only in tr.name]
    conf, lat, misses, false_kv, per_trace = score(scenarios)
    n_pages = len(per_trace)
    stalled_adv, fleet = ({}, None) if args.no_labelled else score_pages(conf, lat, misses, per_trace, args.only)
    n_pages = len(per_trace) - n_pages
    elapsed = time.perf_counter() - t
    labels = sorted({a for a, _ in conf} | {b for _, b in conf}, key=lambda v: VERDICTS.index(v) if v in VERDICTS else 99)
    report = {"seed": args.seed, "traces": len(scenarios) + n_pages, "scored_scrapes": sum(conf.values()), "verdicts": {}}
    ok = True
    for v in labels:
        tp = conf.get((v, v), 0)
        fp = sum(n for (a, b), n in conf.items() if b == v and a != v)
        fn = sum(n for (a, b), n in conf.items() if a == v and b != v)
        if tp + fn == 0:
            continue
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        ls = lat.get(v, [])
        med = statistics.median(x for x, _ in ls) if ls else None
        med_iv = statistics.median(x for _, x in ls) if ls else None
        target = TARGETS.get(v, 0.90)
        passed = prec >= target and rec >= target
        ok &= passed
        report["verdicts"][v] = {"precision": round(prec, 4), "recall": round(rec, 4), "support": tp + fn,
                                 "onsets": len(ls) + misses.get(v, 0), "missed_onsets": misses.get(v, 0),
                                 "median_detection_s": med, "median_detection_intervals": med_iv,
                                 "target": target, "pass": passed}
    all_lat = [x for ls in lat.values() for x in ls]
    report["median_detection_s"] = statistics.median(x for x, _ in all_lat) if all_lat else None
    report["median_detection_intervals"] = statistics.median(x for _, x in all_lat) if all_lat else None
    ok &= all(r["median_detection_intervals"] is None or r["median_detection_intervals"] <= 2
              for r in report["verdicts"].values())
    report["false_kv_pressure_scrapes"] = false_kv
    report["seconds"] = round(elapsed, 1)
    report["diagnose_us_per_replica"] = round(cost, 1)
    ok &= not false_kv
    # verdict changes: per replica, at most the labelled changes + 2; per replica-hour overall
    hours = sum(h for *_, h in per_trace)
    changes = sum(c for _, _, _, c, _, _ in per_trace)
    lab_changes = sum(lc for _, _, _, _, lc, _ in per_trace)
    over = {name: [c, lc] for name, _, _, c, lc, _ in per_trace if c > lc + 2}
    report["verdict_changes_per_replica_hour"] = round(changes / hours, 1) if hours else None
    report["labelled_changes_per_replica_hour"] = round(lab_changes / hours, 1) if hours else None
    report["replicas_over_labelled_changes_plus_2"] = over
    report["stalled_while_generation_advances"] = stalled_adv
    report["engine_page_traces"] = n_pages
    ok &= not over and not stalled_adv
    if fleet is not None and fleet["files"]:
        tp, fp, fn = fleet["tp"], fleet["fp"], fleet["fn"]
        dets = fleet["detections"]
        report["fleet_imbalance"] = {
            "precision": round(tp / (tp + fp), 4) if tp + fp else 0.0,
            "recall": round(tp / (tp + fn), 4) if tp + fn else 0.0,
            "scored_polls": tp + fp + fn + fleet["tn"], "onsets": len(dets),
            "missed_onsets": sum(d is None for d in dets),
            "median_detection_intervals": statistics.median(d for d in dets if d is not None)
            if any(d is not None for d in dets) else None,
            "false_polls_all_busy_or_idle": fp}
        fi = report["fleet_imbalance"]
        ok &= fi["precision"] >= 0.9 and fi["recall"] >= 0.9 and not fi["missed_onsets"]
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        n_sim = sum(tr.source == "sim" for tr in scenarios)
        print(f"labelled suite: {len(scenarios) + n_pages} traces ({len(scenarios) - n_sim} synthetic, {n_sim} from the"
              f" simulator, {n_pages} engine-page replicas), {report['scored_scrapes']} scored scrapes, seed {args.seed}"
              f" ({elapsed:.1f} s)")
        print(f"{'verdict':<20}{'precision':>10}{'recall':>8}{'support':>9}{'onsets':>8}{'missed':>8}"
              f"{'median det.':>13}{'(intervals)':>12}  target")
        for v, r in report["verdicts"].items():
            med = "-" if r["median_detection_s"] is None else f"{r['median_detection_s']:.1f} s"
            iv = "-" if r["median_detection_intervals"] is None else f"{r['median_detection_intervals']:.1f}"
            print(f"{v:<20}{r['precision']:>10.3f}{r['recall']:>8.3f}{r['support']:>9}{r['onsets']:>8}"
                  f"{r['missed_onsets']:>8}{med:>13}{iv:>12}  >= {r['target']:.2f} {'ok' if r['pass'] else 'FAIL'}")
        med, iv = report["median_detection_s"], report["median_detection_intervals"]
        print(f"median detection over all onsets: {'-' if med is None else f'{med:.1f} s'}"
              f" = {'-' if iv is None else f'{iv:.1f}'} scrape intervals (5 s; 2 s in the .fast traces);"
              " target <= 2 intervals")
        print("false kv-pressure on non-KV traces:", false_kv or "none")
        print(f"verdict changes: {report['verdict_changes_per_replica_hour']} per replica-hour (labelled "
              f"{report['labelled_changes_per_replica_hour']}); replicas over labelled + 2: {over or 'none'}")
        print(f"stalled while generation advances: {stalled_adv or 'never'}")
        if "fleet_imbalance" in report:
            fi = report["fleet_imbalance"]
            md = fi["median_detection_intervals"]
            print(f"fleet imbalance: precision {fi['precision']:.3f} recall {fi['recall']:.3f} over "
                  f"{fi['scored_polls']} polls, {fi['onsets']} onset(s), {fi['missed_onsets']} missed, median "
                  f"detection {'-' if md is None else f'{md:.1f}'} intervals")
        print(f"diagnose cost: {report['diagnose_us_per_replica']:.0f} us per replica per refresh "
              f"(256 replicas: {report['diagnose_us_per_replica'] * 256 / 1000:.1f} ms)")
        if args.verbose:
            print("\nconfusion (label -> predicted: count):")
            for (a, b), n in sorted(conf.items()):
                if a != b:
                    print(f"  {a:>20} -> {b:<20} {n}")
            for name, n, wrong, c, lc, _ in per_trace:
                if wrong or c > lc + 2:
                    print(f"  {name}: {wrong}/{n} scrapes misclassified, {c} verdict changes ({lc} labelled)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

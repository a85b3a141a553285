"""`promtool test rules` cases for the rules `kvwatch rules` writes (default thresholds, 30 s scrapes).

Each case is one replica's series (vLLM V1 / V0, SGLang, a data-parallel pod, DCGM) and, at one
evaluation time, exactly the alerts that must fire, with their labels and $value; every other
alert is expected silent at that time, so the look-alikes (a pre-allocated pool, a prefix-heavy
replica at KV 0.93, a busy compute-bound replica, a concurrency-capped one) prove that the
kv-pressure alert stays quiet. The annotations expected are the rule's templates expanded here
with those labels and that value, so a wrong $value fails too.

`python -m tests.unit.alerting_cases DIR` writes DIR/rules.yml and DIR/kvwatch_test.yml for
`promtool test rules DIR/kvwatch_test.yml` by hand.
"""

from __future__ import annotations

import os
import re
import sys

import yaml

from tui.core.alerting import ALERTS, RuleOptions, build_groups, render

INTERVAL = 30.0
STEPS = 20  # 10 minutes of scrapes
EVAL = "8m"
NS = "inference"


def _vals(v, steps: int = STEPS) -> str:
    """Constant, a per-step counter increase (("inc", d)), or an explicit list."""
    if isinstance(v, str):
        return v
    if isinstance(v, tuple) and v[0] == "inc":
        if isinstance(v[1], list):  # increases per step: the counter's running total
            total, out = 0, []
            for d in v[1]:
                total += d
                out.append(str(total))
            return " ".join(out)
        return f"0+{v[1]}x{steps}"
    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    return f"{v}+0x{steps}"


def _s(name: str, pod: str, value, **labels) -> dict:
    lab = {"namespace": NS, "pod": pod, **labels}
    inner = ",".join(f'{k}="{v}"' for k, v in lab.items())
    return {"series": f"{name}{{{inner}}}", "values": _vals(value)}


def vllm_v1(pod: str, kv, waiting, running, preempt_inc=0, gen_inc=1500, deferred=0, engine="0", util=None,
            throttle=None) -> list[dict]:
    e = {"engine": engine, "model_name": "llama"}
    out = [
        _s("up", pod, 1, job="vllm"),
        _s("vllm:kv_cache_usage_perc", pod, kv, **e),
        _s("vllm:num_requests_waiting", pod, waiting, **e),
        _s("vllm:num_requests_running", pod, running, **e),
        _s("vllm:num_requests_waiting_by_reason", pod, waiting if deferred == 0 else 0, reason="capacity", **e),
        _s("vllm:num_requests_waiting_by_reason", pod, deferred, reason="deferred", **e),
        _s("vllm:num_preemptions_total", pod, ("inc", preempt_inc), **e),
        _s("vllm:generation_tokens_total", pod, ("inc", gen_inc), **e),
        _s("vllm:prompt_tokens_total", pod, ("inc", gen_inc * 4), **e),
    ]
    return out + dcgm(pod, util, throttle)


def vllm_v0(pod: str, kv, waiting, running, preempt_inc=0, gen_inc=1500) -> list[dict]:
    e = {"model_name": "llama"}
    return [
        _s("up", pod, 1, job="vllm"),
        _s("vllm:gpu_cache_usage_perc", pod, kv, **e),
        _s("vllm:num_requests_waiting", pod, waiting, **e),
        _s("vllm:num_requests_running", pod, running, **e),
        _s("vllm:num_requests_swapped", pod, 0, **e),
        _s("vllm:num_preemptions_total", pod, ("inc", preempt_inc), **e),
        _s("vllm:generation_tokens_total", pod, ("inc", gen_inc), **e),
        _s("vllm:prompt_tokens_total", pod, ("inc", gen_inc * 4), **e),
    ]


def sglang(pod: str, usage, queue, running, retract_inc=0, gen_inc=1500) -> list[dict]:
    e = {"model_name": "llama"}
    return [
        _s("up", pod, 1, job="sglang"),
        _s("sglang:token_usage", pod, usage, **e),
        _s("sglang:num_queue_reqs", pod, queue, **e),
        _s("sglang:num_running_reqs", pod, running, **e),
        _s("sglang:num_retracted_requests_total", pod, ("inc", retract_inc), **e),
        _s("sglang:generation_tokens_total", pod, ("inc", gen_inc), **e),
        _s("sglang:prompt_tokens_total", pod, ("inc", gen_inc * 4), **e),
    ]


def dcgm(pod: str, util=None, throttle=None, xid=None, ecc=None) -> list[dict]:
    g = {"gpu": "0", "Hostname": "node-1"}
    out = []
    if util is not None:
        out.append(_s("DCGM_FI_DEV_GPU_UTIL", pod, util, **g))
    if throttle is not None:
        out.append(_s("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", pod, throttle, **g))
    if xid is not None:
        out.append(_s("DCGM_FI_DEV_XID_ERRORS", pod, xid, **g))
    if ecc is not None:
        out.append(_s("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", pod, ecc, **g))
    return out


# running that moves (not pinned at a cap), as a scheduler with headroom shows it
WANDER = [8, 10, 7, 9, 11, 8, 10, 7, 9, 11, 8, 10, 7, 9, 11, 8, 10, 7, 9, 11, 8]

# name -> (series, {alert: (value, extra labels)} that must fire at EVAL; every other alert must not)
CASES: dict[str, tuple[list[dict], dict[str, tuple[float, dict]]]] = {
    "kv-pressure, vLLM V1": (vllm_v1("v1-thrash", 0.97, 12, WANDER, preempt_inc=2, gen_inc=400),
                             {"KVWatchKVCachePressure": (0.97, {})}),
    "kv-pressure, vLLM V0 (gpu_cache_usage_perc)": (vllm_v0("v0-thrash", 0.96, 12, WANDER, preempt_inc=3),
                                                    {"KVWatchKVCachePressure": (0.96, {})}),
    "kv-pressure, SGLang (token_usage, retractions)": (sglang("sgl-thrash", 0.98, 9, WANDER, retract_inc=2),
                                                       {"KVWatchKVCachePressure": (0.98, {})}),
    "kv-pressure, data-parallel pod: the worst engine": (
        vllm_v1("dp-thrash", 0.50, 0, 10, engine="0")[1:]
        + vllm_v1("dp-thrash", 0.95, 6, WANDER, preempt_inc=2, engine="1"),
        {"KVWatchKVCachePressure": (0.95, {})}),
    "kv-pressure, KV full with a queue the cap does not hold": (vllm_v1("queue-thrash", 0.99, 20, WANDER),
                                                                {"KVWatchKVCachePressure": (0.99, {})}),
    # hysteresis as in the live view: once in kv-pressure, KV down to kv_clear (0.85) with a recent
    # preemption keeps it; the same KV without preemptions or a queue leaves it
    "kv-pressure holds at KV 0.87 while preemptions are recent": (
        vllm_v1("holding", [0.97] * 12 + [0.87] * 9, [12] * 12 + [0] * 9, WANDER,
                preempt_inc=[2] * 12 + [1, 0, 0, 1, 0, 0, 1, 0, 0]),
        {"KVWatchKVCachePressure": (0.87, {})}),
    "kv-pressure clears at KV 0.87 with no preemptions and no queue": (
        vllm_v1("cleared", [0.97] * 12 + [0.87] * 9, [12] * 12 + [0] * 9, WANDER, preempt_inc=[2] * 12 + [0] * 9),
        {}),
    # -- look-alikes: the kv-pressure alert must stay silent --------------------------------------
    "healthy replica with a pre-allocated pool": (vllm_v1("idle", 0, 0, 0, gen_inc=0, util=1), {}),
    "prefix-heavy replica at KV 0.93, no queue": (vllm_v1("prefix", 0.93, 0, [30, 31, 29] * 7, util=70), {}),
    "busy compute-bound replica": (vllm_v1("compute", 0.65, 0, [62, 66, 64] * 7, gen_inc=9000, util=95), {}),
    "concurrency-capped, KV headroom": (vllm_v1("capped", 0.5, 20, 64, util=70),
                                        {"KVWatchConcurrencyCapped": (20, {})}),
    "concurrency-capped at KV 0.93 (the cap holds the queue: overloaded, not kv-pressure)": (
        vllm_v1("capped-high-kv", 0.93, 20, 64, util=70), {"KVWatchOverloaded": (20, {})}),
    "a lone preemption at KV 0.92": (vllm_v1("lone", 0.92, 0, WANDER, preempt_inc=[0] * 10 + [1] + [0] * 10), {}),
    # -- the other verdicts -----------------------------------------------------------------------
    "overloaded: a held queue, KV with no room to raise the cap": (
        vllm_v1("overloaded", 0.82, 30, WANDER, util=60), {"KVWatchOverloaded": (30, {})}),
    "stalled: requests in flight, counters frozen": (vllm_v1("wedged", 0.62, 10, 12, gen_inc=0, util=100),
                                                     {"KVWatchStalled": (22, {})}),
    "stalled: waiting all deferred": (vllm_v1("deferred", 0.2, 14, 2, deferred=14),
                                      {"KVWatchStalled": (16, {})}),
    "node-fault: hardware thermal slowdown": (vllm_v1("thermal", 0.5, 0, WANDER, util=99, throttle=64),
                                              {"KVWatchNodeFault": (1, {"fault": "throttle"})}),
    "node-fault: XID": (vllm_v1("xid", 0.5, 0, WANDER) + dcgm("xid", xid=79), {"KVWatchNodeFault": (79, {"fault": "xid"})}),
    "node-fault: uncorrected ECC": (vllm_v1("ecc", 0.5, 0, WANDER) + dcgm("ecc", ecc=2),
                                    {"KVWatchNodeFault": (2, {"fault": "ecc"})}),
    "software power cap is not a fault": (vllm_v1("powercap", 0.5, 0, WANDER, util=99, throttle=4), {}),
    "node-fault wins over kv-pressure": (vllm_v1("sick-thrash", 0.97, 12, WANDER, preempt_inc=2, throttle=64),
                                         {"KVWatchNodeFault": (1, {"fault": "throttle"})}),
    "replica down": ([_s("up", "gone", [1] * 10 + [0] * 11, job="vllm"),
                      _s("vllm:num_requests_running", "gone", [8] * 10 + ["stale"] + ["_"] * 10, engine="0")],
                     {"KVWatchReplicaDown": (0, {})}),
}
# the fleet alarm needs a baseline: hours of a calm queue, then a queue far above it
ALARM = ([_s("vllm:num_requests_waiting", "spike", "2+0x700 100+0x5", engine="0")], "5h53m",
         {"KVWatchFleetAlarm": (100, {}), "KVWatchOverloaded": (100, {})})  # a queue held: overloaded too


def _go(v: float) -> str:
    """A float as Go's text/template prints it ({{ $value }})."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _expand(template: str, labels: dict[str, str], value: float) -> str:
    out = template.replace("{{ $value | humanizePercentage }}", f"{'%.4g' % (value * 100)}%")
    out = out.replace("{{ $value }}", _go(value))
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), "<no value>"), out)


def expected(rules: dict[str, dict], alert: str, pod: str, value: float, extra: dict) -> dict:
    r = rules[alert]
    labels = {"namespace": NS, "pod": pod, **r["labels"], **extra}
    ann = {k: _expand(v, labels, value) for k, v in r["annotations"].items()}
    return {"exp_labels": labels, "exp_annotations": ann}


def _pod(series: list[dict]) -> str:
    return re.search(r'pod="([^"]+)"', series[-1]["series"]).group(1)


def write(directory: str, options: RuleOptions | None = None, only: dict | None = None) -> str:
    """Write rules.yml and kvwatch_test.yml into `directory`; the test file's path. `only`: these
    cases (name -> (series, alerts)) instead of the whole set."""
    groups = build_groups(o=options or RuleOptions(scrape_interval_s=INTERVAL))
    with open(os.path.join(directory, "rules.yml"), "w", encoding="utf-8") as fh:
        fh.write(render(groups))
    rules = {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}
    names = [a for a, *_ in ALERTS]
    tests = []
    cases = [(name, series, EVAL, fire) for name, (series, fire) in (only or CASES).items()]
    if only is None:
        cases.append(("fleet alarm: a queue 50x its baseline", ALARM[0], ALARM[1], ALARM[2]))
    for name, series, at, fire in cases:
        pod = _pod(series)
        checks = []
        for alert in names:
            exp = [expected(rules, alert, pod, *fire[alert])] if alert in fire else []
            checks.append({"eval_time": at, "alertname": alert, "exp_alerts": exp})
        tests.append({"name": name, "interval": "30s", "input_series": series, "alert_rule_test": checks})
    doc = {"rule_files": ["rules.yml"], "evaluation_interval": "30s", "tests": tests}
    path = os.path.join(directory, "kvwatch_test.yml")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False, width=1 << 16)
    return path


if __name__ == "__main__":
    print(write(sys.argv[1] if len(sys.argv) > 1 else "."))

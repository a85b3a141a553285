"""`kvwatch rules`: what it writes passes real Prometheus' checks and unit tests (promtool)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.unit import alerting_cases
from tui.cli import main
from tui.core.alerting import RuleOptions, build_groups, validate
from tui.core.diagnosis.thresholds import Thresholds
from tui.core.history import Windows

promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (.ci/test installs it)")


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=300)


def _kvwatch_rules(tmp_path, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["rules", "--config", str(tmp_path / "absent.toml"), *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@promtool
@pytest.mark.parametrize("args", [
    (),
    ("--scrape-interval", "15s", "--by", "namespace,pod,model_name", "--selector", 'job="vllm"'),
    ("--gpu-by", "exported_namespace,exported_pod", "--runbook-base", "https://wiki.example/runbooks",
     "--runbook-url", "kv-pressure=https://wiki.example/kv"),
])
def test_promtool_check_rules_on_every_format(tmp_path, capsys, args):
    rc, text, err = _kvwatch_rules(tmp_path, capsys, *args)
    assert rc == 0, err
    (tmp_path / "rules.yml").write_text(text)
    res = _promtool("check", "rules", str(tmp_path / "rules.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout

    rc, text, err = _kvwatch_rules(tmp_path, capsys, "--format", "prometheusrule", "--namespace", "monitoring",
                                   "--labels", "release=kube-prometheus-stack", *args)
    assert rc == 0, err
    doc = yaml.safe_load(text)
    assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["kind"] == "PrometheusRule"
    assert doc["metadata"]["namespace"] == "monitoring"
    assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (tmp_path / "spec.yml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    res = _promtool("check", "rules", str(tmp_path / "spec.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_every_alert_carries_severity_verdict_and_runbook():
    groups = build_groups(o=RuleOptions(runbook_urls={"kv-pressure": "https://wiki.example/kv"}))
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    assert {a["labels"]["verdict"] for a in alerts} == {"down", "node-fault", "stalled", "kv-pressure", "overloaded",
                                                        "concurrency-capped", "alarm"}
    for a in alerts:
        assert a["labels"]["severity"] in ("critical", "warning")
        assert "{{ $labels.pod }}" in a["annotations"]["summary"]
        assert "$value" in a["annotations"]["summary"]
        assert a["annotations"]["runbook_url"]
    kv = next(a for a in alerts if a["labels"]["verdict"] == "kv-pressure")
    assert kv["annotations"]["runbook_url"] == "https://wiki.example/kv"
    text = yaml.safe_dump(groups)
    for name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:num_preemptions_total",
                 "vllm:num_preemptions[", "sglang:token_usage", "sglang:num_retracted_requests_total"):
        assert name in text, name


@promtool
def test_promtool_unit_tests_for_every_alert_and_the_look_alikes(tmp_path):
    path = alerting_cases.write(str(tmp_path))
    res = _promtool("test", "rules", path)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    assert "SUCCESS" in res.stdout


@promtool
def test_a_naive_kv_rule_fails_the_look_alike_cases(tmp_path):
    """The unit tests can fail: "KV usage >= 90%" alone pages on the prefix-heavy replica."""
    path = alerting_cases.write(str(tmp_path))
    rules = tmp_path / "rules.yml"
    doc = yaml.safe_load(rules.read_text())
    for r in doc["groups"][0]["rules"]:
        if r.get("record") == "kvwatch:verdict_kv_pressure":
            r["expr"] = "kvwatch:kv_usage >= 0.9"
    rules.write_text(yaml.safe_dump(doc))
    res = _promtool("test", "rules", path)
    assert res.returncode != 0
    assert "prefix-heavy replica at KV 0.93" in res.stdout + res.stderr


def test_bad_thresholds_are_refused_and_nothing_is_written(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[thresholds]\nkv_high = 1.5\n")
    rc = main(["rules", "--config", str(bad)])
    out = capsys.readouterr()
    assert rc == 2 and out.out == ""
    assert "kv_high" in out.err and "refusing" in out.err

    bad.write_text("[windows]\nstale_s = -5\n")
    rc = main(["rules", "--config", str(bad), "-o", str(tmp_path / "out.yml")])
    out = capsys.readouterr()
    assert rc == 2 and "stale_s" in out.err
    assert not (tmp_path / "out.yml").exists()

    rc, text, err = _kvwatch_rules(tmp_path, capsys, "--scrape-interval=-30s")
    assert rc == 2 and text == "" and "scrape interval" in err


@pytest.mark.parametrize("t, w, o, words", [
    (Thresholds(kv_high=1.2), Windows(), RuleOptions(), "kv_high"),
    (Thresholds(kv_clear=0.95), Windows(), RuleOptions(), "kv_clear"),
    (Thresholds(), Windows(stale_s=-1), RuleOptions(), "stale"),
    (Thresholds(queue_points=0), Windows(), RuleOptions(), "queue_points"),
    (Thresholds(), Windows(), RuleOptions(by=("pod-name",)), "label"),
    (Thresholds(), Windows(), RuleOptions(gpu_by=("exported_pod",)), "--gpu-by"),
    (Thresholds(), Windows(), RuleOptions(selector='job="a"} or vector(1) or {x="y"'), "selector"),
    (Thresholds(), Windows(), RuleOptions(selector="job=vllm"), "selector"),
])
def test_validate_names_what_makes_no_sense(t, w, o, words):
    with pytest.raises(ValueError, match=words):
        validate(t, w, o)


@promtool
def test_alerts_agree_with_the_verdict_timeline_on_suite_traces():
    """A slice of bench/bench_alert_rules.py: Prometheus evaluates the rules over labelled traces
    and the alerts follow kvwatch's own verdicts; no kv-pressure alert on the look-alikes."""
    import os
    import sys

    from tests.scenarios import Trace, generate, suite

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import bench_alert_rules as bench

    keep = ("long-prompts.v1", "burst.v0", "steady-high-kv-no-preempt.v1", "concurrency-capped.v1-early",
            "stalled.v1", "throttled-node.v1")
    traces = []
    for scn in suite(1):
        if scn.name in keep:
            rows = tuple(generate(scn, 1))
            traces.append(Trace(scn.name, scn.interval, rows, tuple(scn.onsets(rows[0][0].ts))))
    assert len(traces) == len(keep)
    agree, _, false_kv = bench.score(traces)
    assert not false_kv
    for v in ("kv-pressure", "concurrency-capped", "stalled", "node-fault"):
        both, either = agree[v]
        assert either and both / either >= (0.95 if v == "kv-pressure" else 0.9), (v, both, either)


@promtool
def test_gpu_by_maps_the_dcgm_exporters_labels_onto_the_replica(tmp_path):
    """Scraped by the Operator, the DCGM exporter's pod labels arrive as exported_namespace /
    exported_pod (its own target is namespace/pod): --gpu-by carries them over to the replica."""
    from tests.unit.alerting_cases import NS, _s, vllm_v1

    exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p"}

    def dcgm(name: str, value) -> dict:
        s = _s(name, "thermal", value, gpu="0")
        s["series"] = s["series"].replace(f'namespace="{NS}",pod="thermal"',
                                          f'exported_namespace="{NS}",exported_pod="thermal",'
                                          f'namespace="{exporter["namespace"]}",pod="{exporter["pod"]}"')
        return s

    series = [dcgm("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 64), dcgm("DCGM_FI_DEV_GPU_UTIL", 99),
              *vllm_v1("thermal", 0.5, 0, [8, 9] * 10 + [8])]
    path = alerting_cases.write(str(tmp_path), RuleOptions(scrape_interval_s=30,
                                                           gpu_by=("exported_namespace", "exported_pod")),
                                {"node-fault through exported labels": (series,
                                                                        {"KVWatchNodeFault": (1, {"fault": "throttle"})})})
    res = _promtool("test", "rules", path)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]

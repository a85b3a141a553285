"""PromQL the Prometheus source sends (real Prometheus accepts them: tests/integration)."""

from __future__ import annotations

import pytest

from tui.core.metrics import names
from tui.core.sources.base import SourceError
from tui.core.sources.gpu.dcgm import SPARK_FIELDS, gpu_query
from tui.core.sources.promql import (
    QUANTILES,
    RATES,
    FleetQueries,
    parse_match,
    quantiles_query,
    rates_query,
    scalars_query,
)

M = 'namespace="inference",app=~"vllm-.*"'


@pytest.mark.parametrize(
    "given, inner",
    [
        ('{namespace="inference"}', 'namespace="inference"'),
        ('namespace="inference"', 'namespace="inference"'),
        (' { namespace = "a" , pod !~ "x.*" } ', 'namespace = "a",pod !~ "x.*"'),
        ('{job="a,b}c"}', 'job="a,b}c"'),
        ('{model_name="m\\"q"}', 'model_name="m\\"q"'),
        ("", ""),
        ("{}", ""),
        (None, ""),
    ],
)
def test_match_accepts_label_matchers(given, inner):
    assert parse_match(given) == inner


@pytest.mark.parametrize(
    "bad",
    ["namespace=inference", 'up{a="b"}', '{__name__="vllm:x"}', 'a="b" b="c"', '{a="b"} or vector(1)', '{a="b'],
)
def test_match_refuses_anything_but_matchers(bad):
    with pytest.raises(SourceError, match="bad --match"):
        parse_match(bad)


def test_scalars_query_fetches_every_alias_with_the_match_and_without_router_series():
    q = scalars_query(M)
    for canon, exposed in names.SCALARS.items():
        if canon == "requests_success":
            continue
        for n in exposed:
            assert n in q
    assert names.WAITING_BY_REASON in q
    assert "max by (__name__, namespace, pod, instance, engine, model_name, reason)" in q
    assert q.count(M) == 4 and q.count('server=""') == 3
    assert '"kvw", "sample_ts"' in q and '"kvw", "process_cpu"' in q


def test_rates_fold_every_field_once_and_alias_old_names_per_series():
    q = rates_query(M, 60)
    for field in (*RATES, "prefix_hit_rate", "cpu_cores", "up_down"):
        assert q.count(f'"kvw", "{field}"') == 1
    assert "[60s]" in q and "[1m]" not in q
    # the V1 and V0 prefix counters: rate(new) or rate(old) inside one sum
    assert "rate(vllm:prefix_cache_hits_total{%s,server=\"\"}[60s]) or rate(vllm:gpu_prefix_cache_hits_total" % M in q
    assert "> 0)" in q  # idle servers: no 0/0 NaN ratio


def test_quantiles_cover_both_generations():
    q = quantiles_query(M, 30)
    for field in QUANTILES:
        assert q.count(f'"kvw", "{field}"') == 1
    assert "histogram_quantile(0.95, sum by (namespace, pod, instance, le)" in q
    assert "vllm:inter_token_latency_seconds_bucket" in q and "vllm:time_per_output_token_seconds_bucket" in q


def test_backfill_subsets_fetch_only_what_sparklines_draw():
    q = rates_query(M, 60, ("preemptions_per_s",))
    assert q.count('"kvw"') == 1 and "up{" not in q
    assert quantiles_query(M, 60, ("ttft_p95_s",)).count("histogram_quantile") == 1
    g = gpu_query("", SPARK_FIELDS)
    assert "DCGM_FI_DEV_FB_USED" in g and "DCGM_FI_DEV_XID_ERRORS" not in g


def test_query_count_is_independent_of_fleet_size():
    q = FleetQueries.build(M, 60)
    assert len(q.__slots__) == 4  # scalars, rates, quantiles, cache_config (+1 GPU query)
    for text in (q.scalars, q.rates, q.quantiles, q.cache_config, gpu_query()):
        assert "pod=" not in text  # no per-replica selectors
        assert text.count("(") == text.count(")")

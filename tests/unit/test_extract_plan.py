"""to_sample's page plans: a page laid out as an earlier one (the same series in the same order)
reuses that page's plan; anything else must be read as if no plan existed. Each case reads a
page with the plan of another page left in place and compares, field by field and in order
(repr), with the same page read from a cold plan cache."""

from __future__ import annotations

import math
import random

import pytest

from bench.realpage import render_v1_page
from tui.core.metrics import extract
from tui.core.metrics.extract import parse_vllm, to_sample

LAB = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'


def cold(text: str) -> str:
    extract._PAGE_PLANS.clear()
    return repr(to_sample(parse_vllm(text)))


def after(first: str, then: str) -> str:
    """`then` read while the plan of `first` is cached."""
    extract._PAGE_PLANS.clear()
    to_sample(parse_vllm(first))
    to_sample(parse_vllm(first))
    return repr(to_sample(parse_vllm(then)))


def line_of(text: str, start: str) -> str:
    (line,) = [ln for ln in text.split("\n") if ln.startswith(start)]
    return line


def replace_value(text: str, start: str, value: str) -> str:
    line = line_of(text, start)
    return text.replace(line, line.rpartition(" ")[0] + " " + value)


A = render_v1_page(seed=1)
B = render_v1_page(seed=2, kv_usage=0.93, running=12, waiting=40)


def test_same_layout_reuses_the_plan_and_reads_the_new_values():
    extract._PAGE_PLANS.clear()
    to_sample(parse_vllm(A))
    plans = dict(extract._PAGE_PLANS)
    s = to_sample(parse_vllm(B))
    assert extract._PAGE_PLANS == plans  # reused, none built
    assert repr(s) == cold(B)
    assert s.value("kv_usage") == 0.93 and s.value("running") == 12.0 and s.value("waiting") == 40.0


def test_two_series_swapped_same_length_and_ends():
    running = line_of(B, "vllm:num_requests_running{")
    waiting = line_of(B, "vllm:num_requests_waiting{")
    swapped = B.replace(running, "\0").replace(waiting, running).replace("\0", waiting)
    assert after(A, swapped) == cold(swapped)
    s = to_sample(parse_vllm(swapped))
    assert s.value("running") == 12.0 and s.value("waiting") == 40.0


def test_an_extra_bucket_changes_the_layout():
    le = line_of(B, 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001"')
    extra = B.replace(le, le.replace('le="0.001"', 'le="0.0005"').rpartition(" ")[0] + " 0.0\n" + le)
    assert after(A, extra) == cold(extra)
    assert to_sample(parse_vllm(extra)).hist("ttft").bounds[0] == 0.0005


def test_a_new_label_value_appears():
    abort = line_of(B, f'vllm:request_success_total{{{LAB},finished_reason="abort"}}')
    more = B.replace(abort, abort + "\n" + abort.replace('"abort"', '"repetition"').rpartition(" ")[0] + " 7.0")
    assert after(A, more) == cold(more)
    base = to_sample(parse_vllm(B)).value("requests_success")
    assert to_sample(parse_vllm(more)).value("requests_success") == base + 7.0


def test_a_new_engine_appears():
    two = render_v1_page(seed=3, engines=2)
    assert after(A, two) == cold(two)
    assert after(two, A) == cold(A)
    assert list(to_sample(parse_vllm(two)).engines) == ["0", "1"]


def test_a_series_disappears_and_the_deprecated_name_stands_in():
    gone = B.replace(line_of(B, "vllm:kv_cache_usage_perc{"), "")
    gone = replace_value(gone, "vllm:gpu_cache_usage_perc{", "0.5")
    assert after(A, gone) == cold(gone)
    assert to_sample(parse_vllm(gone)).value("kv_usage") == 0.5


def test_a_histogram_loses_its_inf_bucket():
    inf = line_of(B, 'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"')
    no_inf = B.replace(inf + "\n", "")
    assert after(A, no_inf) == cold(no_inf)
    h = to_sample(parse_vllm(no_inf)).hist("e2e")
    assert h.counts[-1] == h.count == float(line_of(B, "vllm:e2e_request_latency_seconds_count{").rpartition(" ")[2])


def test_a_duplicate_series_keeps_the_last_value_and_warns():
    running = line_of(B, "vllm:num_requests_running{")
    dup = B.replace(running, running + "\n" + running.rpartition(" ")[0] + " 99.0")
    assert after(A, dup) == cold(dup)
    s = to_sample(parse_vllm(dup))
    assert s.value("running") == 99.0 and s.warnings


STOP = f'vllm:request_success_total{{{LAB},finished_reason="stop"}}'


@pytest.mark.parametrize("start", ["vllm:num_requests_running{", "vllm:kv_cache_usage_perc{",
                                   "process_cpu_seconds_total", STOP])
def test_nan_where_the_plan_had_a_number(start):
    nan = replace_value(B, start, "NaN")
    assert after(A, nan) == cold(nan)
    s = to_sample(parse_vllm(nan))
    read = {"vllm:num_requests_running{": s.value("running"), "vllm:kv_cache_usage_perc{": s.value("kv_usage"),
            "process_cpu_seconds_total": s.process_cpu_seconds}.get(start)
    if start == STOP:  # the NaN row is left out of the sum
        assert s.value("requests_success") == to_sample(parse_vllm(B)).value("requests_success") - float(
            line_of(B, STOP).rpartition(" ")[2])
    else:
        assert read is None  # no value, never NaN
    # and back: the NaN page's reading must not be left for the next page
    assert after(nan, B) == cold(B)


def test_nan_values_are_absent_not_reused():
    nan = replace_value(B, "vllm:num_requests_running{", "NaN")
    extract._PAGE_PLANS.clear()
    to_sample(parse_vllm(A))
    s = to_sample(parse_vllm(nan))
    assert s.value("running") is None
    assert s.process_cpu_seconds == 1234.56


def test_nan_in_a_histogram_is_kept_as_the_page_says():
    nan = replace_value(B, "vllm:time_to_first_token_seconds_sum{", "NaN")
    assert after(A, nan) == cold(nan)
    assert math.isnan(to_sample(parse_vllm(nan)).hist("ttft").sum)


def test_families_seen_by_the_plan_are_read_again():
    # the generation rests on TYPE lines too: a page with the same samples but other families
    bare = "vllm:num_requests_running 3\n"
    v1 = "# TYPE vllm:kv_cache_usage_perc gauge\n" + bare
    assert after(bare, v1) == cold(v1)
    assert to_sample(parse_vllm(v1)).generation == "v1"
    assert after(v1, bare) == cold(bare)
    assert to_sample(parse_vllm(bare)).generation == "unknown"


def test_random_mutations_of_a_real_page():
    rng = random.Random(7)
    base = render_v1_page(seed=5, engines=2)
    lines = base.split("\n")
    samples = [i for i, ln in enumerate(lines) if ln and not ln.startswith("#")]
    for _ in range(60):
        new = list(lines)
        for _ in range(rng.randint(1, 4)):
            i = rng.choice(samples)
            op = rng.randrange(5)
            head = new[i].rpartition(" ")[0]
            if op == 0:
                new[i] = head + " NaN"
            elif op == 1:
                new[i] = ""  # the series is gone
            elif op == 2:
                new[i] = new[i] + "\n" + head + f" {rng.random()!r}"  # a duplicate
            elif op == 3:
                new[i] = head + f" {rng.randint(0, 10**6)}.0"
            else:
                j = rng.choice(samples)
                new[i], new[j] = new[j], new[i]  # two series swap places
        page = "\n".join(new)
        assert after(base, page) == cold(page)
        assert after(page, base) == cold(base)


def test_a_page_whose_samples_were_changed_is_read_as_changed():
    # Page.samples is built on first use from the parser's flat rows; once built, it is the page
    page = parse_vllm(B)
    assert page.get("vllm:num_requests_running")[0][1] == 12.0
    del page.samples["vllm:num_requests_running"]
    assert to_sample(page).value("running") is None
    assert to_sample(parse_vllm(B)).value("running") == 12.0


def test_a_page_built_from_samples_reads_as_parsed():
    parsed = parse_vllm(B)
    built = extract.Page(samples={k: list(v) for k, v in parsed.samples.items()}, families=dict(parsed.families))
    assert repr(to_sample(built)) == repr(to_sample(parse_vllm(B)))


def test_a_page_with_nan_reuses_the_plan_of_its_nan_rows_only():
    nan = replace_value(B, "vllm:num_requests_running{", "NaN")
    other_nan = replace_value(B, "vllm:num_requests_waiting{", "NaN")
    extract._PAGE_PLANS.clear()
    to_sample(parse_vllm(nan))
    plans = dict(extract._PAGE_PLANS)
    again = to_sample(parse_vllm(replace_value(nan, "vllm:num_requests_waiting{", "3.0")))
    assert extract._PAGE_PLANS == plans  # the same series, the same NaN row: reused
    assert again.value("running") is None and again.value("waiting") == 3.0
    s = to_sample(parse_vllm(other_nan))  # another NaN row: a plan of its own
    assert s.value("running") == 12.0 and s.value("waiting") is None
    assert repr(s) == cold(other_nan)

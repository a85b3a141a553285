"""The targeted exposition parser: golden pages, edge cases, and a differential test against
prometheus_client's parser on every sample page and on generated pages."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tui.core.metrics.parser import _SERIES_CACHE, Labels, looks_like_metrics, not_metrics_reason, parse

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "samples"


def sample_pages() -> list[Path]:
    if not SAMPLES.is_dir():
        pytest.skip(f"reference samples not found at {SAMPLES} (the shared dir sits beside the checkout)")
    pages = sorted(SAMPLES.glob("*.prom"))
    assert pages, f"no .prom files in {SAMPLES}"
    return pages


def _key(value: float) -> object:
    return "NaN" if math.isnan(value) else float(value)


def ours(text: str, wanted=None) -> Counter:
    page = parse(text, wanted)
    return Counter(
        (name, frozenset(labels.items()), _key(v)) for name, rows in page.samples.items() for labels, v in rows
    )


def reference(text: str) -> Counter:
    out: Counter = Counter()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out[(s.name, frozenset(s.labels.items()), _key(s.value))] += 1
    return out


# -- golden pages -------------------------------------------------------------------------------


def test_every_sample_page_parses_without_raising():
    for path in sample_pages():
        page = parse(path.read_text())
        assert page.samples, path.name
        if "elided" not in path.name:
            assert page.errors == [], (path.name, page.errors)


def test_elided_page_reports_its_broken_lines_and_keeps_the_rest():
    path = SAMPLES / "vllm-metal-v1-issue-479-elided.prom"
    if not path.exists():
        pytest.skip(f"{path} missing")
    page = parse(path.read_text())
    assert [n for n, _ in page.errors] == [3, 4, 6]
    assert page.error_count == 3
    assert page.get("vllm:num_requests_waiting") == [({"engine": "0", "model_name": "mlx-community/Qwen3.6-27B-5bit"}, 6.0)]
    assert "vllm:cache_config_info" not in page.samples


def test_v0_fixture_values_and_families():
    path = SAMPLES / "vllm-0.6.x-v0-vllmComposer-test-fixture-codeindex-48058675646.prom"
    if not path.exists():
        pytest.skip(f"{path} missing")
    page = parse(path.read_text())
    assert page.get("vllm:prompt_tokens_total") == [({"model_name": "mymodelname"}, 5453083.0)]
    reasons = {lab["finished_reason"]: v for lab, v in page.get("vllm:request_success_total")}
    assert reasons == {"stop": 6193.0, "abort": 28.0, "length": 5.0}
    assert page.families["vllm:time_to_first_token_seconds"] == "histogram"
    assert page.families["vllm:num_preemptions_total"] == "counter"
    buckets = page.get("vllm:time_to_first_token_seconds_bucket")
    assert len(buckets) == 17 and buckets[-1] == ({"le": "+Inf", "model_name": "mymodelname"}, 8499.0)
    # Empty label values are values, not absent labels.
    lora = page.get("vllm:lora_requests_info")
    assert lora == [({"max_lora": "0", "running_lora_adapters": "", "waiting_lora_adapters": ""}, 1.0)]


def test_created_series_are_dropped():
    path = SAMPLES / "vllm-0.10.0-production-stack-issue-617.prom"
    if not path.exists():
        pytest.skip(f"{path} missing")
    page = parse(path.read_text())
    assert not [n for n in page.samples if n.endswith("_created")]
    assert page.get("vllm:kv_cache_usage_perc")[0][1] == 9.75010481363281e-06
    assert page.families["vllm:gpu_prefix_cache_hits_created"] == "gauge"


def test_label_value_with_braces_quotes_and_spaces_from_a_real_page():
    path = SAMPLES / "tgi-names-ibm-vllm-tgis-adapter-pr-18.prom"
    if not path.exists():
        pytest.skip(f"{path} missing")
    rows = parse(path.read_text()).get("tgi_batch_inference_duration_bucket")
    assert {lab["method"] for lab, _ in rows} == {"{'method': 'prefill'}"}
    assert rows[4] == ({"le": "0.02", "method": "{'method': 'prefill'}"}, 112.0)


# -- syntax edge cases --------------------------------------------------------------------------


def test_escapes_and_special_characters_in_label_values():
    text = (
        'm{a="back\\\\slash",b="q\\"uote",c="new\\nline",d="x,y}z=w # k",e="\\\\n",f="a\\tb"} 1\n'
    )
    ((labels, v),) = parse(text).get("m")
    assert v == 1.0
    assert labels == {
        "a": "back\\slash",
        "b": 'q"uote',
        "c": "new\nline",
        "d": "x,y}z=w # k",
        "e": "\\n",  # an escaped backslash followed by n, not a newline
        "f": "a\\tb",  # unknown escapes stay literal, as prometheus_client keeps them
    }


def test_special_values_timestamps_exemplars_and_colons():
    text = "\n".join(
        [
            "a:b:c NaN",
            "pos +Inf",
            "neg -Inf 1712345678000",
            'lab{x="1"} 2.5e-3 1712345678000',
            'ex{x="1"} 7 # {trace_id="abc def"} 7.0 1712345678.1',
            "ex2 8 # {trace_id=\"z\"} 1",
            'spaced { x = "1" , y="2", } 3',
        ]
    )
    page = parse(text)
    assert page.errors == []
    assert math.isnan(page.get("a:b:c")[0][1])
    assert page.get("pos")[0][1] == math.inf
    assert page.get("neg")[0][1] == -math.inf
    assert page.get("lab") == [({"x": "1"}, 0.0025)]
    assert page.get("ex") == [({"x": "1"}, 7.0)]
    assert page.get("ex2") == [({}, 8.0)]
    assert page.get("spaced") == [({"x": "1", "y": "2"}, 3.0)]


def test_comments_blank_lines_and_crlf():
    text = "# HELP g A gauge.\r\n# TYPE g gauge\r\n\r\n# just a comment\r\n   \r\ng{l=\"v\"} 4\r\n  g 5  \r\n"
    page = parse(text)
    assert page.errors == []
    assert page.families == {"g": "gauge"}
    assert page.get("g") == [({"l": "v"}, 4.0), ({}, 5.0)]


@pytest.mark.parametrize(
    "line",
    [
        'bad{a="unterminated} 1',
        'bad{a=unquoted} 1',
        'bad{a="1" b="2"} 1',
        'bad{a="1",a="2"} 1',
        'bad{9a="1"} 1',
        "bad 1_000",
        "bad notanumber",
        "bad",
        "bad 1 2 3",
        'bad{a="1"}',
        "9bad 1",
        "bad-name 1",
        "# TYPE lonely",
    ],
)
def test_malformed_lines_are_reported_not_raised(line):
    text = f"ok 1\n{line}\nok 2\n"
    page = parse(text)
    assert [n for n, _ in page.errors] == [2]
    assert page.errors[0][1]  # a reason is given
    assert [v for _, v in page.get("ok")] == [1.0, 2.0]


def test_wanted_skips_other_names_without_looking_at_them():
    text = 'keep{a="1"} 1\nskip{broken 2\nskip_too 3\nkeep_bucket{le="1"} 4\n'
    page = parse(text, wanted={"keep", "keep_bucket"})
    assert set(page.samples) == {"keep", "keep_bucket"}
    assert page.errors == []  # the broken unwanted line was never parsed
    assert parse(text).error_count == 1


def test_repeated_parses_reuse_series_but_not_values():
    text1 = 'm{a="x"} 1\nm{a="x"} 2 1700000000000\n'
    text2 = 'm{a="x"} 3\nm{a="x"} junk\nm{a="x"}\n'
    assert [v for _, v in parse(text1).get("m")] == [1.0, 2.0]
    page = parse(text2)
    assert [v for _, v in page.get("m")] == [3.0]
    assert [n for n, _ in page.errors] == [2, 3]


def test_labels_are_read_only():
    labels = parse('m{a="x"} 1\n').get("m")[0][0]
    assert isinstance(labels, Labels)
    with pytest.raises(TypeError):
        labels["a"] = "y"
    with pytest.raises(TypeError):
        labels.update(b="z")
    assert dict(labels) == {"a": "x"}


def test_errors_are_capped_but_counted():
    text = "\n".join("x{" for _ in range(500))
    page = parse(text)
    assert page.error_count == 500
    assert len(page.errors) == 100


# -- is it a metrics page? ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, ctype, reason",
    [
        ("", None, "empty response"),
        ("  \n\n", "text/plain", "empty response"),
        ("<!DOCTYPE html><html><body>login</body></html>", "text/plain", "not a metrics page (HTML)"),
        ("<html>", "text/html; charset=utf-8", "not a metrics page (text/html)"),
        ('{"object": "list", "data": []}', "text/plain", "not a metrics page (JSON)"),
        ('{"status": "ok"}', "application/json", "not a metrics page (application/json)"),
        ("Not Found\n", "text/plain", "not a metrics page (no samples)"),
        ("# only a comment\n", None, "not a metrics page (only comments)"),
    ],
)
def test_not_metrics_pages_get_a_reason(text, ctype, reason):
    assert not_metrics_reason(text, ctype) == reason
    assert looks_like_metrics(text, ctype) is False


def test_every_sample_page_looks_like_metrics():
    for path in sample_pages():
        assert looks_like_metrics(path.read_text(), "text/plain; version=0.0.4; charset=utf-8"), path.name


# -- differential: prometheus_client ------------------------------------------------------------


def test_differential_on_sample_pages():
    accepted = 0
    for path in sample_pages():
        text = path.read_text()
        try:
            expected = reference(text)
        except ValueError:
            continue  # prometheus_client rejects the page (the elided one)
        accepted += 1
        assert ours(text) == expected, path.name
        assert ours(text) == expected, path.name + " (second parse, cached series)"
    assert accepted >= 8


_NAME = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True).filter(
    lambda n: not n.endswith(("_created", "_total", "_bucket", "_sum", "_count"))
)
_LABEL = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(lambda n: n != "le")
_LABEL_VALUE = st.text(
    alphabet=st.sampled_from(list('ab Z09_-.:/\\"\n,{}=#\'') + ["é", "日"]), max_size=12
)
_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**12), max_value=10**12),
)


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _fmt(v: float | int) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "+Inf" if v > 0 else "-Inf"
        return repr(v)
    return str(v)


@st.composite
def _series_line(draw, name: str, extra: dict[str, str] | None = None) -> str:
    labels = draw(st.dictionaries(_LABEL, _LABEL_VALUE, max_size=4))
    labels.update(extra or {})
    body = ",".join(f'{k}="{_esc(v)}"' for k, v in labels.items())
    trailing = draw(st.sampled_from(["", ","])) if body else ""
    lab = f"{{{body}{trailing}}}" if labels or draw(st.booleans()) else ""
    line = f"{name}{lab} {_fmt(draw(_VALUE))}"
    if draw(st.booleans()):
        line += f" {draw(st.integers(min_value=0, max_value=2**42))}"
    if draw(st.integers(0, 9)) == 0:
        line += ' # {trace_id="t 1"} 1.5'
    return line


@st.composite
def _page(draw) -> str:
    names = draw(st.lists(_NAME, min_size=1, max_size=6, unique=True))
    lines: list[str] = []
    for name in names:
        kind = draw(st.sampled_from(["gauge", "counter", "histogram", "untyped", "none"]))
        if draw(st.booleans()):
            lines.append(f"# HELP {name} Some help, with \\\\ and \\n escapes.")
        if kind == "counter":
            name += "_total"
        if kind not in ("none",):
            lines.append(f"# TYPE {name} {kind}")
        if kind == "histogram":
            bounds = sorted(draw(st.lists(st.floats(0, 1e6), max_size=5, unique=True)))
            extra = draw(st.dictionaries(_LABEL, _LABEL_VALUE, max_size=2))
            for b in [*map(repr, bounds), "+Inf"]:
                lines.append(draw(_series_line(name + "_bucket", {**extra, "le": b})))
            lines.append(draw(_series_line(name + "_sum", extra)))
            lines.append(draw(_series_line(name + "_count", extra)))
            lines.append(draw(_series_line(name + "_created", extra)))
        else:
            for _ in range(draw(st.integers(1, 3))):
                lines.append(draw(_series_line(name)))
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from(["", "# a comment: with words", "   "])))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return eol.join(lines) + eol


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_page())
def test_differential_on_generated_pages(text):
    try:
        expected = reference(text)
    except ValueError:
        return  # outside what prometheus_client accepts; ours may be laxer
    first = ours(text)
    assert first == expected
    assert ours(text) == expected  # second parse goes through the series cache
    page = parse(text)
    assert page.errors == []
    wanted = set(list(page.samples)[::2])
    assert ours(text, wanted) == Counter({k: n for k, n in first.items() if k[0] in wanted})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_page(), st.integers(0, 2**16))
def test_series_skipped_once_are_read_exactly_when_wanted_later(text, pick):
    """A caller that did not want a series leaves it remembered as skipped (labels unread); a
    later caller that wants it must still get its exact labels and values."""
    try:
        expected = reference(text)
    except ValueError:
        return
    _SERIES_CACHE.clear()
    names = sorted({k[0] for k in expected})
    wanted = {n for i, n in enumerate(names) if pick >> (i % 16) & 1}
    assert ours(text, wanted) == Counter({k: n for k, n in expected.items() if k[0] in wanted})
    assert ours(text, set(names) - wanted) == Counter({k: n for k, n in expected.items() if k[0] not in wanted})
    assert ours(text) == expected
    assert ours(text, wanted) == Counter({k: n for k, n in expected.items() if k[0] in wanted})


@pytest.mark.parametrize(
    "tail, value, error",
    [
        ("7", 7.0, False),
        ("7 1700000000000", 7.0, False),
        ("7\t1700000000000", 7.0, False),
        ("7\t", 7.0, False),
        (" 7", 7.0, False),
        ("\t7", 7.0, False),
        ("+Inf", math.inf, False),
        ('7 # {trace_id="a b"} 1.5', 7.0, False),
        ("1_000", None, True),
        ("}", None, True),
        ("7 x", None, True),
        ("", None, True),
    ],
)
@pytest.mark.parametrize("wanted", [None, {"m"}])
def test_a_seen_series_line_with_any_tail_reads_as_on_first_sight(tail, value, error, wanted):
    """The second line of a series is read through the series cache: whatever follows its
    `name{labels}` must give the value, or the error, that the first sight of it gives."""
    line = 'm{a="x y"} ' + tail
    for warm in (False, True):
        _SERIES_CACHE.clear()
        if warm:
            parse('m{a="x y"} 1\nother{a="x y"} 1\n', wanted)
        page = parse(line + "\n", wanted)
        assert [v for _, v in page.get("m")] == ([] if error else [value]), (warm, line)
        assert [n for n, _ in page.errors] == ([1] if error else []), (warm, line)


def test_nothing_after_eof_counts():
    page = parse('a_total 1\n# EOF\na_total 999\nb 2\n')
    assert [v for _, v in page.get("a_total")] == [1.0] and page.get("b") == []
    assert any("EOF" in why for _, why in page.errors)
    assert not parse("a 1\n# EOF\n\n").errors  # a plain end: nothing to say


def test_a_long_first_sample_line_is_still_metrics():
    text = f'x{{note="{"y" * 20000}"}} 1\nvllm:num_requests_running 3\n'
    assert not_metrics_reason(text) is None


def test_protobuf_is_named():
    why = not_metrics_reason("\x8d\x01", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily")
    assert why is not None and "protobuf" in why


def test_type_lines_read_the_same_on_every_scrape():
    # TYPE lines seen before are remembered: the second scrape of a page must read exactly as
    # the first, and a malformed TYPE line is reported on every page, never remembered
    page = ("# HELP a_total x\n# TYPE a_total counter\n# TYPE b gauge\n# TYPE bad name gauge\n"
            "# HELPless comment\na_total 1\nb 2\n")
    first, *later = (parse(page) for _ in range(3))  # names validated on the first, lines remembered on the second
    for again in later:
        assert first.families == again.families == {"a_total": "counter", "b": "gauge"}
        assert first.error_count == again.error_count == 1
        assert first.errors == again.errors
        assert first.samples == again.samples

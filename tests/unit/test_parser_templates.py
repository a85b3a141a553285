"""The parser's page templates: a page laid out as one read before (wanted names given as a
frozenset) is read at once through that page's template. Whatever the page, the result must
be what reading it line by line gives (wanted names given as a plain set, which never uses a
template): the same samples, families and errors. Each case leaves the template of one page
and reads another."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.realpage import render_v1_page
from tests.unit.test_parser import _page
from tui.core.metrics import parser
from tui.core.metrics.extract import VLLM_WANTED
from tui.core.metrics.parser import _SERIES_CACHE, _TEMPLATES, parse


def read(page) -> tuple:
    return repr(page.samples), page.families, page.errors, page.error_count


def after(first: str, then: str, wanted: frozenset[str] = VLLM_WANTED) -> tuple:
    """`then` read while the template of `first` is kept, and `then` read line by line."""
    _TEMPLATES.clear()
    for _ in range(3):  # names, then series, then a template
        parse(first, wanted)
    return read(parse(then, wanted)), read(parse(then, set(wanted)))


A = render_v1_page(seed=1)
B = render_v1_page(seed=2, kv_usage=0.93, running=12, waiting=40)
RUNNING = 'vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}'


def test_a_page_laid_out_as_the_last_is_read_through_its_template():
    templated, exact = after(A, B)
    assert templated == exact
    assert parse(B, VLLM_WANTED).get("vllm:num_requests_running")[0][1] == 12.0
    (templates,) = _TEMPLATES.values()
    assert len(templates) == 1
    assert templates[0].read(B.split("\n")) is not None  # B was read through it


def swap(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


CASES = {
    "a series gone, a blank line in its place": swap(B, RUNNING + " 12.0", ""),
    "a wanted series where an unwanted one was": swap(B, "process_open_fds 97.0", "vllm:num_requests_waiting 5"),
    "an unwanted series where a wanted one was": swap(B, RUNNING + " 12.0", "process_open_fds 97.0"),
    "a new label value": swap(B, RUNNING, RUNNING.replace('engine="0"', 'engine="1"')),
    "a duplicate series": swap(B, "process_open_fds 97.0", RUNNING + " 99.0"),
    "NaN": swap(B, RUNNING + " 12.0", RUNNING + " NaN"),
    "a timestamp": swap(B, RUNNING + " 12.0", RUNNING + " 12.0 1700000000"),
    "an exemplar": swap(B, RUNNING + " 12.0", RUNNING + ' 12.0 # {trace_id="a"} 1'),
    "an underscore in the value": swap(B, RUNNING + " 12.0", RUNNING + " 1_2"),
    "no value": swap(B, RUNNING + " 12.0", RUNNING + " "),
    "two spaces": swap(B, RUNNING + " 12.0", RUNNING + "  12.0"),
    "a tab before a timestamp": swap(B, RUNNING + " 12.0", RUNNING + " 12.0\t17"),
    "garbage value": swap(B, RUNNING + " 12.0", RUNNING + " twelve"),
    "another type": swap(B, "# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_running counter"),
    "a longer TYPE line": swap(B, "# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_running gauge x"),
    "a comment for a HELP line": swap(B, "# HELP vllm:num_requests_running", "# HELPx vllm:num_requests_running"),
    "EOF for a HELP line": swap(B, "# HELP vllm:num_requests_running Number of requests in model execution batches.",
                                "# EOF"),
    "a wanted series renamed": swap(B, RUNNING + " 12.0", RUNNING.replace("running", "running_x") + " 12.0"),
    "a leading space": swap(B, RUNNING + " 12.0", " " + RUNNING + " 12.0"),
    "an unwanted series with any tail": swap(B, "process_open_fds 97.0", "process_open_fds 97.0 1 2 3"),
}


def test_pages_not_laid_out_as_the_template_read_as_line_by_line():
    for why, page in CASES.items():
        templated, exact = after(A, page)
        assert templated == exact, why
        templated, exact = after(page, B)  # and a template of the odd page, if it makes one
        assert templated == exact, why


def test_the_wanted_names_choose_the_template():
    templated, exact = after(A, B, frozenset({"process_open_fds"}))
    assert templated == exact
    assert read(parse(B, VLLM_WANTED)) == read(parse(B, set(VLLM_WANTED)))


_TRICKY = ["{w} 5", '{w}{{a="b"}} 1', "{w}", "{w}\x0c7", " {w} 3", "", "\t", "{f}_bucket{{le=\"1\"}} x",
           "garbage", "{f}", "{f} 1", "{f}_total 2", "{f}{{a=\"1\"}} 1 2 3", "# EOF", "  # TYPE {f} gauge",
           "# HELP {f} x", "# TYPE {f} gauge", "{w}_bucket{{le=\"1\"}} 1", "{f}x 1", "{w} 1_0", "{w} 2 ", "{w} NaN"]


@st.composite
def _pair(draw):
    """A generated page, the wanted names, and the page with a few lines changed."""
    text = draw(_page())
    lines = text.split("\n")
    names = sorted({ln.split("{")[0].split(" ")[0] for ln in lines if ln and not ln.startswith("#")} - {""})
    wanted = frozenset(n for n in names if draw(st.booleans()))
    pool = names + sorted(VLLM_WANTED)[:3]
    changed = list(lines)
    for _ in range(draw(st.integers(0, 3))):
        line = draw(st.sampled_from(_TRICKY)).format(w=draw(st.sampled_from(pool)), f=draw(st.sampled_from(pool)))
        i = draw(st.integers(0, len(changed) - 1))
        if draw(st.booleans()):
            changed[i] = line  # as many lines: the template is tried
        else:
            changed.insert(i, line)
    return text, wanted, "\n".join(changed)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pair())
def test_differential_templates_against_line_by_line(case):
    text, wanted, changed = case
    _SERIES_CACHE.clear()
    templated, exact = after(text, changed, wanted)
    assert templated == exact
    templated, exact = after(changed, text, wanted)
    assert templated == exact


def test_templates_are_bounded():
    _TEMPLATES.clear()
    for n in range(parser._TEMPLATES_PER_SLOT + 3):
        page = f"# TYPE m{n} gauge\nm{n} 1\n"
        for _ in range(3):
            parse(page, frozenset({f"m{n}"}))
    assert all(len(t) <= parser._TEMPLATES_PER_SLOT for t in _TEMPLATES.values())
    for n in range(parser._TEMPLATES_MAX + 3):
        page = "# TYPE m gauge\n" + "m 1\n" * (n + 1)
        for _ in range(3):
            parse(page, frozenset({"m"}))
    assert 0 < sum(map(len, _TEMPLATES.values())) <= parser._TEMPLATES_MAX

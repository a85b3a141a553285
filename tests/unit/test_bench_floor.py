"""The benchmarks' floor (bench/floor.py) must do the work it claims: every sample of a page
split into name, labels and value, and every value read with float(). A floor that skipped
samples would make every ratio read against it look worse than it is."""

from __future__ import annotations

import pytest

from bench.floor import SAMPLE, Floor, tokenise
from bench.realpage import render_v1_page
from tui.core.metrics.parser import parse


def test_floor_tokenises_every_sample_of_a_real_size_page():
    page = render_v1_page(seed=3)
    sample_lines = [ln for ln in page.splitlines() if ln and not ln.startswith("#")]
    assert tokenise(page) == len(sample_lines) == 318
    # the same values the exact parser reads (it drops `_created` series, the floor does not)
    exact = [v for rows in parse(page).samples.values() for _, v in rows]
    floor = [float(v) for name, _, v in SAMPLE.findall(page) if not name.endswith("_created")]
    assert floor == exact


def test_floor_keeps_a_quoted_brace_in_the_labels_and_skips_comments():
    page = '# HELP x a } b\n# TYPE x gauge\nx{a="} 1",b="c"} 2.5 1700000000\ny 3\n\n'
    assert SAMPLE.findall(page) == [("x", '{a="} 1",b="c"}', "2.5"), ("y", "", "3")]


def test_floor_refuses_a_value_float_cannot_read():
    with pytest.raises(ValueError):
        tokenise("x{a=\"1\"} notanumber\n")


def test_floor_ratio_is_cpu_over_the_floors_share_of_a_core():
    f = Floor(per_page_s=400e-6, fetch_s=100e-6, samples=318, chars=43_000, pages=256, reps=5)
    assert f.pct_core(256) == pytest.approx(10.24)
    assert f.ratio(20.48, 256) == pytest.approx(2.0)

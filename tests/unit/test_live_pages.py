"""The benchmarks' live pages (bench/fleetserve.py `live=True`) must change as a running vLLM
server's do, or a figure measured on them says nothing the static pages did not: every page
valid, the same lines and labels every time, counters and histograms growing at every request
and never stepping back (a step back is a restart to kvwatch), the gauges moving, and no two
endpoints serving the same page at once."""

from __future__ import annotations

import http.client
import math

from prometheus_client.parser import text_string_to_metric_families

from bench.fleetserve import LIVE_AHEAD, LIVE_BASES, PageFleet
from bench.realpage import grown, render_v1_page
from tui.core.metrics.extract import parse_vllm, to_sample
from tui.core.metrics.parser import parse

GROWING = ("_total", "_bucket", "_count", "_sum")


def _get(conn: http.client.HTTPConnection) -> str:
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    assert resp.status == 200
    return resp.read().decode()


def _layout(page: str) -> list[tuple[str, tuple]]:
    """Every sample's name and labels, in page order, as prometheus_client reads them."""
    return [(s.name, tuple(sorted(s.labels.items()))) for fam in text_string_to_metric_families(page)
            for s in fam.samples]


def _values(page: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in text_string_to_metric_families(page)
            for s in fam.samples}


def _growing(key: tuple[str, tuple]) -> bool:
    return key[0].endswith(GROWING) and not key[0].startswith("process_")


def test_live_endpoint_pages_grow_like_a_running_server():
    n = LIVE_BASES + 2  # endpoints 0 and LIVE_BASES share a base, from different starting steps
    with PageFleet(n, live=True) as fleet:
        conns = {i: http.client.HTTPConnection("127.0.0.1", fleet.ports[i], timeout=10) for i in (0, LIVE_BASES)}
        pages, others = [], []
        for _ in range(6):  # both endpoints once a round, as a refresh fetches them
            pages.append(_get(conns[0]))
            others.append(_get(conns[LIVE_BASES]))
        for c in conns.values():
            c.close()
        served = fleet.metrics_requests()
    assert served == 12
    layout = _layout(pages[0])
    assert len(layout) > 300
    tracked = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total",
               "vllm:inter_token_latency_seconds_count", "vllm:time_to_first_token_seconds_sum",
               "process_cpu_seconds_total")
    for before, after in zip(pages, pages[1:], strict=False):
        assert after != before
        assert _layout(after) == layout  # same lines, same labels
        assert parse(after).error_count == 0
        a, b = _values(before), _values(after)
        for key in a:
            if _growing(key) or key[0] == "process_cpu_seconds_total":
                assert b[key] >= a[key], key  # a counter never steps back
        for name in tracked:  # and the busy series grow at every request
            assert sum(v for k, v in b.items() if k[0] == name) > sum(v for k, v in a.items() if k[0] == name), name
    # kvwatch reads each page whole: the same engines, its counters growing
    first, last = to_sample(parse_vllm(pages[0])), to_sample(parse_vllm(pages[-1]))
    assert first.engines.keys() == last.engines.keys() == {"0"}
    assert all(_layout(o) == layout for o in others)
    # endpoints sharing a base never serve the same page in the same round
    assert all(p != o for p, o in zip(pages, others, strict=True))
    gauges = [{k: v for k, v in _values(p).items() if k[0] in ("vllm:num_requests_running",
                                                                  "vllm:kv_cache_usage_perc")} for p in pages]
    assert len({tuple(sorted(g.items())) for g in gauges}) > 1  # the gauges move


def test_live_sequence_never_wraps_past_the_rendered_steps():
    # an endpoint fetched past the steps rendered ahead keeps growing: no counter drop
    with PageFleet(1, live=True) as fleet:
        conn = http.client.HTTPConnection("127.0.0.1", fleet.ports[0], timeout=10)
        for _ in range(LIVE_AHEAD - 1):
            conn.request("GET", "/metrics")
            conn.getresponse().read()
        pages = [_get(conn) for _ in range(3)]  # the last rendered step, then two rendered on demand
        conn.close()
    for before, after in zip(pages, pages[1:], strict=False):
        a, b = _values(before), _values(after)
        assert all(b[k] >= a[k] for k in a if _growing(k))
        assert b[("vllm:generation_tokens_total", (("engine", "0"), ("model_name", "meta-llama/Llama-3.1-8B-Instruct")))] \
            > a[("vllm:generation_tokens_total", (("engine", "0"), ("model_name", "meta-llama/Llama-3.1-8B-Instruct")))]


def test_step_zero_is_the_static_page_and_growth_never_steps_back():
    static = render_v1_page(seed=4)
    assert render_v1_page(seed=4, step=0) == static
    for rate in (0.05, 1.0, 1500.0):
        for phase in (0.0, 1.0, math.pi, 5.0):
            g = [grown(rate, s, phase) for s in range(400)]
            assert g[0] == 0.0
            assert all(b - a >= 0.65 * rate - 1e-9 for a, b in zip(g, g[1:], strict=False))
    # whole counts, cumulative buckets non-decreasing in `le`, +Inf = _count, at a late step
    page = parse(render_v1_page(seed=4, step=300))
    rows = page.samples["vllm:time_to_first_token_seconds_bucket"]
    counts = [v for _, v in rows]
    assert counts == sorted(counts) and all(v == int(v) for v in counts)
    assert counts[-1] == page.samples["vllm:time_to_first_token_seconds_count"][0][1]

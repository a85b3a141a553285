"""Parse cost of one real-size vLLM V1 page: kvwatch's targeted parser vs prometheus_client.

    .venv/bin/python bench/bench_parse.py [--repeat 5] [--against OTHER_CHECKOUT]

Prints milliseconds per page. "warm" = the series cache already holds this page's label sets,
and the page's template and plan are made (every scrape after the first two); "line by line" =
warm, without the template (the way a page not laid out as one read before is read, e.g. after
a new label value); "cold" = caches, templates and plans cleared before each parse (first scrape). The
floor (bench/floor.py: a stdlib regex splitting every sample into name, labels and value, and
float() of each value) is timed on the same page, and kvwatch's parse given as a ratio to it.
`--against PATH` times another checkout's parser (its tui/core/metrics/parser.py) on the same
page, alternating with this one, for a before/after in one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from floor import tokenise  # noqa: E402
from realpage import render_v1_page  # noqa: E402

from tui.core.metrics import extract, parser  # noqa: E402
from tui.core.metrics.extract import VLLM_WANTED, to_sample  # noqa: E402


def sim_page() -> str | None:
    """A page from the simulator (tui/core/sim), when it is importable: a second real-shape page."""
    try:
        from tui.core.sim.args import EngineArgs
        from tui.core.sim.exposition import PageRenderer
        from tui.core.sim.hardware import GPUS, MODELS
        from tui.core.sim.replica import Replica

        r = Replica("llama-8b-0", "llama-8b", MODELS["llama-3.1-8b"], GPUS["a100-40gb"],
                    EngineArgs(max_model_len=8192, max_num_seqs=64), t0=1.75e9)
        r.advance_to(r.now + 5.0)
        return PageRenderer(r).render()
    except Exception as e:  # noqa: BLE001 - the bench still runs on the built-in page
        print(f"(simulator page unavailable: {type(e).__name__}: {e})")
        return None


def per_call_ms(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another checkout whose parser to time beside this one")
    args = ap.parse_args()
    other = _load_parser(args.against) if args.against else None

    pages = [("built-in V1 page (bench/realpage.py)", render_v1_page())]
    sim = sim_page()
    if sim is not None:
        pages.append(("simulator V1 page (tui/core/sim)", sim))
    for title, page in pages:
        print(f"== {title}")
        bench_page(page, args.repeat)
        if other is not None:
            against(page, other, args.against, args.repeat)


def _load_parser(tree: Path):
    spec = importlib.util.spec_from_file_location("other_parser", tree / "tui/core/metrics/parser.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["other_parser"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def against(page: str, other, tree: Path, repeat: int) -> None:
    assert other.parse(page, VLLM_WANTED).samples == parser.parse(page, VLLM_WANTED).samples
    ours, theirs = [], []
    for _ in range(max(5, repeat)):  # alternating, so a change in the machine's load reaches both
        theirs.append(per_call_ms(lambda: other.parse(page, VLLM_WANTED), 200, 1))
        ours.append(per_call_ms(lambda: parser.parse(page, VLLM_WANTED), 200, 1))
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"wanted names (warm), alternating medians: this tree {o:.3f} ms, {tree} {t:.3f} ms "
          f"({o / t:.2f}x); the same samples")


def bench_page(page: str, repeat: int) -> None:
    n_samples = sum(1 for line in page.splitlines() if line and not line.startswith("#"))
    wanted_rows = sum(len(r) for r in parser.parse(page, VLLM_WANTED).samples.values())
    print(f"page: {len(page.encode()) / 1024:.1f} KiB, {n_samples} samples, "
          f"{len(VLLM_WANTED)} wanted names -> {wanted_rows} samples kept")

    def cold(fn):
        def run():
            parser._SERIES_CACHE.clear()
            getattr(parser, "_TEMPLATES", {}).clear()
            getattr(extract, "_PAGE_PLANS", {}).clear()
            return fn()
        return run

    line_by_line = set(VLLM_WANTED)  # not a frozenset: never read through a template

    rows = [
        ("kvwatch parse, all names (warm)", lambda: parser.parse(page), 500),
        ("kvwatch parse, wanted names (warm)", lambda: parser.parse(page, VLLM_WANTED), 500),
        ("kvwatch parse + to_sample (warm)", lambda: to_sample(parser.parse(page, VLLM_WANTED)), 500),
        ("kvwatch parse, wanted names (line by line)", lambda: parser.parse(page, line_by_line), 500),
        ("kvwatch parse, wanted names (cold)", cold(lambda: parser.parse(page, VLLM_WANTED)), 100),
        ("prometheus_client text_string_to_metric_families", lambda: list(text_string_to_metric_families(page)), 30),
    ]
    results = {}
    for label, fn, number in rows:
        results[label] = ms = per_call_ms(fn, number, repeat)
        print(f"{label:<52} {ms:7.3f} ms/page   {ms * 256:7.1f} ms per 256 replicas")
    ref = results["prometheus_client text_string_to_metric_families"]
    ours = results["kvwatch parse, wanted names (warm)"]
    print(f"speed-up (wanted, warm) vs prometheus_client: {ref / ours:.0f}x")
    # the ratios to the floor from runs alternating with it, so that a change in the machine's
    # load reaches both
    floor, warm, whole = [], [], []
    for _ in range(max(7, repeat)):
        floor.append(per_call_ms(lambda: tokenise(page), 100, 1))
        warm.append(per_call_ms(lambda: parser.parse(page, VLLM_WANTED), 100, 1))
        whole.append(per_call_ms(lambda: to_sample(parser.parse(page, VLLM_WANTED)), 100, 1))
    f, w, t = statistics.median(floor), statistics.median(warm), statistics.median(whole)
    print(f"floor (regex tokenise + float() of every sample): {f:.3f} ms/page; alternating medians: kvwatch parse, "
          f"wanted names (warm) {w:.3f} ms = {w / f:.2f}x the floor, with to_sample {t:.3f} ms = {t / f:.2f}x")


if __name__ == "__main__":
    main()

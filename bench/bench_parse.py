"""Parse cost of one real-size vLLM V1 page: kvwatch's targeted parser vs prometheus_client.

    .venv/bin/python bench/bench_parse.py [--repeat 5]

Prints milliseconds per page. "warm" = the series cache already holds this page's label sets
(every scrape after the first); "cold" = cache cleared before each parse (first scrape).
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from realpage import render_v1_page  # noqa: E402

from tui.core.metrics import parser  # noqa: E402
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
    args = ap.parse_args()

    pages = [("built-in V1 page (bench/realpage.py)", render_v1_page())]
    sim = sim_page()
    if sim is not None:
        pages.append(("simulator V1 page (tui/core/sim)", sim))
    for title, page in pages:
        print(f"== {title}")
        bench_page(page, args.repeat)


def bench_page(page: str, repeat: int) -> None:
    n_samples = sum(1 for line in page.splitlines() if line and not line.startswith("#"))
    wanted_rows = sum(len(r) for r in parser.parse(page, VLLM_WANTED).samples.values())
    print(f"page: {len(page.encode()) / 1024:.1f} KiB, {n_samples} samples, "
          f"{len(VLLM_WANTED)} wanted names -> {wanted_rows} samples kept")

    def cold(fn):
        def run():
            parser._SERIES_CACHE.clear()
            return fn()
        return run

    rows = [
        ("kvwatch parse, all names (warm)", lambda: parser.parse(page), 500),
        ("kvwatch parse, wanted names (warm)", lambda: parser.parse(page, VLLM_WANTED), 500),
        ("kvwatch parse + to_sample (warm)", lambda: to_sample(parser.parse(page, VLLM_WANTED)), 500),
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

if __name__ == "__main__":
    main()

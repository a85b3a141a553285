"""The ingest (Monitor.ingest: finite check, history, windows, diagnosis, the replicas' views)
of this checkout against another's, round by round in one process, on the same live pages.

    .venv/bin/python bench/bench_ingest_ab.py --tree /path/to/old/checkout [--replicas 256] [--rounds 30]

On a shared machine two runs in turn see different loads; here both trees ingest each round's
pages one after the other (their order swapped every round), so a change in the load reaches
both. The other checkout's `tui` package is imported under another name (a link to it in a
temporary folder: tui.core imports itself relatively), each tree parses the pages with its own
parser. Pages: bench/realpage.py's real-size vLLM V1 pages, one step of a busy replica later
at every round (every counter, histogram bucket, _sum and _count growing, as bench_stages.py
--live serves them). Prints each tree's median CPU per page and the per-round ratio.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True, help="the other checkout (the tree before)")
    ap.add_argument("--replicas", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=4, help="rounds before the ones timed")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    link = Path(tempfile.mkdtemp(prefix="kvwatch-ab-")) / "tui_before"
    link.symlink_to(args.tree.resolve() / "tui", target_is_directory=True)
    sys.path.insert(0, str(link.parent))
    try:
        return _run(args, link)
    finally:  # (the modules are imported by then: the link and its folder go)
        link.unlink()
        link.parent.rmdir()


def _run(args: argparse.Namespace, link: Path) -> int:
    from bench.machine import describe, load_average
    from bench.realpage import render_v1_page

    trees = {}
    for key, pkg in (("this tree", "tui"), ("tree before", "tui_before")):
        mon = importlib.import_module(f"{pkg}.core.monitor")
        model = importlib.import_module(f"{pkg}.core.model")
        extract = importlib.import_module(f"{pkg}.core.metrics.extract")
        trees[key] = (mon.Monitor(None), model.Scrape, extract.parse_vllm, extract.to_sample)
    importlib.import_module("tui.core.perf").tune_gc()
    print(describe() + "; " + load_average() + " at start")
    print(f"this tree {ROOT}, the tree before {args.tree.resolve()}; {args.replicas} live pages, "
          f"{args.rounds} rounds after {args.warmup}, the two trees in turn each round")
    n, t0 = args.replicas, 1_000_000.0
    pages: dict[tuple[int, int], str] = {}
    cpu: dict[str, list[float]] = {k: [] for k in trees}
    for r in range(args.warmup + args.rounds):
        texts = []
        for i in range(n):  # endpoint i: base page i % 8 from its own step, as bench/fleetserve.py
            key = (i % 8, i // 8 + r)
            if key not in pages:
                pages[key] = render_v1_page(seed=key[0], step=key[1])
            texts.append(pages[key])
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for k in order:
            mon, scrape, parse, to_sample = trees[k]
            batch = [scrape(ts=t0 + r, replica=f"r{i}", sample=to_sample(parse(p)), latency_s=0.01)
                     for i, p in enumerate(texts)]
            c = time.process_time()
            mon.ingest(batch, now=t0 + r)
            if r >= args.warmup:
                cpu[k].append((time.process_time() - c) / n)
    new, old = statistics.median(cpu["this tree"]), statistics.median(cpu["tree before"])
    ratios = sorted(a / b for a, b in zip(cpu["this tree"], cpu["tree before"], strict=True))
    q = len(ratios) // 4
    print(f"ingest, CPU per page (medians): this tree {new * 1e6:.0f} us, the tree before {old * 1e6:.0f} us: "
          f"{100 * (1 - new / old):.1f}% less")
    print(f"per round, this tree / the tree before: median {statistics.median(ratios):.3f} "
          f"(quartiles {ratios[q]:.3f}..{ratios[-q - 1]:.3f})")
    print(load_average() + " at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())

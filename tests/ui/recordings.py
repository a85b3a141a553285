"""Hand-made scrape logs for replay tests: replicas moving in and out of KV pressure."""

from __future__ import annotations

from tests.ui.scripted import gpu, page
from tui.core.model import Scrape
from tui.core.record import Recorder

T0 = 1_700_000_000.0


def phases(n_polls: int, step: float = 5.0, names=("a", "b", "c")) -> list[Scrape]:
    """Replicas that go in and out of KV pressure at different times, "c" failing for a while."""
    out = []
    for i in range(n_polls):
        ts = T0 + i * step
        for j, name in enumerate(names):
            hot = (i // (7 + 3 * j)) % 2 == 1
            if name == "c" and 20 <= i < 26:
                out.append(Scrape(ts + 0.01 * j, name, error="connection refused"))
                continue
            kv, waiting = (0.97, 12) if hot else (0.4, 0)
            out.append(Scrape(ts + 0.01 * j, name, page(kv, 30, waiting, (4.0 if hot else 0.1) * i, 300.0 * i),
                              gpu=gpu(92, 40 if hot else 75)))
    return out


def write_log(path, scrapes: list[Scrape], per_poll: int = 3) -> None:
    with Recorder(str(path)) as rec:
        for i in range(0, len(scrapes), per_poll):
            rec.write(scrapes[i:i + per_poll])

"""The README's game day, recorded: the loop of tests/ui/test_gameday_readme.py played keys and
all (long-prompts -> cut max-num-seqs 50% -> scale out -> RECOVERY CONFIRMED), with every scrape
written by the recorder `--record` uses and every action by the demo's audit log.

    python -m tests.gameday_record OUT_DIR      # OUT_DIR/gameday.jsonl.gz, OUT_DIR/audit.jsonl
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tui.core.monitor import Monitor
from tui.core.record import Recorder


async def record_game_day(out: Path, after_s: float = 300.0) -> tuple[Path, Path]:
    """Play the loop, keep recording the fleet `after_s` seconds more (the on-call watches a while
    after RECOVERY CONFIRMED), and return (recording, audit log) under `out`."""
    from tests.gameday import SteppedDemo
    from tests.ui import test_gameday_readme as loop

    demos: list[SteppedDemo] = []

    class Kept(SteppedDemo):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            demos.append(self)

    out.mkdir(parents=True, exist_ok=True)
    rec_path, audit = out / "gameday.jsonl.gz", out / "audit.jsonl"
    for p in (rec_path, audit):
        p.unlink(missing_ok=True)
    rec = Recorder(str(rec_path))
    played = loop.Monitor, loop.SteppedDemo
    loop.Monitor = lambda source: Monitor(source, on_scrapes=rec.write)  # the loop's own Monitor, recording
    loop.SteppedDemo = Kept
    try:
        await loop.test_the_readme_game_day_ends_recovered(out)
        demo = demos[-1]
        for _ in range(int(after_s / demo.interval)):
            await demo.cluster.sleep(demo.interval)
            rec.write(demo.scrapes())
    finally:
        loop.Monitor, loop.SteppedDemo = played
        rec.close()
    assert rec.error is None, rec.error
    return rec_path, audit


if __name__ == "__main__":
    print(*asyncio.run(record_game_day(Path(sys.argv[1]))))

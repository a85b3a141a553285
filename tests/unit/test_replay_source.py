"""ReplaySource: polls as diagnose cuts them, the playback clock, seeking, checkpointed rebuilds."""

from __future__ import annotations

import asyncio
import random
from datetime import datetime

import pytest

from tests.ui.recordings import T0, phases
from tui.core.export import fleet_json
from tui.core.model import Scrape
from tui.core.monitor import Monitor
from tui.core.offline import replay as offline_replay
from tui.core.record import Recorder
from tui.core.replay import next_change, parse_seek, rebuild
from tui.core.sources.replay import ReplaySource

class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def play_all(src: ReplaySource, mon: Monitor) -> list[dict]:
    states = []
    while not src.at_end:
        states.append(fleet_json(mon.ingest(src.take())))
    return states


def test_polls_are_cut_as_diagnose_cuts_them_and_time_ordered():
    scr = phases(4)
    shuffled = scr[:]
    random.Random(1).shuffle(shuffled)
    src = ReplaySource(shuffled)
    assert len(src.rounds) == 4
    assert [[s.replica for s in r] for r in src.rounds] == [["a", "b", "c"]] * 4
    assert src.times == [T0 + i * 5 + 0.02 for i in range(4)]
    assert src.interval == pytest.approx(5.0)
    assert src.replicas == ["a", "b", "c"]


def test_playback_clock_speed_pause_and_play():
    clock = FakeClock()
    src = ReplaySource(phases(10), speed=2.0, clock=clock)
    polled = lambda: asyncio.run(src.poll())  # noqa: E731
    assert len(polled()) == 3  # the first poll is due at once
    assert polled() == []  # the next one is 5 recorded seconds = 2.5 s away at 2x
    clock.t += 2.4
    assert not src.due()
    clock.t += 0.2
    assert src.due() and len(polled()) == 3 and src.pos == 2
    src.pause()
    clock.t += 100
    assert not src.due() and polled() == []
    assert src.recording_now() <= src.times[2]
    src.play()
    clock.t += 2.5
    assert src.due()
    src.set_speed(10.0)
    clock.t += 0.5  # 5 more recorded seconds
    n = 0
    while src.due():
        src.take()
        n += 1
    assert n == 2 and src.pos == 4


def test_long_silence_in_the_recording_is_skipped():
    scr = phases(3) + [Scrape(s.ts + 3600, s.replica, s.sample, gpu=s.gpu) for s in phases(3)]
    clock = FakeClock()
    src = ReplaySource(scr, clock=clock)
    for _ in range(3):
        while not src.due():
            clock.t += 1
        src.take()
    waited = 0.0
    while not src.due():  # an hour of nothing is waited for one recorded interval, not an hour
        clock.t += 0.5
        waited += 0.5
    assert waited <= src.interval + 0.5
    assert src.take()[0].ts >= T0 + 3600


def test_a_step_back_or_seek_equals_playing_from_the_start():
    scr = phases(80)
    ref_src = ReplaySource(scr)
    ref = play_all(ref_src, Monitor(ref_src, history_len=12))  # history shorter than the log
    src = ReplaySource(scr)
    src.checkpoint_every = 7
    mon = Monitor(src, history_len=12)
    rng = random.Random(3)
    for k in [80, 79, 40, 41, 1, 63, 7, 14, 15, 80] + [rng.randint(1, 80) for _ in range(12)]:
        mon = rebuild(mon, src, k)
        assert src.pos == k
        assert fleet_json(mon.state) == ref[k - 1], k
    assert len(src._checkpoints) >= 5  # the checkpoints were used


def test_next_change_stops_at_the_first_verdict_change_offline_diagnosis_sees():
    scr = phases(60)
    timelines = offline_replay(scr).replicas
    changes = sorted({ts for r in timelines.values() for ts, _ in r.timeline[1:]})
    src = ReplaySource(scr)
    mon = rebuild(Monitor(src), src, 1)
    seen = []
    while True:
        got = next_change(mon, src)
        if got is None:
            break
        seen.append(src.position_ts)
        for _name, before, after in got:
            assert before != after
    # every poll where some replica's verdict changed, in order (a change in poll 1 has no "before")
    poll_ts = {max(s.ts for s in r): {s.replica: s.ts for s in r} for r in src.rounds}
    expected = sorted({pt for pt, m in poll_ts.items() if any(ts in changes for ts in m.values())
                       and pt > src.times[0]})
    assert seen == expected and len(seen) >= 4


def test_seek_expressions():
    start, end = datetime(2024, 5, 1, 23, 50).timestamp(), datetime(2024, 5, 2, 0, 20).timestamp()
    pos = start + 600
    assert parse_seek("+30s", pos, start, end) == pos + 30
    assert parse_seek("-2m", pos, start, end) == pos - 120
    assert parse_seek("+1h5m", pos, start, end) == pos + 3900
    assert parse_seek("50%", pos, start, end) == start + (end - start) / 2
    assert parse_seek("start", pos, start, end) == start and parse_seek("end", pos, start, end) == end
    # a bare clock time on the day of the recording that puts it inside the recording
    assert parse_seek("00:05", pos, start, end) == datetime(2024, 5, 2, 0, 5).timestamp()
    assert parse_seek("23:55:30", pos, start, end) == datetime(2024, 5, 1, 23, 55, 30).timestamp()
    assert parse_seek("2024-05-01 23:59", pos, start, end) == datetime(2024, 5, 1, 23, 59).timestamp()
    assert parse_seek("90", pos, start, end) == start + 90
    for bad in ("", "soon", "150%", "25:00"):
        with pytest.raises(ValueError):
            parse_seek(bad, pos, start, end)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_a_recording_cut_mid_line_replays_up_to_the_cut(tmp_path, suffix):
    scr = phases(12)
    path = tmp_path / f"rec.jsonl{suffix}"
    rec = Recorder(str(path))
    for i in range(12):
        rec.write(scr[i * 3:(i + 1) * 3])
    rec._raw.flush()
    raw = path.read_bytes()  # as on disk while kvwatch runs: every line flushed, no gzip trailer
    rec._raw.close()
    if suffix:
        cut = raw[:-9]  # into the last sync-flushed block: its line is lost, the rest decodes
    else:
        last = raw.rstrip(b"\n").rfind(b"\n")
        cut = raw[: last + 1 + (len(raw) - last) // 2]  # half of the last line
    path.write_bytes(cut)
    src = ReplaySource.open(path)
    n = sum(len(r) for r in src.rounds)
    assert n == 35  # everything before the cut line
    assert any("incomplete" in str(p) for p in src.problems) or suffix
    full = ReplaySource(scr)
    ref = play_all(full, Monitor(full))
    got = play_all(src, Monitor(src))
    for g in ref + got:
        g.pop("source")
    assert len(got) == 12 and got[:11] == ref[:11]  # the last poll lacks only the cut replica
    assert [r["name"] for r in got[11]["replicas"]] == [r["name"] for r in ref[11]["replicas"]]

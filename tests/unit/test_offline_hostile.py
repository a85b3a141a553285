"""Issue 10 defects 7, 8, 9 at the unit level: the scrape-log reader streams with bounded lines
and gives up on non-recordings, a damaged .gz keeps every record before the damage, the
reorder buffer equals a full sort for local disorder, and YAML alias bombs are refused."""

from __future__ import annotations

import gzip
import json
import random
import time
from pathlib import Path

import pytest

from tests.faultserver import small_page
from tui.core.model import Scrape
from tui.core.record import reader
from tui.core.record.reader import load_log
from tui.core.sources.replay import in_time_order
from tui.core.yamlsafe import YamlLimitError, safe_load_all_bounded


def lines(n: int) -> list[str]:
    return [json.dumps({"ts": 1e9 + i, "replica": f"r{i % 2}", "metrics": small_page(n=i)}) + "\n" for i in range(n)]


def test_a_zeroed_gz_keeps_the_records_before_the_zeros(tmp_path: Path) -> None:
    data = bytearray(gzip.compress("".join(lines(200)).encode()))
    half = len(data) // 2
    data[half:] = bytes(len(data) - half)  # zeroed from the middle on
    p = tmp_path / "z.jsonl.gz"
    p.write_bytes(bytes(data))
    scrapes, problems = load_log(str(p))
    assert len(scrapes) >= 90  # every record before the zeros (90 here); the small file used to give 0
    said = " ".join(str(x) for x in problems)
    # zeros decode as valid deflate codes, so zlib cannot tell where: the damage is named as such
    assert "gzip stream stops without its end" in said or "corrupt gzip data" in said, said


def test_a_flipped_byte_names_the_damage_and_its_offset(tmp_path: Path) -> None:
    data = bytearray(gzip.compress("".join(lines(400)).encode()))
    data[len(data) // 3] ^= 0xFF
    p = tmp_path / "f.jsonl.gz"
    p.write_bytes(bytes(data))
    scrapes, problems = load_log(str(p))
    said = " ".join(str(x) for x in problems)
    assert scrapes and "corrupt gzip data at compressed byte offset" in said, said
    assert "incomplete last line" not in said


def test_no_valid_record_in_the_first_megabytes_gives_up(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(reader, "GIVE_UP_BYTES", 1 << 20)
    p = tmp_path / "noise.bin"
    p.write_bytes(random.Random(1).randbytes(4 << 20))
    t0 = time.monotonic()
    scrapes, problems = load_log(str(p))
    assert scrapes == [] and time.monotonic() - t0 < 5
    assert any("no valid scrape record in the first" in str(x) for x in problems)
    assert len(problems) <= 53  # malformed lines are counted past the first 50, not listed


def test_an_endless_line_is_skipped_in_bounded_memory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(reader, "_MAX_LINE", 1 << 16)
    p = tmp_path / "long.jsonl"
    good = lines(3)
    p.write_text(good[0] + "x" * (1 << 18) + "\n" + good[1] + good[2])
    scrapes, problems = load_log(str(p))
    assert len(scrapes) == 3 and any("longer than" in str(x) for x in problems)


def test_the_reorder_buffer_equals_a_full_sort_for_local_disorder() -> None:
    rnd = random.Random(3)
    scr = [Scrape(ts=i + rnd.uniform(-3, 3), replica=f"r{i % 4}", error="x") for i in range(20_000)]
    assert [s.ts for s in in_time_order(scr, window=64)] == sorted(s.ts for s in scr)


def bomb(levels: int) -> str:
    out = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    out += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(out) + "\n"


def test_a_yaml_alias_bomb_is_refused_quickly() -> None:
    t0 = time.monotonic()
    with pytest.raises(YamlLimitError, match="alias"):
        list(safe_load_all_bounded(bomb(9)))
    assert time.monotonic() - t0 < 1.0
    assert list(safe_load_all_bounded(bomb(2)))[0]["a2"][0][0] == ["lol"] * 9  # small nesting is fine
    docs = list(safe_load_all_bounded("a: &x {k: 1}\nb: *x\n---\nc: 2\n"))  # ordinary aliases work
    assert docs == [{"a": {"k": 1}, "b": {"k": 1}}, {"c": 2}]

"""Reader of the JSON-lines scrape log (see writer.py for the format).

Tolerant by design, because the file is evidence from an incident: gzip is recognised by its
magic bytes (so rotated `FILE.gz.1` works), a gzip stream cut short by a killed writer yields
everything before the cut, unknown fields are ignored, and a malformed line is reported with
its line number and skipped. Pages go through the same parser and the same checks as a live
scrape, so a replay sees exactly what the live view saw.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .. import engines
from ..metrics.parser import not_metrics_reason
from ..model import GpuDevice, GpuSample, PodInfo, Scrape

_CHUNK = 1 << 16
# A line longer than this is garbage, not a page: a scrape is capped at 4 MiB and its JSON
# escaping adds little. Bounds what one line can cost in memory.
_MAX_LINE = 8 * 1024 * 1024
# A file with no valid record in its first this many (decoded) bytes is not a recording
# (`--input /dev/zero`, a binary): give up instead of reading it to the end.
GIVE_UP_BYTES = 16 * 1024 * 1024
_MAX_PROBLEMS = 50  # malformed lines reported one by one; the rest are counted
# Timestamps a recording can hold: unix seconds from 1970 to 2200. Later ones do not fit a date
# (1e18 crashes every clock display); 1e11..1e14 is a recording written in milliseconds.
_TS_MAX = 7_258_118_400.0


@dataclass(frozen=True, slots=True)
class LogProblem:
    path: str
    line: int  # 0 = the file as a whole
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


class LogFormatError(ValueError):
    """A line that is JSON but not a scrape record."""


class _ReadState:
    """Shared by the layers of one read: where a gzip stream is corrupt (for the messages) and
    whether a valid record was seen yet (for giving up on a file that is not a recording)."""

    __slots__ = ("damage_at", "unended_at", "found", "gave_up")

    def __init__(self) -> None:
        self.damage_at: int | None = None
        self.unended_at: int | None = None  # a gzip stream that stops without its end, at this size
        self.found = False
        self.gave_up = False


def _salvage(d: Any, buf: bytes) -> tuple[bytes, int]:
    """What `buf` decodes to before the corrupt byte (fed one byte at a time to a copy of the
    decompressor, so nothing decoded before the damage is lost), and how many bytes of `buf`
    were accepted."""
    out = []
    for i in range(len(buf)):
        try:
            out.append(d.decompress(buf[i:i + 1]))
        except zlib.error:
            return b"".join(out), i
        if d.eof:
            break
    return b"".join(out), len(buf)


def _chunks(path: str, problem: Callable[[int, str], None], state: _ReadState) -> Iterator[bytes]:
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head != b"\x1f\x8b":
            while buf := f.read(_CHUNK):
                yield buf
            return
        d = zlib.decompressobj(31)
        offset = 0  # compressed bytes before `buf`
        member_at = 0  # where the current gzip member starts
        while buf := f.read(_CHUNK):
            while buf:
                saved = d.copy()
                try:
                    out = d.decompress(buf, _CHUNK * 16)  # bounded: a gzip bomb is read piecewise
                except zlib.error as e:
                    good, at = _salvage(saved, buf)
                    if good:
                        yield good
                    state.damage_at = offset + at
                    problem(0, f"corrupt gzip data at compressed byte offset {offset + at} ({e}): every "
                               "record before the damage was read, the rest of the file cannot be")
                    return
                if out:
                    yield out
                if d.eof:  # end of one gzip member; appended recordings start another
                    offset += len(buf) - len(d.unused_data)
                    buf = d.unused_data
                    d = zlib.decompressobj(31)
                    member_at = offset
                elif d.unconsumed_tail:  # output limit reached: the rest of `buf` next round
                    offset += len(buf) - len(d.unconsumed_tail)
                    buf = d.unconsumed_tail
                else:
                    offset += len(buf)
                    buf = b""
        tail = d.flush()  # a stream cut short (killed writer): what was sync-flushed is here
        if not d.eof and offset > member_at:  # bytes of a member that never ended
            state.unended_at = offset
        if tail:
            yield tail


def iter_lines(path: str, problem: Callable[[int, str], None],
               state: _ReadState | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, ended with a newline) for each line of a plain or gzip file.

    Memory is bounded by `_MAX_LINE`: a longer line is reported and skipped to its newline. With
    no valid record (`state.found`) in the first `GIVE_UP_BYTES`, the file is given up."""
    state = state if state is not None else _ReadState()
    buf = bytearray()
    lineno = 0
    decoded = 0
    skipping = False  # inside a line too long to be a page: drop it up to its newline
    for chunk in _chunks(path, problem, state):
        decoded += len(chunk)
        if decoded > GIVE_UP_BYTES and not state.found:
            state.gave_up = True
            problem(0, f"no valid scrape record in the first {GIVE_UP_BYTES >> 20} MiB: not a kvwatch "
                       "recording (what --record writes); gave up")
            return
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            if not skipping:
                buf += chunk[start:nl]
                lineno += 1
                yield lineno, bytes(buf), True
            else:
                lineno += 1
                skipping = False
            buf.clear()
            start = nl + 1
        if not skipping:
            buf += chunk[start:]
            if len(buf) > _MAX_LINE:
                problem(lineno + 1, f"line longer than {_MAX_LINE} bytes, skipped")
                buf.clear()
                skipping = True
    if buf and not skipping:
        if state.damage_at is not None:  # the damage cut this line, not a killed writer
            problem(lineno + 1, f"record cut by the corrupt data at compressed byte offset {state.damage_at}, skipped")
        else:
            yield lineno + 1, bytes(buf), False
    if state.unended_at is not None:
        problem(0, f"the gzip stream stops without its end at compressed byte {state.unended_at} "
                   "(recording cut mid-write, or damaged)")


# -- records -----------------------------------------------------------------------------------


def _num(obj: dict[str, Any], key: str, where: str, notes: list[str]) -> float | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        notes.append(f"{where}.{key}: expected a number, got {v!r:.40} (ignored)")
        return None
    return float(v)


def _device(obj: dict[str, Any], index: str, where: str, notes: list[str]) -> GpuDevice:
    tr = obj.get("throttle_reasons") or []
    if not isinstance(tr, list) or not all(isinstance(x, str) for x in tr):
        notes.append(f"{where}.throttle_reasons: expected a list of names (ignored)")
        tr = []
    name, uuid = obj.get("name"), obj.get("uuid")
    return GpuDevice(
        index=str(obj.get("index", index)),
        uuid=uuid if isinstance(uuid, str) else None,
        name=name if isinstance(name, str) else None,
        memory_used_bytes=_num(obj, "memory_used_bytes", where, notes),
        memory_total_bytes=_num(obj, "memory_total_bytes", where, notes),
        util_pct=_num(obj, "utilization_pct", where, notes),
        throttle_reasons=tuple(tr),
        ecc_uncorrected=_num(obj, "ecc_uncorrected_errors", where, notes),
        xid_errors=_num(obj, "xid_errors", where, notes),
    )


def _gpu(obj: Any, notes: list[str]) -> GpuSample | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        notes.append("gpu: expected an object (ignored)")
        return None
    devs = obj.get("devices")
    if isinstance(devs, list) and devs and all(isinstance(d, dict) for d in devs):
        devices = tuple(_device(d, str(i), f"gpu.devices[{i}]", notes) for i, d in enumerate(devs))
    else:
        devices = (_device(obj, "0", "gpu", notes),)
    src = obj.get("source")
    return GpuSample(devices=devices, source=src if isinstance(src, str) else "record", join="record")


def _pod(obj: Any, replica: str, notes: list[str]) -> PodInfo | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        notes.append("pod: expected an object (ignored)")
        return None
    restarts = _num(obj, "restarts", "pod", notes)
    code = _num(obj, "last_exit_code", "pod", notes)
    reason = obj.get("last_termination_reason")

    def s(k: str, default: str | None = None) -> str | None:
        v = obj.get(k)
        return v if isinstance(v, str) else default

    return PodInfo(
        namespace=s("namespace", "") or "",
        name=s("name", replica) or replica,
        node=s("node"),
        phase=s("phase"),
        restarts=int(restarts) if restarts is not None else 0,
        last_termination_reason=reason if isinstance(reason, str) else None,
        last_exit_code=int(code) if code is not None else None,
    )


def record_to_scrape(obj: Any, keep_raw: bool = False, notes: list[str] | None = None) -> Scrape:
    """One parsed JSON object -> Scrape; LogFormatError when it is not a scrape record.
    `notes` collects problems with optional fields that were ignored."""
    notes = notes if notes is not None else []
    if not isinstance(obj, dict):
        raise LogFormatError(f"expected a JSON object, got {type(obj).__name__}")
    ts = obj.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        raise LogFormatError(f"missing or invalid ts ({ts!r:.40})")
    if not 0 <= ts <= _TS_MAX:
        ms = " (milliseconds? a kvwatch recording holds unix seconds)" if 1e11 <= ts <= 1e14 else ""
        raise LogFormatError(f"ts {ts:.6g} is outside the years 1970-2200{ms}")
    replica = obj.get("replica")
    if not isinstance(replica, str) or not replica:
        raise LogFormatError(f"missing or invalid replica ({replica!r:.40})")
    metrics, error = obj.get("metrics"), obj.get("error")
    if metrics is not None and not isinstance(metrics, str):
        raise LogFormatError("metrics: expected the page text as a string")
    if metrics is None and error is None:
        raise LogFormatError("neither metrics nor error")
    group = obj.get("group") if isinstance(obj.get("group"), str) else None
    gpu = _gpu(obj.get("gpu"), notes)
    pod = _pod(obj.get("pod"), replica, notes)
    ts = float(ts)
    if metrics is None:
        return Scrape(ts=ts, replica=replica, error=str(error) or "scrape failed", gpu=gpu, pod=pod, group=group)
    reason = not_metrics_reason(metrics)
    if reason is not None:
        return Scrape(ts=ts, replica=replica, error=reason, gpu=gpu, pod=pod, group=group)
    sample, bad = engines.read_page(metrics)
    if bad is not None:
        # an engine-less page was still a good scrape of the pod: it keeps its GPU and pod facts
        if bad == engines.NO_ENGINE_METRICS:
            return Scrape(ts=ts, replica=replica, error=bad, gpu=gpu, pod=pod, group=group)
        return Scrape(ts=ts, replica=replica, error=bad, group=group)
    return Scrape(ts=ts, replica=replica, sample=sample, raw=metrics if keep_raw else None,
                  gpu=gpu, pod=pod, group=group)


def read_log(path: str, on_problem: Callable[[LogProblem], None] | None = None,
             keep_raw: bool = False) -> Iterator[Scrape]:
    """Scrapes in file order. Problems (malformed lines, a cut last line, ignored fields) go to
    `on_problem`; OSError from opening the file propagates (the caller reports it)."""

    said = 0  # line problems reported; past _MAX_PROBLEMS they are only counted
    more = 0

    def problem(line: int, msg: str) -> None:
        nonlocal said, more
        if line and said >= _MAX_PROBLEMS:
            more += 1
            return
        said += bool(line)
        if on_problem is not None:
            on_problem(LogProblem(path, line, msg))

    state = _ReadState()
    for lineno, raw, complete in iter_lines(path, problem, state):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except RecursionError:
            problem(lineno, "JSON nested too deeply to be a scrape record, skipped")
            continue
        except (ValueError, UnicodeDecodeError) as e:
            if not complete:  # a gzip stream without its end says so on its own
                why = "" if state.unended_at is not None else " (recording cut mid-write)"
                problem(lineno, f"incomplete last line{why}, skipped")
            else:
                problem(lineno, f"malformed JSON ({_short(e)}), skipped")
            continue
        notes: list[str] = []
        try:
            scrape = record_to_scrape(obj, keep_raw, notes)
        except LogFormatError as e:
            problem(lineno, f"{e}, skipped")
            continue
        for n in notes:
            problem(lineno, n)
        state.found = True
        yield scrape
    if more and on_problem is not None:
        on_problem(LogProblem(path, 0, f"... and {more} more problem lines"))


def load_log(path: str, keep_raw: bool = False) -> tuple[list[Scrape], list[LogProblem]]:
    problems: list[LogProblem] = []
    scrapes = list(read_log(path, problems.append, keep_raw))
    return scrapes, problems


def _short(e: Exception) -> str:
    msg = str(e)
    return msg if len(msg) <= 80 else msg[:77] + "..."

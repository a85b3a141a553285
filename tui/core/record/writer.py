"""Recorder: appends every scrape to a JSON-lines scrape log (the format `kvwatch diagnose` reads).

One object per scrape:
  {"ts": 1712.5, "replica": "vllm-0", "metrics": "<page text>",
   "gpu": {"memory_used_bytes", "memory_total_bytes", "utilization_pct", "throttle_reasons",
           "ecc_uncorrected_errors"},            (optional; the worst device of the replica)
   "pod": {"restarts", "last_termination_reason", "last_exit_code"}}   (optional)
a failed scrape is {"ts", "replica", "error"}. Extra fields a reader may ignore: "group",
"gpu.devices" (every device when there are several), "gpu.xid_errors", "pod.namespace/name/node".

Size is bounded: once the file passes `max_bytes` (on disk, so compressed for .gz; by at most one
line) it is rotated (FILE -> FILE.1 -> ... -> FILE.<rotate>, the oldest dropped), so the total
stays under (rotate + 1) x max_bytes; with `rotate=0` recording stops at the cap instead. Every
line is flushed as soon as it is written (gzip: a sync flush), so a killed kvwatch loses at
most the line being written, and the reader recovers everything before it. Gzip is used when
the name ends in `.gz`; appending to an existing file adds a gzip member, which stays valid.
"""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
import re
import stat
import zlib
from typing import IO, Any, Iterable

from ..model import GpuDevice, GpuSample, PodInfo, Scrape
from ..textsafe import redact
from .render import render_sample

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_ROTATE = 3
# how every record starts (this writer puts "ts" first; older and hand-made ones may space it)
_RECORD_START = re.compile(rb'\s*\{\s*"(ts|replica)"\s*:')


class NotARecording(ValueError):
    """--record names something kvwatch must not append to (a symlink, a device, another file)."""


def _looks_like_recording(head: bytes, gz: bool) -> bool:
    if gz:
        if not head.startswith(b"\x1f\x8b"):
            return False
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 4096)
        except zlib.error:
            return False
    return bool(_RECORD_START.match(head))


def open_for_append(path: str) -> int:
    """A descriptor appending to `path`, created 0600 when missing. Refused (NotARecording): a
    symbolic link (never followed, whatever it points at), anything but a regular file, and a
    non-empty file that does not start like a kvwatch recording."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise NotARecording(f"{path} is a symbolic link: not followed (give the recording's own path)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotARecording(f"{path} is not a regular file: not a kvwatch recording")
        if st.st_size and not _looks_like_recording(os.pread(fd, 4096, 0), path.endswith(".gz")):
            raise NotARecording(f"{path} exists and is not a kvwatch recording: not appended to "
                                "(give a new file name)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _gpu_device(d: GpuDevice) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if d.memory_used_bytes is not None:
        out["memory_used_bytes"] = d.memory_used_bytes
    if d.memory_total_bytes is not None:
        out["memory_total_bytes"] = d.memory_total_bytes
    if d.compute_pct is not None:
        out["utilization_pct"] = d.compute_pct
    out["throttle_reasons"] = list(d.throttle_reasons)
    if d.ecc_uncorrected is not None:
        out["ecc_uncorrected_errors"] = d.ecc_uncorrected
    if d.xid_errors:
        out["xid_errors"] = d.xid_errors
    if d.name:
        out["name"] = d.name
    if d.uuid:
        out["uuid"] = d.uuid
    out["index"] = d.index
    return out


def gpu_record(g: GpuSample) -> dict[str, Any]:
    """The `gpu` object: the replica's worst device (by memory %) on top, all devices below."""
    if not g.devices:
        return {}
    worst = max(g.devices, key=lambda d: d.memory_pct if d.memory_pct is not None else -1.0)
    top = _gpu_device(worst)
    top.pop("index", None)
    if g.compute_pct is not None:
        top["utilization_pct"] = g.compute_pct  # the busiest GPU of a TP group
    top["throttle_reasons"] = list(g.throttle_reasons)
    if g.ecc_uncorrected is not None:
        top["ecc_uncorrected_errors"] = g.ecc_uncorrected
    if g.xid_errors:
        top["xid_errors"] = g.xid_errors
    if len(g.devices) > 1:
        top["devices"] = [_gpu_device(d) for d in g.devices]
    if g.source:
        top["source"] = g.source
    return top


def pod_record(p: PodInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"restarts": p.restarts}
    if p.last_termination_reason is not None:
        out["last_termination_reason"] = p.last_termination_reason
    if p.last_exit_code is not None:
        out["last_exit_code"] = p.last_exit_code
    for k in ("namespace", "name", "node", "phase"):
        v = getattr(p, k)
        if v:
            out[k] = v
    return out


def scrape_record(s: Scrape) -> dict[str, Any]:
    """The log object for one scrape."""
    rec: dict[str, Any] = {"ts": s.ts, "replica": s.replica}
    if s.ok:
        rec["metrics"] = s.raw if s.raw is not None else render_sample(s.page)
    else:
        rec["error"] = redact(s.error or "scrape failed")
    if s.gpu is not None and s.gpu.devices:
        rec["gpu"] = gpu_record(s.gpu)
    if s.pod is not None:
        rec["pod"] = pod_record(s.pod)
    if s.group:
        rec["group"] = s.group
    return rec


class Recorder:
    """Append scrapes to `path`; usable as `Monitor(on_scrapes=recorder.write)`.

    Never raises from `write` once open: a full disk or a vanished directory stops the
    recording and sets `error`, and the dashboard carries on.
    """

    def __init__(self, path: str, max_bytes: int = DEFAULT_MAX_BYTES, rotate: int = DEFAULT_ROTATE,
                 compresslevel: int = 1) -> None:
        # gzip level 1: a refresh of 256 replicas (54 KB pages) takes ~55 ms to write instead of
        # ~125 ms at level 6, for a file ~20 % larger
        if max_bytes <= 0:
            raise ValueError("max_bytes must be > 0")
        if rotate < 0:
            raise ValueError("rotate must be >= 0")
        self.path = path
        self.max_bytes = max_bytes
        self.rotate = rotate
        self.gz = path.endswith(".gz")
        self.compresslevel = compresslevel
        self.lines = 0
        self.error: str | None = None  # why recording stopped, if it did
        self.capped = False
        self._raw: IO[bytes] | None = None
        self._out: IO[bytes] | gzip.GzipFile | None = None
        self._open()  # fail early (bad directory, no permission): raises OSError

    @property
    def active(self) -> bool:
        return self._out is not None

    def _open(self) -> None:
        self._raw = os.fdopen(open_for_append(self.path), "ab")
        self._out = gzip.GzipFile(fileobj=self._raw, mode="ab", compresslevel=self.compresslevel) \
            if self.gz else self._raw

    def _size(self) -> int:
        assert self._raw is not None
        return self._raw.tell()

    def write(self, scrapes: Iterable[Scrape]) -> None:
        for s in scrapes:
            if self._out is None:
                return
            line = json.dumps(_clean(scrape_record(s)), separators=(",", ":"), allow_nan=False,
                              default=_jsonable).encode() + b"\n"
            try:
                if self._size() >= self.max_bytes:  # the file passed the limit with its last line
                    if not self._roll():
                        return
                self._out.write(line)
                self._out.flush()  # gzip: Z_SYNC_FLUSH, so the bytes are decodable now
                if self._out is not self._raw and self._raw is not None:
                    self._raw.flush()
                self.lines += 1
            except (OSError, NotARecording) as e:  # NotARecording: the rotated file was replaced
                self._stop(f"recording stopped: {getattr(e, 'strerror', None) or e}")

    def _roll(self) -> bool:
        """Rotate (True: keep writing) or stop at the cap (False)."""
        if self.rotate == 0:
            self.capped = True
            self._stop(f"recording stopped at the {self.max_bytes} byte cap")
            return False
        self._close_files()
        for i in range(self.rotate, 0, -1):
            src = self.path if i == 1 else f"{self.path}.{i - 1}"
            if os.path.exists(src):
                os.replace(src, f"{self.path}.{i}")
        self._open()
        return True

    def _stop(self, why: str) -> None:
        self.error = why
        try:
            self._close_files()
        except OSError:
            pass

    def _close_files(self) -> None:
        out, raw = self._out, self._raw
        self._out = self._raw = None
        if out is not None and out is not raw:
            out.close()
        if raw is not None:
            raw.close()

    def close(self) -> None:
        try:
            self._close_files()
        except OSError as e:
            self.error = f"closing the recording: {e.strerror or e}"

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _clean(v: Any) -> Any:
    """NaN / Inf are not JSON: a value the source could not measure is written as null."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _jsonable(v: Any) -> Any:
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)

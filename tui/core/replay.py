"""The replay controller: steps, seeks and finds verdict changes in a recording.

It sits above the monitor: the `ReplaySource` (sources/replay.py) only hands out recorded
polls, and this module drives a Monitor through them. Each poll goes through `Monitor.ingest`
on its own, so the replayed screens, the offline diagnosis and the live session that recorded
the log all compute the same verdicts. The verdict at time t uses only the scrapes up to t:
stepping back or seeking rebuilds a fresh Monitor from the first poll (`rebuild`), never reuses
state from later.

Rebuilding from the start costs a fraction of a millisecond per scrape, which is seconds for an
hour of a large fleet, so the state after every `checkpoint_every` polls is kept in the source
(a copy of the Monitor as rebuilt from the start) and a step back replays only from the nearest
one.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections import deque
from datetime import datetime, timedelta
from typing import Any

from .diagnosis import export_state, import_state
from .monitor import Monitor
from .pointlog import PointLog
from .sources.replay import ReplaySource


def _key(mon: Monitor) -> tuple[Any, ...]:
    return (mon.thresholds, mon.windows, mon.history_len)


def remember(mon: Monitor, source: ReplaySource) -> None:
    """Call after `mon` ingested the poll at `source.pos` (from the start, in order)."""
    if source.wants_checkpoint():
        source.keep(_key(mon), (clone_monitor(mon), _trackers(mon)))


def restore(like: Monitor, source: ReplaySource, k: int) -> tuple[int, Monitor]:
    """The Monitor after the nearest checkpoint at or before `k` (fresh at 0), and its index."""
    best, saved = source.nearest(_key(like), k)
    if not best:
        return 0, fresh_monitor(like, source)
    kept, trackers = saved
    mon = clone_monitor(kept)
    _install(mon, trackers)
    return best, mon


def _frozen(obj: Any) -> bool:
    if obj is None or isinstance(obj, (str, bytes, int, float, bool, tuple, frozenset)):
        return True
    params = getattr(obj, "__dataclass_params__", None)  # set on every dataclass (and its instances)
    return dataclasses.is_dataclass(obj) and params is not None and bool(params.frozen)


def _clone(obj: Any, depth: int) -> Any:
    """Copy mutable containers and objects `depth` levels down; immutable values are shared."""
    if _frozen(obj) or depth <= 0 or callable(obj):
        return obj
    if isinstance(obj, PointLog):
        return obj.frozen()  # packed rows: copied as memory, whatever the depth
    if isinstance(obj, deque):
        return deque((_clone(x, depth - 1) for x in obj), obj.maxlen)
    if isinstance(obj, dict):
        return {k: _clone(v, depth - 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone(x, depth - 1) for x in obj]
    if isinstance(obj, set):
        return set(obj)
    new = copy.copy(obj)
    for name in _attrs(obj):
        setattr(new, name, _clone(getattr(obj, name), depth - 1))
    return new


def _attrs(obj: Any) -> list[str]:
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names += [n for n in getattr(cls, "__slots__", ()) if hasattr(obj, n) and n != "__weakref__"]
    return names


def _trackers(mon: Monitor) -> dict[str, Any]:
    """The diagnosis' per-history verdict state machines, so a restored copy carries on from
    them instead of re-deriving them from the retained window."""
    out = {}
    for name, h in mon.histories.items():
        state = export_state(h)
        if state is not None:
            out[name] = state
    return out


def _install(mon: Monitor, trackers: dict[str, Any]) -> None:
    for name, state in trackers.items():
        h = mon.histories.get(name)
        if h is not None:
            import_state(h, state)


def clone_monitor(mon: Monitor) -> Monitor:
    """An independent copy of `mon` (histories, verdict memory, latest scrapes), same source."""
    new = copy.copy(mon)
    for name in _attrs(mon):
        if name not in ("source", "on_scrapes"):
            setattr(new, name, _clone(getattr(mon, name), 5))
    return new


def fresh_monitor(like: Monitor, source: ReplaySource) -> Monitor:
    return Monitor(source, thresholds=like.thresholds, windows=like.windows, history_len=like.history_len)


def rebuild(like: Monitor, source: ReplaySource, k: int) -> Monitor:
    """A new Monitor that has seen exactly the first `k` polls, as if played from the start
    (resumed from the nearest checkpoint at or before k, itself built from the start)."""
    k = max(0, min(k, len(source.rounds)))
    start, mon = restore(like, source, k)
    mon.source = source
    source.seek_index(start)
    while source.pos < k:
        mon.ingest(source.take())
        remember(mon, source)
    source.seek_index(k)
    return mon


def verdicts(mon: Monitor) -> dict[str, str]:
    return {r.name: r.verdict for r in mon.state.replicas}


def next_change(mon: Monitor, source: ReplaySource) -> list[tuple[str, str, str]] | None:
    """Ingest polls into `mon` until some replica's verdict changes; the changes as
    (replica, before, after), or None (and `mon` untouched in effect) when none is left.

    The caller gets back the same Monitor advanced in place; on None it should rebuild to the
    position it started from (the polls were consumed)."""
    before = verdicts(mon)
    while not source.at_end:
        mon.ingest(source.take())
        remember(mon, source)
        now = verdicts(mon)
        changed = [(n, before[n], v) for n, v in now.items() if n in before and before[n] != v]
        if changed:
            return changed
        before.update(now)
    return None


# -- seek expressions ------------------------------------------------------------------------
_REL = re.compile(r"^([+-])\s*((?:\d+(?:\.\d+)?\s*[hms]?\s*)+)$")
_DUR = re.compile(r"(\d+(?:\.\d+)?)\s*([hms]?)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}

SEEK_HELP = ("HH:MM[:SS] (recording's clock), YYYY-MM-DD HH:MM[:SS], +30s / -2m / +1h5m "
             "(from here), 25% (of the recording), start, end")


def _duration(body: str) -> float:
    return sum(float(n) * _UNIT[u] for n, u in _DUR.findall(body))


def parse_seek(text: str, position: float, start: float, end: float) -> float:
    """Recording time for what the user typed in the seek prompt; ValueError explains a typo.

    Clock times are local, like the header; a bare HH:MM is looked for on the days the recording
    covers, nearest to the current position."""
    s = text.strip().lower()
    if not s:
        raise ValueError("nothing typed")
    if s in ("start", "begin", "^", "0%"):
        return start
    if s in ("end", "$", "100%"):
        return end
    m = _REL.match(s)
    if m:
        d = _duration(m.group(2))
        return position + d if m.group(1) == "+" else position - d
    if s.endswith("%"):
        try:
            f = float(s[:-1])
        except ValueError:
            raise ValueError(f"not a percentage: {text!r}") from None
        if not 0 <= f <= 100:
            raise ValueError("a percentage must be 0-100")
        return start + (end - start) * f / 100.0
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"):
        try:
            return datetime.strptime(s, fmt).timestamp()
        except ValueError:
            pass
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            t = datetime.strptime(s, fmt).time()
        except ValueError:
            continue
        here = datetime.fromtimestamp(position)
        first, last = datetime.fromtimestamp(start).date(), datetime.fromtimestamp(end).date()
        days = [first + timedelta(days=i) for i in range((last - first).days + 1)] or [here.date()]
        cands = [datetime.combine(d, t).timestamp() for d in days]
        inside = [c for c in cands if start <= c <= end] or cands
        return min(inside, key=lambda c: abs(c - position))
    try:
        v = float(s)
    except ValueError:
        raise ValueError(f"cannot read {text!r}; try {SEEK_HELP}") from None
    return v if v > 1e8 else start + v  # a unix time, or seconds from the start

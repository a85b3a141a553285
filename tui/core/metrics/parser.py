"""A targeted, exact parser for the Prometheus text exposition format 0.0.4.

Why not prometheus_client's parser: it costs 4.5-6 ms on a real vLLM V1 page, over 1 s of CPU
per refresh of 256 replicas (bench/bench_parse.py prints both). This one skips unwanted series
by name before looking at their labels, and remembers parsed `name{labels}` prefixes: a replica
exposes the same series on every scrape (and replicas of one model expose the same label
sets), so after the first scrape a sample line costs a dict lookup and a float(). From the
third scrape on, a page laid out as one read before is read through that page's template
(_Template): a few C-level passes over its lines, the same result as reading it line by line
(tests/unit/test_parser_templates.py).

Exactness (checked against prometheus_client by tests/unit/test_parser.py): label values with
`\\\\`, `\\"` and `\\n` escapes (other backslashes kept literally, as prometheus_client does) and
containing `,` `}` `=` `#` or spaces; NaN, +Inf, -Inf; optional timestamps (accepted, not
kept); exemplars (` # {..} v [ts]`, ignored); HELP and other comments; blank lines; `\\r\\n`;
names with colons. `*_created` series are dropped: they are creation times, not data.

A malformed line is skipped and reported in `Page.errors`; parsing never raises on input.
"""

from __future__ import annotations

import math
import operator
import re
from typing import Any, Callable, Collection, Iterable, NoReturn, Sequence

__all__ = [
    "Labels",
    "Page",
    "parse",
    "looks_like_metrics",
    "not_metrics_reason",
    "content_type_reason",
    "histogram_series",
]


class Labels(dict[str, Any]):
    """A read-only label set. Parsed label sets are shared between pages, so never mutate one."""

    __slots__ = ("_hist",)
    _hist: tuple[tuple[tuple[str, str], ...], float | None]

    def _readonly(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("parsed label sets are shared and read-only; copy with dict(labels)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly
    __ior__ = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[type[Labels], tuple[dict[str, str]]]:
        return (Labels, (dict(self),))  # pickle/copy without going through __setitem__

    def hist_key(self) -> tuple[tuple[tuple[str, str], ...], float | None]:
        """(identity of the series without `le`, the `le` bound or None), computed once per
        label set: histogram assembly needs it for every bucket of every scrape."""
        try:
            return self._hist
        except AttributeError:
            pass
        le = self.get("le")
        bound: float | None = None
        if le is not None:
            try:
                bound = float(le)
            except ValueError:
                bound = None
        key = (tuple(sorted((k, v) for k, v in self.items() if k != "le")), bound)
        self._hist = key
        return key


NO_LABELS = Labels()

# One sample: its labels and its value. Timestamps are syntax-checked and dropped.
SampleRow = tuple[Labels, float]
# One series: its sample name and labels.
SeriesKey = tuple[str, Labels]


class Page:
    """One parsed exposition page.

    samples: exposed sample name (e.g. `vllm:num_preemptions_total`, `x_bucket`) -> list of
        (labels, value) in page order. Only names that were wanted are present. Built on first
        use from `keys` and `values`, the kept rows in page order: (name, labels) and the value.
        The parser's (name, labels) tuples are shared by every page exposing that series, so a
        page laid out as an earlier one has a list of the same objects (extract's page plans).
    families: family name -> type ("counter", "gauge", "histogram", ...) from `# TYPE` lines,
        for every family on the page (wanted or not).
    errors: (line number, reason) for malformed lines, at most MAX_ERRORS of them;
        error_count counts them all.
    """

    __slots__ = ("_samples", "_keys", "_values", "families", "errors", "error_count")

    def __init__(self, samples: dict[str, list[SampleRow]] | None = None, families: dict[str, str] | None = None,
                 errors: list[tuple[int, str]] | None = None, error_count: int = 0) -> None:
        self._samples = samples
        self._keys: list[SeriesKey] | None = None if samples is not None else []
        self._values: list[float] | None = None if samples is not None else []
        self.families = {} if families is None else families
        self.errors = [] if errors is None else errors
        self.error_count = error_count

    @property
    def samples(self) -> dict[str, list[SampleRow]]:
        out = self._samples
        if out is None:
            out = {}
            for (name, labels), v in zip(self._keys, self._values, strict=True):  # type: ignore[arg-type]
                rows = out.get(name)
                if rows is None:
                    rows = out[name] = []
                rows.append((labels, v))
            self._samples = out
        return out

    def rows(self) -> tuple[list[SeriesKey], list[float]]:
        """The kept rows in page order: ((name, labels) per row, value per row). Once `samples`
        was built, it is what the rows say (a caller may have changed it)."""
        if self._samples is None:
            return self._keys, self._values  # type: ignore[return-value]
        keys: list[SeriesKey] = []
        values: list[float] = []
        for name, rows in self._samples.items():
            for labels, v in rows:
                keys.append((name, labels))
                values.append(v)
        return keys, values

    def get(self, name: str) -> list[SampleRow]:
        return self.samples.get(name, [])

    def names(self) -> set[str]:
        return set(self.samples)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Page):
            return NotImplemented
        return (self.samples, self.families, self.errors, self.error_count) == (
            other.samples, other.families, other.errors, other.error_count)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Page(samples={self.samples!r}, families={self.families!r}, errors={self.errors!r}, "
                f"error_count={self.error_count!r})")


MAX_ERRORS = 100

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# A quoted label value; backslash takes the next character with it, so `\"` does not end it.
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)
_ESCAPE = re.compile(r'\\[\\n"]')
_UNESCAPE = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_BLANK = " \t"

# `name{labels}` prefix -> (name, labels), filled by the exact slow path and reused for every
# later line starting with the same prefix; (name, None) for a series no caller wanted yet (its
# labels unread), so that its lines are skipped at the cost of one lookup. Bounded: cleared when
# it grows past the limit.
_SERIES_CACHE: dict[str, tuple[str, Labels | None]] = {}
_SERIES_CACHE_MAX = 100_000
_VALID_NAMES: set[str] = set()  # metric names already validated (label-less series, TYPE lines)
# `# TYPE name type` lines read by the fast path: the same lines open the same families on every
# scrape, so a line seen before is one lookup. Bounded like the series cache.
_TYPE_LINES: dict[str, tuple[str, str]] = {}
_TYPES = frozenset(
    {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset", "gaugehistogram"}
)


class _Malformed(ValueError):
    pass


def histogram_series(base: str) -> tuple[str, str, str]:
    """The sample names a histogram family exposes."""
    return base + "_bucket", base + "_sum", base + "_count"


def parse(text: str, wanted: Collection[str] | None = None) -> Page:
    """Parse exposition text; keep only samples whose name is in `wanted` (None = all).

    With `wanted` a frozenset, a page laid out as one read before (see _Template) is read
    through that page's template: the same lines in the same places, only values differ.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if not isinstance(wanted, frozenset):
        return _parse_lines(text, lines, wanted, None)
    slot = (wanted, len(lines))
    templates = _TEMPLATES.get(slot)
    if templates is not None:
        for n, template in enumerate(templates):
            page = template.read(lines)
            if page is not None:
                if n:
                    templates.insert(0, templates.pop(n))  # the newest first: tried first
                return page
    learn: list[Any] = []
    page = _parse_lines(text, lines, wanted, learn)
    if learn:
        if sum(map(len, _TEMPLATES.values())) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()  # ~60 KB each for a real-size page
            templates = None
        if templates is None:
            templates = _TEMPLATES[slot] = []
        templates.insert(0, _Template(learn, page, lines))
        del templates[_TEMPLATES_PER_SLOT:]
    return page


def _parse_lines(text: str, lines: list[str], wanted: Collection[str] | None, learn: list[Any] | None) -> Page:
    """The exact parse of `text` (split into `lines`). With `learn` given, each line's template
    record is appended to it (see _Template), or it is left empty when some line took the
    exact way (a series not seen before, an odd line): that page makes no template."""
    page = Page()
    add_key = page._keys.append  # type: ignore[union-attr]
    add_value = page._values.append  # type: ignore[union-attr]
    families = page.families
    cache_get = _SERIES_CACHE.get
    keep_all = wanted is None
    want: Collection[str] = () if wanted is None else wanted  # keep_all: wanted is None
    record = learn.append if learn is not None else None
    lineno = 0
    for line in lines:
        lineno += 1
        if not line:
            if record:
                record(_EQUAL)
            continue
        if line[0] == "#":
            if line.startswith("# HELP"):
                if record:
                    record(_HELP)
                continue  # a plain comment (never `# EOF` or `# TYPE`)
            known = _TYPE_LINES.get(line)
            if known is not None:  # this exact TYPE line was read and found valid before
                families[known[0]] = known[1]
                if record:
                    record(_EQUAL)
                continue
            record = None
            if line.startswith("# EOF") and not line[5:].strip():
                # OpenMetrics' end of the page: nothing after it is part of it
                if _rest_has_text(text, lineno):
                    _error(page, lineno, "text after # EOF ignored")
                break
            if line.startswith("# TYPE"):
                name, sep, typ = line[7:].partition(" ")
                if sep and typ in _TYPES and name in _VALID_NAMES and line[6] == " ":
                    families[name] = typ
                    if len(_TYPE_LINES) >= _SERIES_CACHE_MAX:
                        _TYPE_LINES.clear()
                    _TYPE_LINES[line] = (name, typ)
                else:
                    _comment(line, lineno, page)
            continue
        # Fast path: the line is a series seen before (`name{labels}`, or a bare `name`), one
        # space and the value. The cache holds only exact `name{labels}` / `name` texts, so a
        # hit means the text after the last space is the whole value; anything else goes the
        # exact way (`_read_line`).
        prefix, _, tail = line.rpartition(" ")
        hit = cache_get(prefix)
        if hit is not None:
            name = hit[0]
            if keep_all:
                if name.endswith("_created"):
                    continue
            elif name not in want:
                if record:
                    record(prefix)  # an unwanted series
                continue
            if hit[1] is None or "_" in tail:
                hit = None
            else:
                try:
                    value = float(tail)
                except ValueError:
                    hit = None
                else:
                    if record:
                        record(hit)  # a kept series: its prefix is the text of its key
                        record(prefix)
        if hit is None:
            record = None
            row = _read_line(line, prefix, lineno, page, want, keep_all)
            if row is None:
                continue
            hit, value = row
        add_key(hit)  # type: ignore[arg-type]  # a hit without labels became a miss above
        add_value(value)
    if learn is not None and record is None:
        learn.clear()
    return page


# Template records (see _Template): a blank or TYPE line read again only when equal, a HELP line.
_EQUAL = object()
_HELP = object()


def tuple_getter(idx: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """items -> tuple of the items at `idx` (itemgetter, which gives a bare item for one)."""
    if len(idx) > 1:
        return operator.itemgetter(*idx)
    if idx:
        i = idx[0]
        return lambda v: (v[i],)
    return lambda v: ()


class _Template:
    """What reading a page line by line found, to read a page laid out the same way at once.

    A page whose every line took the fast way (a HELP line, a TYPE line read before, a blank
    line, a series seen before with one space and the value) is read the same way again by
    any page with as many lines where each line starts as that page's did: a HELP line with
    `# HELP`; a series with its `name{labels}` text and a space, the rest being the value
    (float(), no `_`, as the fast path reads it; any other rest sends the page the exact
    way); a blank or TYPE line equal to it. Those are exactly the lines the line-by-line
    reading would read the same way: an unwanted series' line is skipped there whatever
    follows its prefix, a wanted one's value is the same float of the same text. So the
    page is the same, and costs C-level passes over the lines (startswith, itemgetter,
    float) instead of Python code per line. Replicas of one model share templates.
    """

    __slots__ = ("starts", "equal", "equal_texts", "kept", "cuts", "keys", "families")

    def __init__(self, learn: list[Any], page: Page, lines: list[str]) -> None:
        starts: list[str] = []
        equal: list[int] = []
        kept: list[int] = []
        cuts: list[slice] = []
        keys: list[SeriesKey] = []
        key: SeriesKey | None = None
        for rec in learn:
            if rec.__class__ is tuple:  # a kept series' key, its prefix next
                key = rec
                continue
            i = len(starts)
            if rec is _EQUAL:
                equal.append(i)
                starts.append("")
            elif rec is _HELP:
                starts.append("# HELP")
            else:
                starts.append(rec + " ")
                if key is not None:
                    kept.append(i)
                    cuts.append(slice(len(rec) + 1, None))
                    keys.append(key)
                    key = None
        self.starts = starts
        self.equal = tuple_getter(equal)
        self.equal_texts = self.equal(lines)
        self.kept = tuple_getter(kept)
        self.cuts = cuts
        self.keys = keys
        self.families = page.families.copy()

    def read(self, lines: list[str]) -> Page | None:
        """The page of `lines`, or None when they are not laid out as this template's."""
        if not all(map(str.startswith, lines, self.starts)):
            return None
        if self.equal(lines) != self.equal_texts:
            return None
        tails: list[str] = list(map(operator.getitem, self.kept(lines), self.cuts))
        if "_" in "".join(tails):
            return None
        try:
            values = list(map(float, tails))
        except ValueError:
            return None
        page = Page()
        page._keys = self.keys
        page._values = values
        page.families = self.families.copy()
        return page


# (wanted names, line count) -> templates, the newest first
_TEMPLATES: dict[tuple[frozenset[str], int], list[_Template]] = {}
_TEMPLATES_PER_SLOT = 4  # a page laid out as none of them costs a try of each
_TEMPLATES_MAX = 64


def _rest_has_text(text: str, lineno: int) -> bool:
    """Whether anything but blank lines follows line `lineno` of `text`."""
    at = 0
    for _ in range(lineno):
        at = text.find("\n", at) + 1
        if at == 0:
            return False
    return bool(text[at:].strip())


def _unwanted(name: str, wanted: Collection[str], keep_all: bool) -> bool:
    return name.endswith("_created") if keep_all else name not in wanted


def _read_line(line: str, prefix: str, lineno: int, page: Page, wanted: Collection[str],
               keep_all: bool) -> tuple[SeriesKey, float] | None:
    """The exact reading of a sample line (None: skipped, or malformed and reported);
    `prefix` is the line's text before its last space."""
    if line[0] in _BLANK or line[-1] in " \t\r":
        line = line.strip()
        if not line:
            return None
        if line[0] == "#":
            if line.startswith("# TYPE"):
                _comment(line, lineno, page)
            return None
    try:
        r = line.rfind("}")
        hit = _SERIES_CACHE.get(line[: r + 1]) if r != -1 else None
        if hit is not None and hit[1] is not None:
            # Seen before: this prefix is a complete `name{labels}`, and the rest of
            # the line holds no brace, so it is the value (and maybe a timestamp).
            if _unwanted(hit[0], wanted, keep_all):
                return None
            tail = line[r + 1 :]
            try:
                if "_" in tail:
                    raise ValueError
                value = float(tail)
            except ValueError:
                value = _value(tail.split(), 0)
            return hit, value  # type: ignore[return-value]
        if "{" in line:
            name = line[: line.find("{")]
            if " " in name or "\t" in name:
                # `name {..}`, or `name value # {exemplar}`
                name = _split_name(line)
            elif prefix and not keep_all and name not in wanted:
                # Remember the unwanted series so that its next line is skipped at once.
                _cache_put(prefix, (name, None))
            if _unwanted(name, wanted, keep_all):
                return None
            return _slow_sample(line)
        # No labels: `name value [timestamp]`.
        parts = line.split()
        name = parts[0]
        if _unwanted(name, wanted, keep_all):
            if prefix == name and not keep_all:
                _cache_put(prefix, (name, None))  # skipped at once next time, as a labelled one
            return None
        if name not in _VALID_NAMES:
            if _METRIC_NAME.fullmatch(name) is None:
                raise _Malformed("invalid metric name")
            _remember_name(name)
        value = _value(parts, 1)
        # A valid bare name is its own `name{labels}` prefix: its next `name value` line is
        # read by the fast path.
        key = _SERIES_CACHE.get(name)
        if key is None or key[1] is None:
            key = (name, NO_LABELS)
            _cache_put(name, key)
        return key, value  # type: ignore[return-value]
    except _Malformed as e:
        _error(page, lineno, str(e))
        return None


def _error(page: Page, lineno: int, reason: str) -> None:
    page.error_count += 1
    if len(page.errors) < MAX_ERRORS:
        page.errors.append((lineno, reason))


def _comment(line: str, lineno: int, page: Page) -> None:
    parts = line[1:].split(None, 2)
    if parts[0] != "TYPE":
        return  # "# TYPEx ..." is a plain comment
    if len(parts) < 3:
        _error(page, lineno, "TYPE line without a type")
        return
    name, typ = parts[1], parts[2].strip()
    if _METRIC_NAME.fullmatch(name) is None or " " in typ:
        _error(page, lineno, "malformed TYPE line")
        return
    _remember_name(name)
    page.families[name] = typ.lower()


def _remember_name(name: str) -> None:
    if len(_VALID_NAMES) > 10_000:
        _VALID_NAMES.clear()
    _VALID_NAMES.add(name)


def _value(tokens: list[str], i: int) -> float:
    """Value at tokens[i], then an optional timestamp and/or an exemplar (` # {..} v [ts]`)."""
    if len(tokens) <= i:
        raise _Malformed("missing value")
    v = _float(tokens[i])
    rest = tokens[i + 1 :]
    if rest and rest[0] != "#":
        ts = rest.pop(0)
        try:
            int(ts)
        except ValueError:
            # prometheus_client accepts float timestamps too; so do we, but nothing else.
            if "_" in ts or not math.isfinite(_float(ts)):
                raise _Malformed("bad timestamp") from None
    if rest:
        if rest[0] != "#" or len(rest) < 2 or not rest[1].startswith("{"):
            raise _Malformed("unexpected text after the value")
    return v


def _float(s: str) -> float:
    if "_" in s:
        raise _Malformed(f"bad value {s[:40]!r}")
    try:
        return float(s)
    except ValueError:
        raise _Malformed(f"bad value {s[:40]!r}") from None


def _split_name(line: str) -> str:
    m = _METRIC_NAME.match(line)
    if m is None:
        raise _Malformed("invalid metric name")
    return m.group()


def _slow_sample(line: str) -> tuple[SeriesKey, float]:
    """Exact parse of one sample line with a label set; caches its `name{labels}` prefix."""
    m = _METRIC_NAME.match(line)
    if m is None:
        raise _Malformed("invalid metric name")
    name = m.group()
    i = m.end()
    n = len(line)
    while i < n and line[i] in _BLANK:
        i += 1
    if i >= n or line[i] != "{":
        # `name value # {exemplar}`: the brace belongs to an exemplar.
        if i == m.end():
            raise _Malformed("invalid metric name")
        return (name, NO_LABELS), _value(line[i:].split(), 0)
    labels: dict[str, str] = {}
    i += 1
    while True:
        while i < n and line[i] in _BLANK:
            i += 1
        if i >= n:
            raise _Malformed(f"unterminated label set at column {i + 1}")
        if line[i] == "}":
            break
        lm = _LABEL_NAME.match(line, i)
        if lm is None:
            raise _Malformed(f"bad label name at column {i + 1}")
        label = lm.group()
        i = lm.end()
        while i < n and line[i] in _BLANK:
            i += 1
        if i >= n or line[i] != "=":
            raise _Malformed(f"label {label!r} without '=' at column {i + 1}")
        i += 1
        while i < n and line[i] in _BLANK:
            i += 1
        qm = _QUOTED.match(line, i)
        if qm is None:
            raise _Malformed(f"label {label!r}: unterminated or unquoted value at column {i + 1}")
        raw = qm.group(1)
        if label in labels:
            raise _Malformed(f"duplicate label {label!r}")
        labels[label] = _ESCAPE.sub(lambda e: _UNESCAPE[e.group()], raw) if "\\" in raw else raw
        i = qm.end()
        while i < n and line[i] in _BLANK:
            i += 1
        if i < n and line[i] == ",":
            i += 1
            continue
        if i < n and line[i] == "}":
            break
        if i >= n:
            raise _Malformed(f"unterminated label set at column {i + 1}")
        raise _Malformed(f"expected ',' or '}}' at column {i + 1}")
    end = i + 1
    value = _value(line[end:].split(), 0)
    key = (name, Labels(labels) if labels else NO_LABELS)
    _cache_put(line[:end], key)
    return key, value


def _cache_put(prefix: str, entry: tuple[str, Labels | None]) -> None:
    if len(_SERIES_CACHE) >= _SERIES_CACHE_MAX:
        _SERIES_CACHE.clear()
    _SERIES_CACHE[prefix] = entry


# -- is this a metrics page at all? ------------------------------------------------------------

def not_metrics_reason(text: str, content_type: str | None = None) -> str | None:
    """Why `text` is not a Prometheus exposition page, or None when it looks like one.

    Catches what a wrong URL returns: an HTML login or index page, a JSON API answer, an
    empty body. The reason is short and meant for the screen.
    """
    reason = content_type_reason(content_type)
    if reason is not None:
        return reason
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        return "empty response"
    head = body[:512].lower()
    if head.startswith("<") or "<html" in head or "<!doctype" in head:
        return "not a metrics page (HTML)"
    if head[0] in "{[":
        return "not a metrics page (JSON)"
    for line in _first_lines(body, 50):
        if line.startswith("#"):
            if line[1:].split(None, 1)[:1] in (["TYPE"], ["HELP"], ["EOF"]):
                return None
            continue
        if parse(line).error_count == 0:
            return None
        return "not a metrics page (no samples)"
    return "not a metrics page (only comments)"


def content_type_reason(content_type: str | None) -> str | None:
    """Why a Content-Type rules out a metrics page (HTML, JSON), or None."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype in ("text/html", "application/xhtml+xml", "application/json"):
        return f"not a metrics page ({ctype})"
    if "protobuf" in ctype:
        return "protobuf metrics format, not the text format kvwatch reads"
    return None


def looks_like_metrics(text: str, content_type: str | None = None) -> bool:
    return not_metrics_reason(text, content_type) is None


def _first_lines(body: str, n: int) -> Iterable[str]:
    """The first `n` non-blank lines, each whole however long (a label value can be 20 KB)."""
    start = 0
    while n > 0 and start < len(body):
        end = body.find("\n", start)
        if end < 0:
            end = len(body)
        line = body[start:end].strip()
        start = end + 1
        if line:
            n -= 1
            yield line


"""The user's config file: TOML in the XDG config dir, parsed into a typed, validated Config.

    $KVWATCH_CONFIG                              (tests, or a second profile), else
    $XDG_CONFIG_HOME/kvwatch/config.toml         (else ~/.config/kvwatch/config.toml)

Loading never raises. Every problem becomes a ConfigProblem carrying the file, the line and what
is wrong; a syntax error drops the whole file (defaults everywhere), a bad key or value (of the
wrong type, or a number outside its range) drops only that setting. Safety fails closed: a file
that exists but cannot be read or parsed makes the run read-only (`Config.broken`), and so does
a problem in a [contexts."PATTERN"] section for that context, so a typo never leaves a production
context writable; `--readwrite` is the explicit way out. Command-line flags override the file
(launch.py).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from .config_ranges import THRESHOLD_RANGES, WINDOW_RANGE, in_range
from .diagnosis import Thresholds
from .history import Windows
from .textsafe import clean

ENV_PATH = "KVWATCH_CONFIG"

EXAMPLE = """\
# kvwatch config (TOML). Every key is optional; command-line flags win over this file.
refresh_interval = 1.0          # seconds between refreshes
history_window = 600            # seconds of history kept per replica (plots, sparklines)
theme = "kvwatch-dark"          # kvwatch-dark, kvwatch-light, kvwatch-high-contrast,
                                # kvwatch-colorblind, kvwatch-mono
screenshot_dir = "~/kvwatch-screenshots"
audit_log = "~/.local/state/kvwatch/audit.jsonl"
bell = true                     # ring and notify when a replica enters kv-pressure

[kubernetes]                    # defaults for the Kubernetes mode
context = "staging"
namespace = "inference"
selector = "app=vllm"
port = 8000

[thresholds]                    # any field of the diagnosis thresholds
kv_high = 0.90
kv_clear = 0.85

[windows]
rate_s = 30                     # counters become rates over this window
quantile_s = 60                 # latency quantiles over this window
stale_s = 15                    # failing this long: down

[keys]                          # binding id = "key[,key]"   (see `kvwatch config show`)
screenshot = "ctrl+s,f12"

[contexts."prod-*"]             # kube contexts matching the glob (exact names win)
theme = "kvwatch-high-contrast"
readonly = true
production = true
"""


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        # key names and values come from the file: no escape sequence reaches the terminal
        where = f"{self.path}:{self.line}" if self.line else self.path
        return clean(f"{where}: {self.message}")


@dataclass(frozen=True, slots=True)
class ContextProfile:
    """How one kube context (or glob of them) looks and what it allows."""

    pattern: str
    theme: str | None = None
    readonly: bool = False
    production: bool = False
    forced: bool = False  # read-only because the section has a problem (`--readwrite` lifts it)


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the file read, None when there was none
    refresh_interval: float = 1.0
    history_window: float = 600.0
    theme: str | None = None
    screenshot_dir: str = ""  # "": the XDG data dir (tui/cli_conventions.py)
    audit_log: str | None = None  # None: the audit module's XDG state default
    bell: bool = True
    context: str | None = None
    namespace: str | None = None
    selector: str | None = None
    port: int | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    windows: Windows = field(default_factory=Windows)
    keys: Mapping[str, str] = field(default_factory=dict)
    contexts: tuple[ContextProfile, ...] = ()
    problems: tuple[ConfigProblem, ...] = ()
    lines: Mapping[tuple[str, ...], int] = field(default_factory=dict)  # key path -> line
    # the file exists but could not be read or parsed: the run is read-only (fails closed)
    broken: bool = False

    def profile_for(self, context: str | None) -> ContextProfile | None:
        """The profile of a kube context: an exact name first, then globs in file order."""
        if not context:
            return None
        for p in self.contexts:
            if p.pattern == context:
                return p
        for p in self.contexts:
            if fnmatch.fnmatchcase(context, p.pattern):
                return p
        return None

    def history_len(self, interval: float) -> int:
        """Points to keep per replica so that `history_window` seconds fit at `interval`."""
        return max(10, math.ceil(self.history_window / max(interval, 0.05)))

    def with_readwrite(self) -> "Config":
        """`--readwrite`: what a problem made read-only is writable again (the user said so);
        a profile that says `readonly = true` stays read-only."""
        profiles = tuple(replace(p, readonly=False, forced=False) if p.forced else p for p in self.contexts)
        return replace(self, broken=False, contexts=profiles)

    def problem(self, key_path: tuple[str, ...], message: str) -> ConfigProblem:
        """A problem found after loading (e.g. an unknown theme name), located in the file."""
        return ConfigProblem(str(self.path or "config"), self.lines.get(key_path), message)


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(ENV_PATH):
        return Path(env[ENV_PATH]).expanduser()
    base = env.get("XDG_CONFIG_HOME", "")
    # The XDG spec says relative paths are invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME") or os.path.expanduser("~")) / ".config"
    return root / "kvwatch" / "config.toml"


# -- reading -----------------------------------------------------------------------------------
# Expected type per top-level key: (python types, description, extra check or None)
_SCALARS: dict[str, tuple[tuple[type, ...], str, Any]] = {
    "refresh_interval": ((int, float), "a number of seconds", in_range(0.05, 3600)),
    "history_window": ((int, float), "a number of seconds", in_range(10, 86400)),
    "theme": ((str,), "a theme name", None),
    "screenshot_dir": ((str,), "a directory", None),
    "audit_log": ((str,), "a file path", None),
    "bell": ((bool,), "true or false", None),
}
_KUBE: dict[str, tuple[tuple[type, ...], str, Any]] = {
    "context": ((str,), "a kube context name", None),
    "namespace": ((str,), "a namespace", None),
    "selector": ((str,), "a label selector", None),
    "port": ((int,), "a port number", in_range(1, 65535)),
}
_CONTEXT: dict[str, tuple[tuple[type, ...], str, Any]] = {
    "theme": ((str,), "a theme name", None),
    "readonly": ((bool,), "true or false", None),
    "production": ((bool,), "true or false", None),
}
_TABLES = ("kubernetes", "thresholds", "windows", "keys", "contexts")


def _type_ok(v: Any, types: tuple[type, ...]) -> bool:
    if isinstance(v, bool) and bool not in types:
        return False  # TOML true is not a number
    if float in types and isinstance(v, float) and not math.isfinite(v):
        return False
    return isinstance(v, types)


def _show(v: Any) -> str:
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = key_lines(text)
        self.problems: list[ConfigProblem] = []

    def bad(self, key_path: tuple[str, ...], message: str) -> None:
        line = self.lines.get(key_path)
        if line is None and len(key_path) > 1:  # e.g. a whole table given as an inline value
            line = self.lines.get(key_path[:-1])
        self.problems.append(ConfigProblem(str(self.path), line, f"{'.'.join(key_path)}: {message}"))

    def scalars(self, table: Mapping[str, Any], spec: dict[str, Any], prefix: tuple[str, ...]) -> dict[str, Any]:
        out = {}
        for k, v in table.items():
            if k not in spec:
                continue
            types, what, check = spec[k]
            if not _type_ok(v, types):
                self.bad(prefix + (k,), f"expected {what}, got {_show(v)}")
                continue
            if check is not None and not check[0](v):
                self.bad(prefix + (k,), f"{check[1]}, got {_show(v)}; not used")
                continue
            out[k] = float(v) if float in types else v
        return out

    def unknown(self, table: Mapping[str, Any], known: Any, prefix: tuple[str, ...]) -> None:
        for k in table:
            if k not in known:
                self.bad(prefix + (k,), f"unknown key (known: {', '.join(sorted(known))})")


BROKEN = "using defaults, and read-only until the file is fixed (or --readwrite)"


def load_config(path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate the config file; a missing file is not a problem (all defaults)."""
    p = Path(path).expanduser() if path is not None else config_path(environ)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as e:
        return Config(path=p, broken=True,
                      problems=(ConfigProblem(str(p), None, f"cannot read: {e.strerror or e}; {BROKEN}"),))
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as e:
        bad_at = raw[: e.start].count(b"\n") + 1
        return Config(path=p, broken=True, problems=(ConfigProblem(str(p), bad_at, f"not UTF-8 text; {BROKEN}"),))
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        line: int | None = int(m.group(1)) if m else (text.count("\n") + 1 if "end of document" in str(e) else None)
        msg = re.sub(r"\s*\((?:at line \d+, column \d+|at end of document)\)", "", str(e))
        col = f" (column {m.group(2)})" if m else ""
        return Config(path=p, broken=True,
                      problems=(ConfigProblem(str(p), line, f"TOML syntax: {msg}{col}; {BROKEN}"),))
    return _trusted(parse_config(data, p, text), data, p)


def _untrusted_because(p: Path) -> str | None:
    """Why someone else could have written the file: writable by group or others, or owned by
    another user (root's files are trusted); None when only the user could have."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    if st.st_mode & 0o022:
        return f"writable by others (mode {st.st_mode & 0o777:o})"
    if st.st_uid not in (os.geteuid(), 0):
        return f"owned by another user (uid {st.st_uid})"
    return None


def _loosens(data: Mapping[str, Any]) -> list[str]:
    """The settings another writer could use against the user: where the audit log goes, and a
    context made read-write (`readonly = false`, or production without readonly)."""
    out = ["audit_log"] if "audit_log" in data else []
    for pattern, sect in (data.get("contexts") or {}).items() if isinstance(data.get("contexts"), dict) else ():
        if not isinstance(sect, dict):
            continue
        ro = sect.get("readonly", sect.get("readOnly"))
        if ro is False or (sect.get("production") is True and ro is not True):
            out.append(f"contexts.{pattern!r} read-write")
    return out


def _trusted(cfg: Config, data: Mapping[str, Any], p: Path) -> Config:
    """Fail closed on a file others could have written: said always; when it names the audit log
    or makes a context read-write, the run is read-only (`--readwrite` lifts it) and its
    audit_log is not used."""
    why = _untrusted_because(p)
    if why is None:
        return cfg
    risky = _loosens(data)
    if not risky:
        msg = f"the config file is {why}: anyone who can write it changes what kvwatch does (chmod 600)"
        return replace(cfg, problems=cfg.problems + (ConfigProblem(str(p), None, msg),))
    msg = (f"the config file is {why} and sets {', '.join(risky)}: not trusted; audit_log ignored and "
           "read-only until the file is yours alone (chmod 600, chown) (or --readwrite)")
    return replace(cfg, broken=True, audit_log=None, problems=cfg.problems + (ConfigProblem(str(p), None, msg),))


def parse_config(data: Mapping[str, Any], path: Path, text: str = "") -> Config:
    r = _Reader(path, text)
    r.unknown(data, set(_SCALARS) | set(_TABLES), ())
    kw: dict[str, Any] = r.scalars(data, _SCALARS, ())
    for k in ("screenshot_dir", "audit_log"):
        if k in kw:
            kw[k] = os.path.expanduser(kw[k])

    def table(name: str) -> Mapping[str, Any]:
        v = data.get(name, {})
        if not isinstance(v, dict):
            r.bad((name,), f"expected a table [{name}], got {_show(v)}")
            return {}
        return v

    kube = table("kubernetes")
    r.unknown(kube, _KUBE, ("kubernetes",))
    kw.update(r.scalars(kube, _KUBE, ("kubernetes",)))

    th = Thresholds()
    for k, v in table("thresholds").items():
        if k not in Thresholds.names():
            r.unknown({k: v}, Thresholds.names(), ("thresholds",))
            continue
        cur = getattr(th, k)
        want = (str, list) if isinstance(cur, tuple) else (int, float)
        if not _type_ok(v, want) or (isinstance(v, list) and not all(isinstance(x, str) for x in v)):
            what = "a list of strings" if isinstance(cur, tuple) else f"a number like {cur!r}"
            r.bad(("thresholds", k), f"expected {what}, got {_show(v)}")
            continue
        lo, hi = THRESHOLD_RANGES.get(k, (0, 1e9))
        if not isinstance(cur, tuple) and not lo <= v <= hi:
            r.bad(("thresholds", k), f"must be in the range {lo:g} to {hi:g}, got {_show(v)}; "
                                     f"using the default {cur!r}")
            continue
        try:
            th = th.with_overrides(**{k: v})
        except ValueError as e:
            r.bad(("thresholds", k), str(e).split(": ", 1)[-1])
    if th.kv_clear > th.kv_high:
        r.bad(("thresholds", "kv_clear"), f"must not exceed kv_high ({th.kv_high}); using defaults for both")
        th = replace(th, kv_high=Thresholds().kv_high, kv_clear=Thresholds().kv_clear)
    kw["thresholds"] = th

    win_spec = {f.name: ((int, float), "a number of seconds", in_range(*WINDOW_RANGE)) for f in fields(Windows)}
    win = table("windows")
    r.unknown(win, win_spec, ("windows",))
    kw["windows"] = Windows(**r.scalars(win, win_spec, ("windows",)))

    keys = {}
    for k, v in table("keys").items():
        if not isinstance(v, str) or not v.strip() or not all(_KEY_RX.fullmatch(x.strip()) for x in v.split(",")):
            r.bad(("keys", k), f"expected keys like \"ctrl+t\" or \"f5,space\", got {_show(v)}")
            continue
        keys[k] = ",".join(x.strip() for x in v.split(","))
    kw["keys"] = keys

    profiles = []
    for pattern, sect in table("contexts").items():
        pre = ("contexts", pattern)
        if not isinstance(sect, dict):
            r.bad(pre, f"expected a table [contexts.\"{pattern}\"], got {_show(sect)}")
            continue
        before = len(r.problems)
        r.unknown(sect, _CONTEXT, pre)
        vals = r.scalars(sect, _CONTEXT, pre)
        if len(r.problems) > before:
            vals["readonly"] = vals["forced"] = True
            r.bad(pre, "treated as read-only until the problems above are fixed (or --readwrite)")
        profiles.append(ContextProfile(pattern=pattern, **vals))
    kw["contexts"] = tuple(profiles)
    return Config(path=path, problems=tuple(r.problems), lines=r.lines, **kw)


# Textual key names: letters, digits, named keys, modifiers joined by "+".
_KEY_RX = re.compile(r"(?:(?:ctrl|shift|alt|meta|super|hyper)\+)*[A-Za-z0-9_]+|[^\sA-Za-z0-9,]")


# -- locating keys in the text --------------------------------------------------------------
_HEADER = re.compile(r"^\s*\[\[?\s*(.+?)\s*\]\]?\s*(?:#.*)?$")
_KEYLINE = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\"|'[^']*'))*)\s*=")


def _split_dotted(s: str) -> tuple[str, ...]:
    parts = re.findall(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|[A-Za-z0-9_-]+", s)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Line number (1-based) of every table header and `key =` line, by full key path.

    A line scanner, not a parser: it runs after tomllib accepted the text, only to point the user
    at the right line. Lines inside multi-line strings are skipped.
    """
    out: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_ml: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if in_ml:
            if line.count(in_ml) % 2 == 1:
                in_ml = None
            continue
        h = _HEADER.match(line)
        if h and not _KEYLINE.match(line):
            table = _split_dotted(h.group(1))
            out.setdefault(table, n)
            continue
        k = _KEYLINE.match(line)
        if k:
            path = table + _split_dotted(k.group(1))
            out.setdefault(path, n)
            for i in range(len(table) + 1, len(path)):
                out.setdefault(path[:i], n)  # dotted keys define their parent tables too
            rest = line[k.end():]
            for q in ('"""', "'''"):
                if rest.count(q) % 2 == 1:
                    in_ml = q
    return out


# -- writing (for `kvwatch config show`) ----------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    s = str(v).replace("\\", "\\\\").replace('"', '\\"')
    s = re.sub(r"[\x00-\x1f\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", s)
    return f'"{s}"'


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)


def dump_config(cfg: Config, binding_ids: Mapping[str, str] | None = None) -> str:
    """The effective settings as TOML (every value, defaults included)."""
    out = [f"{k} = {_toml_value(getattr(cfg, k))}" for k in _SCALARS if getattr(cfg, k) is not None]
    out.append("\n[kubernetes]")
    out += [f"{k} = {_toml_value(getattr(cfg, k))}" for k in _KUBE if getattr(cfg, k) is not None]
    out.append("\n[thresholds]")
    out += [f"{f.name} = {_toml_value(getattr(cfg.thresholds, f.name))}" for f in fields(Thresholds)]
    out.append("\n[windows]")
    out += [f"{f.name} = {_toml_value(getattr(cfg.windows, f.name))}" for f in fields(Windows)]
    out.append("\n[keys]")
    for bid, default in sorted((binding_ids or {}).items()):
        out.append(f"{_toml_key(bid)} = {_toml_value(cfg.keys.get(bid, default))}")
    for bid in sorted(set(cfg.keys) - set(binding_ids or {})):
        out.append(f"{_toml_key(bid)} = {_toml_value(cfg.keys[bid])}")
    for p in cfg.contexts:
        out.append(f"\n[contexts.{_toml_value(p.pattern)}]")
        if p.theme:
            out.append(f"theme = {_toml_value(p.theme)}")
        out.append(f"readonly = {_toml_value(p.readonly)}")
        out.append(f"production = {_toml_value(p.production)}")
    return "\n".join(out) + "\n"


# -- command-line defaults ------------------------------------------------------------------
class DefaultFloat(float):
    """An argparse default for a flag the config file may set: the user did not give the flag."""


class DefaultStr(str):
    """As DefaultFloat, for strings."""


def is_default(value: Any) -> bool:
    return value is None or isinstance(value, (DefaultFloat, DefaultStr))

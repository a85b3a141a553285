"""vLLM engine args as written in a Kubernetes container spec: read, validate, rewrite.

A container can start vLLM in many ways (`vllm serve MODEL --flag v`, `--flag=v`, `python -m
vllm.entrypoints.openai.api_server --model M`, a `sh -c "..."` script, flags only with the image's
entrypoint, `$(VAR)` / `${VAR}` references to the container env). kvwatch reads the KV-relevant
flags from whichever form is used and rewrites them *in that same form*, so the change shown to
the SRE is the smallest exact diff: one token, or one env value, and nothing else moves.

Defaults are those of `shared/reference/engine-args.md`; where a default depends on the engine
generation (V0/V1) or on the GPU, the note on the value says so.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..engines import vllm as VLLM_MOD
from ..engines.base import ArgSpec

GiB = 1024**3

# --------------------------------------------------------------------------------------------
# The flags kvwatch knows


# The flags, defaults and command forms are vLLM's own, from its engine module.
SPECS = VLLM_MOD.SPECS
KV_CACHE_DTYPES = VLLM_MOD.KV_CACHE_DTYPES
EDITABLE = VLLM_MOD.EDITABLE
KV_ARGS = VLLM_MOD.KV_ARGS
_BOOLEAN_FLAGS = VLLM_MOD.BOOLEAN_FLAGS
_SHORT_ALIASES = VLLM_MOD.SHORT_ALIASES
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh"})
_MODULES = VLLM_MOD.MODULES
_STRONG_FLAGS = VLLM_MOD.STRONG_FLAGS


class ArgError(ValueError):
    """A value the SRE typed that vLLM would reject (or kvwatch cannot write)."""


def canonical(flag: str) -> str:
    """`--max_num_seqs` -> `max-num-seqs`; `-tp` -> `tensor-parallel-size`."""
    name = flag.lstrip("-")
    if flag.startswith("-") and not flag.startswith("--") and name in _SHORT_ALIASES:
        return _SHORT_ALIASES[name]
    return name.replace("_", "-")


def default_for(name: str, generation: str = "v1") -> Any:
    spec = SPECS[name]
    return spec.default_v0 if generation == "v0" else spec.default_v1


# --------------------------------------------------------------------------------------------
# Value coercion and validation


def _human_int(text: str) -> int:
    """vLLM's human-readable ints: 32k = 32000, 32K = 32768 (also m/M, g/G)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*", text)
    if not m:
        raise ArgError(f"{text!r} is not a whole number (32768, 32k or 32K)")
    num, suffix = m.groups()
    mult = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    val = float(num) * mult
    if val != int(val):
        raise ArgError(f"{text!r} is not a whole number of tokens")
    return int(val)


def coerce(name: str, raw: Any) -> Any:
    """Turn a typed or textual value into the flag's type; ArgError with a clear message if not."""
    spec = SPECS.get(name)
    if spec is None:
        raise ArgError(f"kvwatch does not edit --{name}")
    if isinstance(raw, str):
        raw = raw.strip()
        if raw == "":
            raise ArgError(f"--{name}: empty value")
    try:
        if spec.kind == "bool":
            if isinstance(raw, bool):
                return raw
            word = str(raw).lower()
            if word not in _BOOL_WORDS:
                raise ArgError(f"--{name}: {raw!r} is not true or false")
            return _BOOL_WORDS[word]
        if spec.kind in ("int", "tokens"):
            if isinstance(raw, bool):
                raise ArgError(f"--{name}: expected a whole number, got {raw!r}")
            if isinstance(raw, int):
                return raw
            if isinstance(raw, float):
                if raw != int(raw):
                    raise ArgError(f"--{name}: {raw} is not a whole number")
                return int(raw)
            if spec.kind == "tokens":
                return _human_int(str(raw))
            if not re.fullmatch(r"[+-]?\d+", str(raw)):
                raise ArgError(f"--{name}: {raw!r} is not a whole number")
            return int(raw)
        if spec.kind == "float":
            if isinstance(raw, bool):
                raise ArgError(f"--{name}: expected a number, got {raw!r}")
            val = float(raw)
            if math.isnan(val) or math.isinf(val):
                raise ArgError(f"--{name}: {raw!r} is not a finite number")
            return val
        if spec.kind == "choice":
            if str(raw) not in spec.choices:
                raise ArgError(f"--{name}: {raw!r} is not one of {', '.join(spec.choices)}")
            return str(raw)
        return str(raw)
    except ArgError:
        raise
    except (TypeError, ValueError):
        raise ArgError(f"--{name}: {raw!r} is not a number") from None


def check_range(name: str, value: Any) -> None:
    """Single-value range rules (vLLM's own field constraints)."""
    if name == "gpu-memory-utilization" and not 0 < value <= 1:
        raise ArgError(f"--gpu-memory-utilization must be > 0 and <= 1 (got {value:g})")
    if name in ("max-num-seqs", "max-num-batched-tokens", "max-model-len", "tensor-parallel-size") and value < 1:
        raise ArgError(f"--{name} must be >= 1 (got {value})")
    if name == "block-size" and value < 1:
        raise ArgError(f"--block-size must be >= 1 (got {value})")
    if name == "swap-space" and value < 0:
        raise ArgError(f"--swap-space must be >= 0 GiB (got {value:g})")


# --------------------------------------------------------------------------------------------
# Tokens with their place in the container spec


@dataclass(frozen=True, slots=True)
class _Tok:
    value: str  # after shell unquoting
    field: str  # "command" | "args"
    index: int  # element of that list
    start: int = -1  # span inside a shell script element; -1 = the whole element
    end: int = -1
    single_quoted: bool = False  # a shell would not expand $VAR inside

    @property
    def in_script(self) -> bool:
        return self.start >= 0


def _shell_split(script: str) -> list[tuple[str, int, int, bool] | None]:
    """Split a POSIX shell script into words with their spans; None marks a command separator.

    Enough of sh for container scripts: quotes, backslashes, line continuations, comments,
    `$(...)` / `${...}` kept inside words, and ; && || | & newlines ( ) as separators.
    """
    out: list[tuple[str, int, int, bool] | None] = []
    i, n = 0, len(script)
    word: list[str] = []
    start = -1
    single = False

    def flush(end: int) -> None:
        nonlocal word, start, single
        if start >= 0:
            out.append(("".join(word), start, end, single))
        word, start, single = [], -1, False

    while i < n:
        c = script[i]
        if c == "\\" and i + 1 < n and script[i + 1] == "\n":
            i += 2  # line continuation
            continue
        if c in " \t\r":
            flush(i)
            i += 1
            continue
        if c == "\n" or c in ";&|()":
            flush(i)
            if not out or out[-1] is not None:
                out.append(None)
            i += 1
            continue
        if c == "#" and start < 0:
            while i < n and script[i] != "\n":
                i += 1
            continue
        if start < 0:
            start = i
        if c == "'":
            j = script.find("'", i + 1)
            if j < 0:
                raise ArgError("unterminated ' in the shell script")
            word.append(script[i + 1 : j])
            single = True
            i = j + 1
        elif c == '"':
            i += 1
            while i < n and script[i] != '"':
                if script[i] == "\\" and i + 1 < n and script[i + 1] in '"\\$`\n':
                    if script[i + 1] != "\n":
                        word.append(script[i + 1])
                    i += 2
                    continue
                word.append(script[i])
                i += 1
            if i >= n:
                raise ArgError('unterminated " in the shell script')
            i += 1
        elif c == "\\" and i + 1 < n:
            word.append(script[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and script[i + 1] in "({":
            close = ")" if script[i + 1] == "(" else "}"
            j = script.find(close, i + 2)
            if j < 0:
                raise ArgError(f"unterminated ${script[i + 1]} in the shell script")
            word.append(script[i : j + 1])
            i = j + 1
        else:
            word.append(c)
            i += 1
    flush(n)
    return out


# --------------------------------------------------------------------------------------------
# Parsing


@dataclass(frozen=True, slots=True)
class ArgValue:
    """One KV-relevant flag: what the container runs with, and where that comes from."""

    name: str
    value: Any  # typed effective value; None = unknown (e.g. max-model-len from the model config)
    source: str  # "flag", "env" (through $(VAR) / ${VAR}), "default"
    text: str | None = None  # as written in the spec, e.g. "$(MAX_SEQS)" or "256"
    env_var: str | None = None
    note: str = ""  # for defaults: which default and when it differs

    @property
    def is_default(self) -> bool:
        return self.source == "default"

    def display(self) -> str:
        if self.value is None:
            return "(model default)" if self.name == "max-model-len" else "?"
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, float):
            return f"{self.value:g}"
        return str(self.value)


@dataclass(frozen=True, slots=True)
class _Occurrence:
    name: str
    flag_tok: _Tok  # the flag itself ("--max-num-seqs", "--max_num_seqs=8", "--no-enable-x")
    value_tok: _Tok | None  # separate value token, if any
    inline: str | None  # value after "=", if any
    negated: bool = False  # --no-X


@dataclass(frozen=True)
class VllmCommand:
    """The vLLM invocation found in one container."""

    container: str
    form: str  # "vllm serve", "python -m", "shell", "image entrypoint", "wrapper", "not vllm"
    values: Mapping[str, ArgValue]
    generation: str = "v1"
    warnings: tuple[str, ...] = ()
    _occ: Mapping[str, _Occurrence] = field(default_factory=dict, repr=False)
    _end: _Tok | None = field(default=None, repr=False)  # last token of the invocation
    _style_eq: bool = field(default=False, repr=False)  # existing flags use --flag=value
    _style_us: bool = field(default=False, repr=False)  # existing flags use underscores

    @property
    def is_vllm(self) -> bool:
        return self.form != "not vllm"

    @property
    def model(self) -> str | None:
        v = self.values.get("model")
        return v.value if v else None

    def value(self, name: str) -> Any:
        v = self.values.get(name)
        return v.value if v else None

    def kv_args(self) -> list[ArgValue]:
        return [self.values[n] for n in KV_ARGS if n in self.values]


def _env_map(container: Mapping[str, Any]) -> dict[str, dict]:
    return {e.get("name"): e for e in container.get("env") or () if isinstance(e, Mapping) and e.get("name")}


_K8S_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SH_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _env_ref(text: str, tok: _Tok | None) -> tuple[str, str | None] | None:
    """The env var a whole value refers to: ("NAME", shell default or None); None if literal."""
    m = _K8S_REF.fullmatch(text)
    if m:
        return m.group(1), None
    if tok is not None and tok.in_script and not tok.single_quoted:
        m = _SH_REF.fullmatch(text)
        if m:
            return (m.group(1) or m.group(3)), m.group(2)
    return None


def _resolve(text: str, tok: _Tok | None, env: Mapping[str, dict]) -> tuple[str | None, str | None, str]:
    """(resolved text or None, env var name or None, note)."""
    ref = _env_ref(text, tok)
    if ref is None:
        # $$(X) is Kubernetes' escape for a literal $(X)
        return text.replace("$$(", "$("), None, ""
    name, shell_default = ref
    entry = env.get(name)
    if entry is not None and "value" in entry:
        return str(entry.get("value") or ""), name, ""
    if entry is not None and entry.get("valueFrom"):
        src = entry["valueFrom"]
        where = next(iter(src), "valueFrom")
        return None, name, f"from ${name} ({where}), not readable here"
    if shell_default is not None:
        return shell_default, name, f"${name} unset, shell default used"
    return None, name, f"${name} is not set in the container env"


def _tokens(container: Mapping[str, Any]) -> tuple[list[_Tok], bool]:
    """All argv tokens of the container (command then args), expanding a `sh -c` script."""
    command = list(container.get("command") or ())
    args = list(container.get("args") or ())
    argv = [("command", i, str(v)) for i, v in enumerate(command)] + [("args", i, str(v)) for i, v in enumerate(args)]
    for pos, (fld, idx, val) in enumerate(argv):
        base = val.rsplit("/", 1)[-1]
        if base in _SHELLS:
            # sh [-e ...] -c SCRIPT: the script is the element after the option cluster with "c"
            j = pos + 1
            while j < len(argv) and argv[j][2].startswith("-") and "c" not in argv[j][2]:
                j += 1
            if j + 1 < len(argv) and argv[j][2].startswith("-") and "c" in argv[j][2]:
                sfld, sidx, script = argv[j + 1]
                toks: list[_Tok] = []
                for w in _shell_split(script):
                    if w is None:
                        toks.append(_Tok(";", sfld, sidx, -2, -2))  # separator marker
                    else:
                        toks.append(_Tok(w[0], sfld, sidx, w[1], w[2], w[3]))
                return toks, True
        break
    return [_Tok(v, f, i) for f, i, v in argv], False


def _find_invocation(toks: list[_Tok]) -> tuple[int, str] | None:
    """Index of the first token after `vllm serve` / `-m vllm....`, and the form found."""
    best: tuple[int, str] | None = None
    for i, t in enumerate(toks):
        base = t.value.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(toks) and toks[i + 1].value == "serve":
            best = (i + 2, "vllm serve")
        elif t.value == "-m" and i + 1 < len(toks) and toks[i + 1].value in _MODULES:
            if toks[i + 1].value == "vllm.entrypoints.cli.main" and i + 2 < len(toks) and toks[i + 2].value == "serve":
                best = (i + 3, "python -m")
            else:
                best = (i + 2, "python -m")
    return best


def is_vllm_container(container: Mapping[str, Any]) -> bool:
    """Auto-detection: does this container run a vLLM server (by command, args or image)?"""
    try:
        return parse_container(container).is_vllm
    except ArgError:
        return False


def parse_container(container: Mapping[str, Any], generation: str = "v1") -> VllmCommand:
    """Read the KV-relevant flags of one container (a pod-spec container as a dict).

    Raises ArgError only for a script kvwatch cannot tokenise; an unrecognised command gives
    form "not vllm" with defaults.
    """
    name = str(container.get("name") or "")
    env = _env_map(container)
    toks, shell = _tokens(container)
    warnings: list[str] = []

    inv = _find_invocation([t for t in toks])
    if inv is not None:
        start, form = inv
        if shell:
            form = "shell"
    else:
        image = str(container.get("image") or "")
        has_cmd = bool(container.get("command"))
        flags = {canonical(t.value.split("=", 1)[0]) for t in toks if t.value.startswith("-")}
        if not has_cmd and not shell and ("vllm" in image.lower() or flags & _STRONG_FLAGS):
            start, form = 0, "image entrypoint"  # vllm/vllm-openai: ENTRYPOINT is the API server
        elif flags & _STRONG_FLAGS and toks:
            first_flag = next(i for i, t in enumerate(toks) if t.value.startswith("-"))
            start, form = first_flag, "wrapper"
            warnings.append("vLLM is started through a wrapper; flags are read where they appear")
        else:
            values = {n: ArgValue(n, default_for(n, generation), "default", note=SPECS[n].note) for n in SPECS}
            return VllmCommand(name, "not vllm", values, generation, ("no vLLM server found in this container",))

    # The invocation runs until the next shell separator.
    end = len(toks)
    for i in range(start, len(toks)):
        if toks[i].start == -2:
            end = i
            break
    body = toks[start:end]
    last = toks[end - 1] if end > start else (toks[start - 1] if start > 0 else None)

    occ: dict[str, _Occurrence] = {}
    raw_values: dict[str, tuple[str, _Tok | None]] = {}
    n_eq = n_us = nflags = 0
    i = 0
    # A positional model right after `vllm serve`.
    if form in ("vllm serve", "shell", "image entrypoint") and body and not body[0].value.startswith("-"):
        raw_values["model"] = (body[0].value, body[0])
        i = 1
    while i < len(body):
        t = body[i]
        v = t.value
        if not v.startswith("-") or v == "-" or v == "--":
            i += 1
            continue
        nflags += 1
        flag, eq, inline = v.partition("=")
        n_eq += bool(eq)
        n_us += "_" in flag.lstrip("-")
        cname = canonical(flag)
        negated = False
        if cname.startswith("no-") and SPECS.get(cname[3:], None) is not None and SPECS[cname[3:]].kind == "bool":
            cname, negated = cname[3:], True
        if cname == "config":
            warnings.append("--config file: values set there are not visible to kvwatch")
        spec = SPECS.get(cname)
        value_tok: _Tok | None = None
        if not eq:
            nxt = body[i + 1] if i + 1 < len(body) else None
            takes_value = nxt is not None and not nxt.value.startswith("-")
            if spec is not None and spec.kind == "bool":
                takes_value = takes_value and nxt is not None and nxt.value.lower() in _BOOL_WORDS and not negated
            elif cname in _BOOLEAN_FLAGS or cname.startswith("no-") or cname.startswith("disable-"):
                takes_value = False
            if takes_value:
                value_tok = nxt
                i += 1
        i += 1
        if spec is None:
            continue
        o = _Occurrence(cname, t, value_tok, inline if eq else None, negated)
        occ[cname] = o  # argparse: the last occurrence wins
        if spec.kind == "bool":
            text = inline if eq else (value_tok.value if value_tok else None)
            raw_values[cname] = ("false" if negated else (text if text is not None else "true"), value_tok or t)
        elif eq:
            raw_values[cname] = (inline, t)
        elif value_tok is not None:
            raw_values[cname] = (value_tok.value, value_tok)
        else:
            warnings.append(f"--{cname} has no value")

    values: dict[str, ArgValue] = {}
    for n, spec in SPECS.items():
        if n not in raw_values:
            values[n] = ArgValue(n, default_for(n, generation), "default", note=spec.note)
            continue
        text, tok = raw_values[n]
        resolved, env_var, note = _resolve(text, tok, env)
        if resolved is None:
            values[n] = ArgValue(n, None, "env" if env_var else "flag", text, env_var, note)
            warnings.append(f"--{n}: {note}")
            continue
        try:
            val = coerce(n, resolved) if n != "model" else resolved
        except ArgError as e:
            values[n] = ArgValue(n, None, "env" if env_var else "flag", text, env_var, str(e))
            warnings.append(str(e))
            continue
        values[n] = ArgValue(n, val, "env" if env_var else "flag", text, env_var, note)
    if generation == "v1" and values["swap-space"].source != "default":
        warnings.append("--swap-space is ignored by the V1 engine")
    return VllmCommand(
        name,
        form,
        values,
        generation,
        tuple(warnings),
        occ,
        last,
        n_eq * 2 > nflags,  # new flags follow the style most existing ones use
        n_us * 2 > nflags,
    )


def find_vllm_container(containers: Iterable[Mapping[str, Any]], name: str | None = None) -> tuple[int, Mapping[str, Any]] | None:
    """The container running vLLM (or the named one): (index, container)."""
    items = list(containers)
    if name is not None:
        for i, c in enumerate(items):
            if c.get("name") == name:
                return i, c
        return None
    for i, c in enumerate(items):
        if is_vllm_container(c):
            return i, c
    return None


# --------------------------------------------------------------------------------------------
# Validation of a change set


@dataclass(frozen=True)
class Validation:
    changes: Mapping[str, Any]  # typed values that differ from the current effective ones
    errors: Mapping[str, str]  # flag -> message
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


def effective(cmd: VllmCommand, changes: Mapping[str, Any], name: str, observed: Mapping[str, Any] | None = None) -> Any:
    """Value after the change: the new one, else what the engine reports, else the parsed one."""
    if name in changes:
        return changes[name]
    if observed and observed.get(name) is not None and cmd.values[name].is_default:
        return observed[name]
    return cmd.value(name)


def validate(
    cmd: VllmCommand, raw_changes: Mapping[str, Any], observed: Mapping[str, Any] | None = None
) -> Validation:
    """Coerce and check a change set against vLLM's rules (single values and their relations)."""
    errors: dict[str, str] = {}
    warnings: list[str] = []
    typed: dict[str, Any] = {}
    for name, raw in raw_changes.items():
        if name not in SPECS:
            errors[name] = f"kvwatch does not edit --{name}"
            continue
        if not SPECS[name].editable:
            errors[name] = f"--{name} is shown, not edited, by kvwatch"
            continue
        try:
            val = coerce(name, raw)
            check_range(name, val)
        except ArgError as e:
            errors[name] = str(e)
            continue
        typed[name] = val
    eff = {n: effective(cmd, typed, n, observed) for n in SPECS}
    seqs, batched, mml = eff["max-num-seqs"], eff["max-num-batched-tokens"], eff["max-model-len"]
    if "max-num-seqs" not in errors and "max-num-batched-tokens" not in errors:
        if isinstance(seqs, int) and isinstance(batched, int) and batched < seqs:
            key = "max-num-batched-tokens" if "max-num-batched-tokens" in typed else "max-num-seqs"
            errors[key] = f"--max-num-batched-tokens ({batched}) must be >= --max-num-seqs ({seqs})"
    if eff["enable-chunked-prefill"] is False and isinstance(batched, int) and isinstance(mml, int) and batched < mml:
        key = "max-num-batched-tokens" if "max-num-batched-tokens" in typed else "max-model-len"
        errors.setdefault(
            key,
            f"without chunked prefill --max-num-batched-tokens ({batched}) must be >= --max-model-len ({mml})",
        )
    gmu = typed.get("gpu-memory-utilization")
    if gmu is not None and gmu > 0.95:
        warnings.append(f"--gpu-memory-utilization {gmu:g} leaves little room for activations (CUDA OOM risk)")
    bs = typed.get("block-size")
    if bs is not None and bs not in (8, 16, 32, 64, 128):
        warnings.append(f"--block-size {bs} is unusual; most attention backends want 16, 32 or 64")
    if "swap-space" in typed and cmd.generation != "v0":
        warnings.append("--swap-space is ignored by the V1 engine")
    if "block-size" in typed or "kv-cache-dtype" in typed:
        warnings.append("block size / KV dtype changes resize the KV pool: check the preflight")
    changes = {n: v for n, v in typed.items() if v != eff_before(cmd, n, observed)}
    return Validation(changes, errors, tuple(warnings))


def eff_before(cmd: VllmCommand, name: str, observed: Mapping[str, Any] | None = None) -> Any:
    return effective(cmd, {}, name, observed)


# --------------------------------------------------------------------------------------------
# Incident presets (runbook: emergency-mitigation.md steps 2-4)

PRESETS: dict[str, str] = {
    "seqs-25": "cut --max-num-seqs by 25%",
    "seqs-50": "cut --max-num-seqs by 50%",
    "gmu-0.7": "--gpu-memory-utilization 0.7",
    "gmu-0.6": "--gpu-memory-utilization 0.6",
    "batched-50": "halve --max-num-batched-tokens",
}


def preset(cmd: VllmCommand, key: str, observed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The change set of one incident preset, from the values the replica runs with now.

    `observed` (e.g. max-num-seqs from the engine's config metrics) beats the documented default
    when the flag is absent, since defaults depend on the GPU.
    """
    if key not in PRESETS:
        raise ArgError(f"unknown preset {key!r}; known: {', '.join(PRESETS)}")
    seqs = eff_before(cmd, "max-num-seqs", observed)
    if key in ("seqs-25", "seqs-50"):
        if not isinstance(seqs, int):
            raise ArgError("current --max-num-seqs is unknown; type a value instead")
        factor = 0.75 if key == "seqs-25" else 0.5
        return {"max-num-seqs": max(1, int(seqs * factor))}
    if key in ("gmu-0.7", "gmu-0.6"):
        return {"gpu-memory-utilization": float(key.split("-")[1])}
    batched = eff_before(cmd, "max-num-batched-tokens", observed)
    if not isinstance(batched, int):
        raise ArgError("current --max-num-batched-tokens is unknown; type a value instead")
    floor = seqs if isinstance(seqs, int) else 1
    mml = eff_before(cmd, "max-model-len", observed)
    if eff_before(cmd, "enable-chunked-prefill", observed) is False and isinstance(mml, int):
        floor = max(floor, mml)
    return {"max-num-batched-tokens": max(floor, batched // 2)}


# --------------------------------------------------------------------------------------------
# Rewriting, preserving the original form


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if value != int(value) else f"{value:.1f}"
    return str(value)


def _sh_word(text: str) -> str:
    if re.fullmatch(r"[\w@%+=:,./-]+", text):
        return text
    return shlex.quote(text)


@dataclass(frozen=True)
class Rewrite:
    container: Mapping[str, Any]  # the new container
    fields: tuple[str, ...]  # which of command / args / env changed
    notes: tuple[str, ...] = ()


def rewrite_container(container: Mapping[str, Any], cmd: VllmCommand, changes: Mapping[str, Any]) -> Rewrite:
    """Apply typed `changes` to a copy of the container, editing each value where it is written.

    - `--flag v` / `--flag=v` / `--max_num_seqs v`: the value token is replaced, spelling kept.
    - `$(VAR)` / `${VAR}` with a literal env value: the env value is changed, not the args.
    - booleans: `--X` <-> `--no-X` (or a `true`/`false` value where one was written).
    - absent flags are appended at the end of the invocation, in the style of the others.
    """
    if not cmd.is_vllm:
        raise ArgError("no vLLM server found in this container; nothing to edit")
    new = copy.deepcopy(dict(container))
    lists = {"command": list(new.get("command") or []), "args": list(new.get("args") or [])}
    env_list = [dict(e) for e in new.get("env") or []]
    env_idx = {e.get("name"): i for i, e in enumerate(env_list)}
    # (field, index) -> list of (start, end, replacement) for script elements; whole-element sets
    script_edits: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    appends: list[tuple[str, ...]] = []  # flag tokens to add at the end of the invocation
    notes: list[str] = []
    changed: set[str] = set()

    def set_tok(tok: _Tok, text: str) -> None:
        if tok.in_script:
            script_edits.setdefault((tok.field, tok.index), []).append((tok.start, tok.end, _sh_word(text)))
        else:
            lists[tok.field][tok.index] = text
        changed.add(tok.field)

    def flag_text(name: str) -> str:
        return "--" + (name.replace("-", "_") if cmd._style_us else name)

    for name in (n for n in SPECS if n in changes):
        val = changes[name]
        spec = SPECS[name]
        o = cmd._occ.get(name)
        av = cmd.values[name]
        text = format_value(val)
        if o is None:
            if spec.kind == "bool":
                if cmd.generation == "v0" and val is False:
                    continue  # V0 has no --no-X; absent already means off there
                appends.append((flag_text(name if val else "no-" + name),))
            elif cmd._style_eq:
                appends.append((f"{flag_text(name)}={text}",))
            else:
                appends.append((flag_text(name), text))
            continue
        if spec.kind == "bool" and o.inline is None and o.value_tok is None:
            # --X / --no-X: flip the flag itself, keeping its spelling
            raw = o.flag_tok.value
            stem = raw.lstrip("-")
            sep = "_" if "_" in stem else "-"
            base = stem[3:] if o.negated else stem
            set_tok(o.flag_tok, ("--" if val else f"--no{sep}") + base)
            continue
        if av.env_var is not None:
            e_i = env_idx.get(av.env_var)
            if e_i is not None and "value" in env_list[e_i]:
                env_list[e_i]["value"] = text
                changed.add("env")
                continue
            notes.append(f"--{name} was ${av.env_var} ({av.note or 'not a literal env value'}); written as a literal")
        if o.inline is not None:
            flag = o.flag_tok.value.partition("=")[0]
            set_tok(o.flag_tok, f"{flag}={text}")
        elif o.value_tok is not None:
            set_tok(o.value_tok, text)

    # Splice script edits (right to left so spans stay valid) and appended flags.
    end = cmd._end
    if appends:
        if end is None:
            lists["args"].extend(t for group in appends for t in group)
            changed.add("args")
        elif end.in_script:
            words = " ".join(_sh_word(t) for group in appends for t in group)
            script_edits.setdefault((end.field, end.index), []).append((end.end, end.end, " " + words))
            changed.add(end.field)
        else:
            target = (end.field, end.index + 1)
            lists[target[0]][target[1] : target[1]] = [t for group in appends for t in group]
            changed.add(end.field)
    for (fld, idx), edits in script_edits.items():
        script = lists[fld][idx]
        for s, e, rep in sorted(edits, key=lambda x: x[0], reverse=True):
            script = script[:s] + rep + script[e:]
        lists[fld][idx] = script
    for fld in ("command", "args"):
        if fld in changed:
            new[fld] = lists[fld]
    if "env" in changed:
        new["env"] = env_list
    return Rewrite(new, tuple(f for f in ("command", "args", "env") if f in changed), tuple(notes))


# --------------------------------------------------------------------------------------------
# Diff for the confirm dialog


def _render(container: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    lines: list[str] = []
    for fld in fields:
        vals = container.get(fld)
        if not vals:
            continue
        lines.append(f"{fld}:")
        for v in vals:
            if fld == "env":
                if "value" in v:
                    lines.append(f"- {v.get('name')}={v.get('value')}")
                else:
                    lines.append(f"- {v.get('name')} (from {next(iter(v.get('valueFrom') or {'?': 0}))})")
                continue
            s = str(v)
            if "\n" in s or len(s) > 60 and " --" in s:
                # scripts: one flag per line so a one-token change is one changed line
                lines.append("- |")
                for ln in s.split("\n"):
                    parts = re.split(r" (?=--)", ln)
                    lines.extend("    " + p for p in parts)
            else:
                lines.append(f"- {s}")
    return lines


def args_diff(old: Mapping[str, Any], new: Mapping[str, Any], label: str = "container") -> str:
    """Unified diff of the container's command, args and env (what the confirm dialog shows)."""
    fields = ("command", "args", "env")
    diff = difflib.unified_diff(
        _render(old, fields), _render(new, fields), f"a/{label}", f"b/{label}", n=2, lineterm=""
    )
    return "\n".join(diff)


# --------------------------------------------------------------------------------------------
# KV preflight: will the replica still start with the new values?

def _dtype_bytes(dtype: str | None) -> float:
    """KV bytes per element; the model dtype is unknown here, so "auto" (or an unknown name) is 2."""
    try:
        return VLLM_MOD.ENGINE.cache_dtype_bytes(dtype, 2.0)
    except ValueError:
        return 2.0


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype_bytes: float = 2.0) -> float:
    """Full-attention KV bytes per token over the whole model (K and V): engine-args.md §3.1."""
    return float(VLLM_MOD.ENGINE.kv_bytes_per_token(num_layers, num_kv_heads, head_dim, "auto", 1, dtype_bytes))


@dataclass(frozen=True)
class Preflight:
    status: str  # "ok", "warn", "fail" (vLLM would crash-loop), "unknown" (not enough data)
    messages: tuple[str, ...]
    capacity_tokens_now: int | None = None
    capacity_tokens_new: int | None = None

    @property
    def blocks(self) -> bool:
        return self.status == "fail"


def _num(cfg: Mapping[str, Any], key: str) -> float | None:
    try:
        v = cfg.get(key)
        return float(v) if v not in (None, "", "None") else None
    except (TypeError, ValueError):
        return None


def kv_preflight(
    cmd: VllmCommand,
    changes: Mapping[str, Any],
    cache_config: Mapping[str, Any] | None = None,
    gpu_total_bytes: float | None = None,
    kv_bytes_token: float | None = None,
) -> Preflight:
    """Estimate the KV pool after the change and whether one max-model-len sequence still fits.

    vLLM refuses to start when one full-length sequence needs more KV than the pool holds
    ("KV cache needed > available"), and Kubernetes then restarts it forever. Capacity comes from
    `vllm:cache_config_info` (kv_cache_size_tokens, or num_gpu_blocks x block_size); a change of
    gpu-memory-utilization moves (old - new) x GPU memory out of the pool, converted to tokens
    with the model's KV bytes per token (per GPU: divided by the tensor-parallel size).
    """
    cfg = dict(cache_config or {})
    msgs: list[str] = []
    cap = _num(cfg, "kv_cache_size_tokens")
    if cap is None:
        blocks, bsize = _num(cfg, "num_gpu_blocks"), _num(cfg, "block_size")
        if blocks is not None and bsize is not None:
            cap = blocks * bsize
    u_now = _num(cfg, "gpu_memory_utilization")
    if u_now is None:
        u_now = eff_before(cmd, "gpu-memory-utilization")
    u_new = changes.get("gpu-memory-utilization", u_now)
    tp = max(1, int(eff_before(cmd, "tensor-parallel-size") or 1))
    mml_new = changes.get("max-model-len", cmd.value("max-model-len"))
    if cap is None:
        return Preflight("unknown", ("KV capacity not exposed by the engine (no vllm:cache_config_info); fit not checked",))
    cap_new = float(cap)
    bpt_gpu = kv_bytes_token / tp if kv_bytes_token else None
    if u_new != u_now:
        if gpu_total_bytes and bpt_gpu:
            delta = (u_now - u_new) * gpu_total_bytes
            cap_new -= delta / bpt_gpu
            verb = "frees" if delta < 0 else "takes"
            msgs.append(
                f"gpu-memory-utilization {u_now:g} -> {u_new:g} {verb} {abs(delta) / GiB:.1f} GiB per GPU "
                f"{'into' if delta < 0 else 'out of'} the KV pool"
            )
        elif gpu_total_bytes:
            msgs.append(
                f"gpu-memory-utilization {u_now:g} -> {u_new:g} moves {abs(u_now - u_new) * gpu_total_bytes / GiB:.1f} GiB "
                "per GPU; the model's KV bytes/token is unknown, so the fit is not checked"
            )
            return Preflight("unknown", tuple(msgs), int(cap), None)
        else:
            msgs.append("GPU memory size unknown: the effect of gpu-memory-utilization is not checked")
            return Preflight("unknown", tuple(msgs), int(cap), None)
    d_old = _dtype_bytes(cfg.get("cache_dtype") or eff_before(cmd, "kv-cache-dtype"))
    d_new = _dtype_bytes(changes.get("kv-cache-dtype", cfg.get("cache_dtype") or eff_before(cmd, "kv-cache-dtype")))
    if d_new != d_old:
        cap_new *= d_old / d_new
        msgs.append(f"KV dtype change scales the pool by {d_old / d_new:g}x in tokens")
    status = "ok"
    if cap_new <= 0:
        status = "fail"
        msgs.append("no GPU memory left for the KV cache: vLLM would fail to start and crash-loop")
    elif isinstance(mml_new, int):
        if cap_new < mml_new:
            status = "fail"
            need = f" ({mml_new * bpt_gpu / GiB:.2f} GiB)" if bpt_gpu else ""
            have = f" ({cap_new * bpt_gpu / GiB:.2f} GiB)" if bpt_gpu else ""
            msgs.append(
                f"one {mml_new}-token sequence needs {mml_new} KV tokens{need} but only {int(cap_new)}{have} "
                "would be available: vLLM refuses to start (KV cache needed > available) and the pod crash-loops; "
                "lower --max-model-len or raise --gpu-memory-utilization"
            )
        else:
            conc = cap_new / mml_new
            msgs.append(f"KV pool ~{int(cap_new)} tokens: {conc:.1f} full-length ({mml_new}) sequences at once")
            if conc < 1.5:
                status = "warn"
                msgs.append("less than 2 full-length sequences fit: long prompts will preempt each other")
    else:
        msgs.append(f"KV pool ~{int(cap_new)} tokens; max-model-len comes from the model config, fit not checked")
    seqs = changes.get("max-num-seqs")
    if seqs and cap_new > 0 and cap_new / seqs < 16:
        status = "warn" if status == "ok" else status
        msgs.append(f"{seqs} sequences share ~{int(cap_new)} KV tokens ({cap_new / seqs:.0f} each): expect preemptions")
    return Preflight(status, tuple(msgs), int(cap), int(cap_new))


def previous_args_annotation(container: Mapping[str, Any]) -> str:
    """What kvwatch records before an edit, so a later roll back can restore it exactly."""
    keep = {k: container.get(k) for k in ("name", "command", "args", "env") if container.get(k) is not None}
    return json.dumps(keep, separators=(",", ":"), sort_keys=True)


def observed_from_cache_config(cache_config: Mapping[str, Any], max_num_seqs: float | None = None) -> dict[str, Any]:
    """What the running engine reports about its own settings (`vllm:cache_config_info` labels),
    as flag values; these beat documented defaults when a flag is absent from the spec."""
    out: dict[str, Any] = {}
    for label, name in (
        ("gpu_memory_utilization", "gpu-memory-utilization"),
        ("block_size", "block-size"),
        ("cache_dtype", "kv-cache-dtype"),
        ("enable_prefix_caching", "enable-prefix-caching"),
    ):
        raw = cache_config.get(label)
        if raw in (None, "", "None"):
            continue
        try:
            out[name] = coerce(name, raw)
        except ArgError:
            continue
    swap = _num(cache_config, "swap_space_bytes")
    if swap is not None:
        out["swap-space"] = swap / GiB
    if max_num_seqs:
        out["max-num-seqs"] = int(max_num_seqs)
    return out

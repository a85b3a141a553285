"""Reading the engine invocation in one container: which form starts the server, and the
typed value (with its source: flag, env, default) of every flag kvwatch knows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .tokens import _env_map, _resolve, _Tok, _tokens
from ... import engines as _engines
from ...engines.base import Engine
from .values import _BOOL_WORDS, ENGINE, ArgError, coerce


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
    engine: str = ENGINE.name  # which engine the container starts (engines registry name)

    @property
    def is_vllm(self) -> bool:
        """A supported inference server was found (vLLM or another engine: see `engine`)."""
        return self.form != "not vllm"

    @property
    def eng(self) -> Engine:
        return _engines.get(self.engine)

    @property
    def specs(self) -> Any:
        """The flags of this command's engine, by canonical name."""
        return self.eng.arg_specs

    @property
    def model(self) -> str | None:
        v = self.values.get("model") or self.values.get("model-path")
        return v.value if v else None

    def value(self, name: str) -> Any:
        v = self.values.get(name)
        return v.value if v else None

    def kv_args(self) -> list[ArgValue]:
        return [self.values[n] for n in self.eng.kv_args if n in self.values]


KSERVE_HF = "huggingfaceserver"


def _vllm_backend(toks: list[_Tok]) -> bool:
    """`--backend=vllm` / `--backend vllm` among KServe huggingfaceserver's flags."""
    # kserve python/huggingfaceserver/huggingfaceserver/__main__.py: --backend (Backend: auto, vllm, huggingface, triton;
    # vLLM's own flags come from maybe_add_vllm_cli_parser). "auto" picks vLLM only when the model is supported: unknown here
    vals = [t.value for t in toks]
    return "--backend=vllm" in vals or any(v == "--backend" and i + 1 < len(vals) and vals[i + 1] == "vllm" for i, v in enumerate(vals))


def _find_invocation(toks: list[_Tok], engine: Engine = ENGINE) -> tuple[int, str] | None:
    """Index of the first token after `vllm serve` / `-m vllm....` (the engine's own forms), and
    the form found."""
    best: tuple[int, str] | None = None
    for i, t in enumerate(toks):
        base = t.value.rsplit("/", 1)[-1]
        cmd = next((c for c in engine.commands
                    if base == c[0] and [x.value for x in toks[i + 1 : i + len(c)]] == list(c[1:])), None)
        if cmd is not None:
            best = (i + len(cmd), " ".join(cmd))
        elif (t.value == "-m" and i + 1 < len(toks) and toks[i + 1].value == KSERVE_HF and engine is ENGINE
              and _vllm_backend(toks[i + 2 :])):
            best = (i + 2, KSERVE_HF)  # KServe's huggingfaceserver runs vLLM's engine and forwards its flags
        elif t.value == "-m" and i + 1 < len(toks) and toks[i + 1].value in engine.modules:
            if toks[i + 1].value.endswith(".cli.main") and i + 2 < len(toks) and toks[i + 2].value == "serve":
                best = (i + 3, "python -m")
            else:
                best = (i + 2, "python -m")
    return best


def _engine_of(toks: list[_Tok], container: Mapping[str, Any], shell: bool) -> tuple[Engine, tuple[int, str] | None]:
    """Which engine the container starts: its command or module first, then its image, then
    flags only that engine takes (vLLM when nothing says)."""
    for eng in _engines.ENGINES:
        inv = _find_invocation(toks, eng)
        if inv is not None:
            return eng, inv
    image = str(container.get("image") or "").lower()
    for eng in _engines.ENGINES:
        if any(m in image for m in eng.images):
            return eng, None
    for eng in _engines.ENGINES:
        flags = {eng.canonical(t.value.split("=", 1)[0]) for t in toks if t.value.startswith("-")}
        if flags & eng.strong_flags:
            return eng, None
    return ENGINE, None


def is_vllm_container(container: Mapping[str, Any]) -> bool:
    """Auto-detection: does this container run an inference server kvwatch knows (vLLM,
    SGLang: by command, module, args or image)?"""
    try:
        return parse_container(container).is_vllm
    except ArgError:
        return False


def parse_container(container: Mapping[str, Any], generation: str = "v1", engine: Engine | None = None) -> VllmCommand:
    """Read the KV-relevant flags of one container (a pod-spec container as a dict), with the
    flags of the engine it starts (found from the container unless `engine` is given).

    Raises ArgError only for a script kvwatch cannot tokenise; an unrecognised command gives
    form "not vllm" with defaults.
    """
    name = str(container.get("name") or "")
    env = _env_map(container)
    toks, shell = _tokens(container)
    warnings: list[str] = []

    if engine is None:
        engine, inv = _engine_of(toks, container, shell)
    else:
        inv = _find_invocation(toks, engine)
    SPECS = engine.arg_specs
    canonical = engine.canonical
    if engine is not ENGINE and generation in ("v1", "v0"):
        generation = engine.name  # vLLM's generations mean nothing to another engine

    def default_for(n: str, gen: str) -> Any:
        return engine.default(n, gen)

    if inv is not None:
        start, form = inv
        if shell:
            form = "shell"
    else:
        image = str(container.get("image") or "")
        has_cmd = bool(container.get("command"))
        flags = {canonical(t.value.split("=", 1)[0]) for t in toks if t.value.startswith("-")}
        if not has_cmd and not shell and (any(m in image.lower() for m in engine.images) or flags & engine.strong_flags):
            start, form = 0, "image entrypoint"  # vllm/vllm-openai: ENTRYPOINT is the API server
        elif flags & engine.strong_flags and toks:
            first_flag = next(i for i, t in enumerate(toks) if t.value.startswith("-"))
            start, form = first_flag, "wrapper"
            warnings.append(f"{engine.label} is started through a wrapper; flags are read where they appear")
        else:
            defaults = {n: ArgValue(n, default_for(n, generation), "default", note=SPECS[n].note) for n in SPECS}
            return VllmCommand(name, "not vllm", defaults, generation, ("no vLLM server found in this container",),
                               engine=engine.name)

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
    if ("model" in SPECS and form in ("vllm serve", "shell", "image entrypoint") and body
            and not body[0].value.startswith("-")):
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
            elif cname in engine.boolean_flags or cname.startswith("no-") or cname.startswith("disable-"):
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
            val = coerce(n, resolved, engine) if spec.kind != "str" else resolved
        except ArgError as e:
            values[n] = ArgValue(n, None, "env" if env_var else "flag", text, env_var, str(e))
            warnings.append(str(e))
            continue
        values[n] = ArgValue(n, val, "env" if env_var else "flag", text, env_var, note)
    if generation == "v1" and "swap-space" in values and values["swap-space"].source != "default":
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
        engine.name,
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

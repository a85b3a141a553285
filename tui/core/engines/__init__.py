"""Inference engines behind one interface (`base.Engine`); one module per engine.

The rest of the tree asks this registry, never an engine module by name, for what depends on
the engine: `parse_page(text)` routes a /metrics page to the engine that owns its families.
"""

from __future__ import annotations

from ..model import Sample
from .base import ArgSpec, Engine
from .sglang import ENGINE as SGLANG
from .vllm import ENGINE as VLLM

ENGINES: tuple[Engine, ...] = (VLLM, SGLANG)
DEFAULT = VLLM  # a page no engine claims (empty, or an error page) reads as vLLM always did


def get(name: str) -> Engine:
    for e in ENGINES:
        if e.name == name:
            return e
    raise KeyError(f"unknown engine {name!r}; known: {', '.join(e.name for e in ENGINES)}")


def engine_for_page(text: str) -> Engine:
    """The engine whose metric families the page carries (DEFAULT when none does)."""
    for e in ENGINES:
        if e.owns_page(text):
            return e
    return DEFAULT


def parse_page(text: str) -> Sample:
    """/metrics text -> Sample, parsed by the engine that owns the page."""
    return engine_for_page(text).parse_page(text)


NO_ENGINE_METRICS = "no vLLM metrics on page"


def read_page(text: str) -> tuple[Sample | None, str | None]:
    """(sample, None) for a page an engine can use, else (None, the reason for the replica's
    row). Every source and the recording reader take pages through here, so a bug on one odd
    page is that replica's error, never the poll's."""
    try:
        sample = parse_page(text)
    except Exception as e:  # noqa: BLE001 - one odd page must not stop the poll or the replay
        return None, f"unreadable page ({type(e).__name__})"
    if not sample.engines:
        return None, NO_ENGINE_METRICS
    return sample, None


_GENERATIONS = {"v1": "V1", "v0": "V0"}


def display(engine: str, generation: str = "unknown") -> str:
    """What the ENGINE column says: "vLLM V1", "vLLM V0", "SGLang" ("vLLM" when the
    generation is not known yet; "" before the replica's first page)."""
    if not engine:
        return ""
    try:
        label = get(engine).label
    except KeyError:
        return engine or "?"
    gen = _GENERATIONS.get(generation, "") if engine == VLLM.name else ""
    return f"{label} {gen}" if gen else label


__all__ = ["ArgSpec", "Engine", "ENGINES", "DEFAULT", "VLLM", "SGLANG", "display", "get", "engine_for_page", "parse_page", "read_page",
           "NO_ENGINE_METRICS"]

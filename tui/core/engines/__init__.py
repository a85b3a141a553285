"""Inference engines behind one interface (`base.Engine`); one module per engine.

The rest of the tree asks this registry, never an engine module by name, for what depends on
the engine: `parse_page(text)` routes a /metrics page to the engine that owns its families.
"""

from __future__ import annotations

from ..model import Sample
from .base import ArgSpec, Engine
from .vllm import ENGINE as VLLM

ENGINES: tuple[Engine, ...] = (VLLM,)
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


__all__ = ["ArgSpec", "Engine", "ENGINES", "DEFAULT", "VLLM", "get", "engine_for_page", "parse_page"]

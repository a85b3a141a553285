"""The engine interface: what kvwatch must know about one inference engine, in one object.

Each engine (vLLM today) is one module under `engines/` that builds one `Engine`: how to
recognise its /metrics pages (metric family prefixes) and its containers (commands, modules,
images), how its page becomes a `Sample`, the flags kvwatch reads and edits with their
defaults, and the KV-cache dtype sizes. The KV arithmetic (bytes per token, pool size from GPU
memory x utilisation - weights) is the same for every paged-attention engine, so it lives here
once and reads the engine's dtype table. Nothing here knows a particular engine's names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..model import Sample

GiB = 1024**3


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One engine flag kvwatch reads (and, if `editable`, edits)."""

    name: str  # canonical, dashes: "max-num-seqs"
    kind: str  # "int" | "float" | "bool" | "choice" | "str" | "tokens" (int, accepts 32k / 32K)
    default_v1: Any
    default_v0: Any
    note: str = ""
    editable: bool = True
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # other `--` spellings, without the dashes (`--tp` for `--tp-size`)


@dataclass(frozen=True)
class Engine:
    name: str  # registry key: "vllm"
    label: str  # shown to the SRE: "vLLM"
    metric_prefixes: tuple[str, ...]  # a page with a family under one of these is this engine's
    parse_page: Callable[[str], Sample]  # /metrics text -> Sample in canonical names
    # Canonical signal -> the exposed names that carry it, first found wins (renames across
    # releases); histograms by base name. The Sample's canonical names are the contract.
    scalars: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    histograms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Containers: argv words that start the server (`vllm serve`), `python -m` modules, and
    # image-name fragments for images whose entrypoint is the server.
    commands: tuple[tuple[str, ...], ...] = ()
    modules: tuple[str, ...] = ()
    images: tuple[str, ...] = ()
    # Flags that only this engine takes, so a wrapper script passing them is starting it.
    strong_flags: frozenset[str] = frozenset()
    arg_specs: Mapping[str, ArgSpec] = field(default_factory=dict)
    editable: tuple[str, ...] = ()  # the flags the edit form offers, in its order
    kv_args: tuple[str, ...] = ()  # the flags shown as the replica's KV-relevant args
    boolean_flags: frozenset[str] = frozenset()  # flags that never take a value
    flag_aliases: Mapping[str, str] = field(default_factory=dict)  # single-dash short form -> canonical
    kv_cache_dtypes: tuple[str, ...] = ("auto",)  # the engine's accepted --kv-cache-dtype values
    dtype_bytes: Mapping[str, float] = field(default_factory=dict)  # dtype -> bytes per element
    # What the engine calls a canonical signal, where its word differs ("preemptions" ->
    # "retractions"): evidence says which engine's signal a verdict rests on.
    signal_labels: Mapping[str, str] = field(default_factory=dict)

    # -- recognising --------------------------------------------------------------------------

    def owns_page(self, text: str) -> bool:
        return any(p in text for p in self.metric_prefixes)

    def canonical(self, flag: str) -> str:
        """`--max_num_seqs` -> `max-num-seqs`; `-tp` / `--tp` -> the flag they stand for."""
        name = flag.lstrip("-")
        if flag.startswith("-") and not flag.startswith("--"):
            short = self.flag_aliases.get(name)
            if short is not None:
                return short
        name = name.replace("_", "-")
        for spec in self.arg_specs.values():
            if name in spec.aliases:
                return spec.name
        return name

    def default(self, flag: str, generation: str = "v1") -> Any:
        spec = self.arg_specs[flag]
        return spec.default_v0 if generation == "v0" else spec.default_v1

    # -- KV arithmetic ------------------------------------------------------------------------

    def cache_dtype_bytes(self, kv_cache_dtype: str | None, model_dtype_bytes: float = 2) -> float:
        """Bytes per KV element; "auto" (or unset) means the model's own dtype."""
        if kv_cache_dtype in ("auto", "", None):
            return model_dtype_bytes
        if kv_cache_dtype not in self.dtype_bytes:
            raise ValueError(f"unknown kv-cache-dtype {kv_cache_dtype!r}; expected one of "
                             f"{', '.join(self.kv_cache_dtypes)}")
        return self.dtype_bytes[kv_cache_dtype]

    def kv_bytes_per_token(self, layers: int, kv_heads: int, head_dim: int, kv_cache_dtype: str | None = "auto",
                           tp: int = 1, model_dtype_bytes: float = 2) -> int:
        """Per GPU: 2 (K and V) x layers x KV heads per TP rank x head dim x dtype bytes."""
        heads = max(1, kv_heads // max(1, int(tp)))
        return int(2 * layers * heads * head_dim * self.cache_dtype_bytes(kv_cache_dtype, model_dtype_bytes))

    @staticmethod
    def kv_pool_bytes(total_bytes: float, gpu_memory_utilization: float, weights_bytes: float,
                      activation_bytes: float = 0.0, non_torch_bytes: float = 0.0) -> float:
        """What the engine keeps for KV: total x utilisation - weights - activations - non-torch."""
        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
        return total_bytes * gpu_memory_utilization - weights_bytes - activation_bytes - non_torch_bytes

    def kv_pool_tokens(self, total_bytes: float, gpu_memory_utilization: float, weights_bytes: float,
                       bytes_per_token: float, activation_bytes: float = 0.0, non_torch_bytes: float = 0.0) -> int:
        """Tokens the KV pool holds (0 when nothing is left for it)."""
        pool = self.kv_pool_bytes(total_bytes, gpu_memory_utilization, weights_bytes, activation_bytes, non_torch_bytes)
        return max(0, int(pool // bytes_per_token)) if bytes_per_token > 0 else 0

"""Capacity planner: how many tokens the KV pool holds, and the max-num-seqs that fits the traffic.

Where the numbers come from, best first (shared/reference/engine-args.md §3):
  1. `vllm:cache_config_info` labels `kv_cache_size_tokens` / `kv_cache_max_concurrency` (newest
     V1, per engine, group-aware, so right for hybrid models too);
  2. `num_gpu_blocks` x `block_size` from the same labels (wrong for hybrid / sliding-window
     models, whose groups hold tokens differently: noted when the labels hint at one);
  3. the model architecture: KV bytes per token = 2 (K and V) x layers x KV heads (per TP rank)
     x head dim x KV dtype bytes, and the KV budget = GPU memory x gpu-memory-utilization -
     weights - activation peak - non-torch memory.
The suggested max-num-seqs is what fits the observed p95 prompt + p95 output per request with
`headroom` of the pool kept free. Every step is written out in `lines`, so the SRE can check it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ..engines.vllm import DTYPE_BYTES
from ..engines.vllm import ENGINE as VLLM
from ..history import ReplicaHistory
from ..model import Histogram
from .thresholds import Thresholds

GiB = 1024**3



def _n(v: float) -> str:
    """Thousands separators, as vLLM logs counts."""
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.2f}"
    return f"{int(v):,}"


def _gib(b: float) -> str:
    return f"{b / GiB:.2f} GiB"


@dataclass(frozen=True, slots=True)
class ModelArch:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype_bytes: int = 2  # model dtype (bf16/fp16 = 2)
    name: str = ""
    hybrid: bool = False  # sliding-window / Mamba layers: the simple formula overstates
    mla: bool = False  # DeepSeek-style latent attention: the simple formula does not apply


def arch_from_config(cfg: Mapping[str, Any]) -> ModelArch:
    """ModelArch from a Hugging Face config.json dict; ValueError says which field is missing."""
    if not isinstance(cfg, Mapping):
        raise ValueError("model config: expected a JSON object")
    if isinstance(cfg.get("text_config"), Mapping):  # multimodal wrappers keep the LM here
        inner = dict(cfg["text_config"])
        for k in ("torch_dtype", "_name_or_path"):
            inner.setdefault(k, cfg.get(k))
        cfg = inner

    def first(*keys: str) -> int | None:
        for k in keys:
            v = cfg.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return None

    layers = first("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = first("num_attention_heads", "n_head", "num_heads")
    kv_heads = first("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
    if kv_heads is None and cfg.get("multi_query") is True:
        kv_heads = 1
    kv_heads = kv_heads or heads
    head_dim = first("head_dim", "kv_channels")
    hidden = first("hidden_size", "n_embd", "d_model")
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads
    missing = [n for n, v in (("num_hidden_layers", layers), ("num_key_value_heads", kv_heads),
                              ("head_dim (or hidden_size / num_attention_heads)", head_dim)) if v is None]
    if missing or layers is None or kv_heads is None or head_dim is None:
        raise ValueError(f"model config lacks {', '.join(missing)}")
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    types = cfg.get("layer_types") or []
    hybrid = bool(cfg.get("sliding_window") and cfg.get("use_sliding_window", True)) \
        or any("mamba" in str(x) or "sliding" in str(x) or "linear" in str(x) for x in types) \
        or "mamba" in str(cfg.get("model_type", "")).lower()
    return ModelArch(
        num_layers=layers,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        dtype_bytes=int(DTYPE_BYTES.get(dtype, 2)),
        name=str(cfg.get("_name_or_path") or cfg.get("model_type") or ""),
        hybrid=hybrid,
        mla=cfg.get("kv_lora_rank") is not None,
    )


def kv_bytes_per_token(arch: ModelArch, kv_cache_dtype: str = "auto", tp: int = 1) -> tuple[int, list[str]]:
    """(bytes per token per GPU, the arithmetic as lines)."""
    tp = max(1, int(tp))
    heads = max(1, arch.num_kv_heads // tp)
    db = VLLM.cache_dtype_bytes(kv_cache_dtype, arch.dtype_bytes)
    bpt = VLLM.kv_bytes_per_token(arch.num_layers, arch.num_kv_heads, arch.head_dim, kv_cache_dtype, tp,
                                  arch.dtype_bytes)
    dt = kv_cache_dtype if kv_cache_dtype not in ("auto", "", None) else "auto = model dtype"
    heads_txt = f"{arch.num_kv_heads} KV heads / TP {tp} = {heads}" if tp > 1 else f"{heads} KV heads"
    lines = [f"KV bytes per token = 2 (K and V) x {arch.num_layers} layers x {heads_txt} x "
             f"{arch.head_dim} head dim x {db:g} B ({dt}) = {_n(bpt)} B ({bpt / 1024:g} KiB)"]
    return bpt, lines


def kv_budget(total_bytes: float, gpu_memory_utilization: float, weights_bytes: float,
              activation_bytes: float = 0.0, non_torch_bytes: float = 0.0) -> tuple[float, list[str]]:
    """vLLM's KV budget: total x utilisation - weights - activation peak - non-torch."""
    budget = VLLM.kv_pool_bytes(total_bytes, gpu_memory_utilization, weights_bytes, activation_bytes, non_torch_bytes)
    usable = total_bytes * gpu_memory_utilization
    lines = [
        f"usable GPU memory = {_gib(total_bytes)} x gpu-memory-utilization {gpu_memory_utilization:g}"
        f" = {_gib(usable)}",
        f"KV budget = {_gib(usable)} - weights {_gib(weights_bytes)} - activation peak "
        f"{_gib(activation_bytes)} - non-torch {_gib(non_torch_bytes)} = {_gib(budget)}",
    ]
    if budget <= 0:
        lines.append("no memory left for the KV cache: vLLM refuses to start "
                     "(raise gpu-memory-utilization or use a smaller model / more TP)")
    return max(0.0, budget), lines


@dataclass(frozen=True, slots=True)
class CapacityPlan:
    capacity_tokens: int | None = None  # KV pool per engine, in tokens
    max_concurrency: float | None = None  # requests of max_model_len tokens that fit at once
    source: str = ""  # which of the three ways the capacity came from
    bytes_per_token: int | None = None
    kv_budget_bytes: float | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    max_model_len: int | None = None
    tokens_per_request: float | None = None  # p95 prompt + p95 output
    suggested_max_num_seqs: int | None = None
    current_max_num_seqs: int | None = None
    lines: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    suggest: Mapping[str, str] = field(default_factory=dict)  # edit-form pre-fill: flag -> value

    def as_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Mapping) else list(v) if isinstance(v, tuple) else v)
                for k in self.__slots__ for v in (getattr(self, k),)}


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    v = labels.get(key)
    if v is None:
        return None
    try:
        f = float(v)  # labels are strings: "5691", "90000", "None"
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f >= 0 else None


def _float_label(labels: Mapping[str, str], key: str) -> float | None:
    v = labels.get(key)
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def plan(
    *,
    cache_config: Mapping[str, str] | None = None,
    max_model_len: int | None = None,
    arch: ModelArch | None = None,
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    gpu_total_bytes: float | None = None,
    gpu_memory_utilization: float | None = None,
    weights_bytes: float | None = None,
    activation_bytes: float = 0.0,
    non_torch_bytes: float = 0.0,
    block_size: int | None = None,
    p95_prompt: float | None = None,
    p95_output: float | None = None,
    output_source: str = "generated",
    current_max_num_seqs: int | None = None,
    headroom: float = Thresholds().capacity_headroom,
) -> CapacityPlan:
    """The capacity figures from whatever is known, with the arithmetic."""
    labels = dict(cache_config or {})
    lines: list[str] = []
    notes: list[str] = []
    cap: int | None = None
    conc: float | None = None
    source = ""
    bpt = budget = None
    blocks = _int_label(labels, "num_gpu_blocks")
    bs = _int_label(labels, "block_size") or block_size
    if kv_cache_dtype is None:
        kv_cache_dtype = labels.get("cache_dtype", "auto") or "auto"

    size = _int_label(labels, "kv_cache_size_tokens")
    label_conc = _float_label(labels, "kv_cache_max_concurrency")
    if size:
        cap, source = size, "vllm:cache_config_info kv_cache_size_tokens"
        lines.append(f"KV capacity = {_n(size)} tokens (vLLM's kv_cache_size_tokens label, per engine)")
        if label_conc is not None:
            conc = label_conc
            lines.append(f"max concurrency at max-model-len = {label_conc:.2f}x (kv_cache_max_concurrency label)")
        if blocks and bs and blocks * bs != size:
            notes.append(f"num_gpu_blocks {_n(blocks)} x block_size {bs} = {_n(blocks * bs)} tokens differs from "
                         f"kv_cache_size_tokens {_n(size)}: a hybrid model, whose KV groups hold tokens "
                         "differently; the label is the right figure")
    elif blocks and bs:
        cap, source = blocks * bs, "num_gpu_blocks x block_size"
        lines.append(f"KV capacity = num_gpu_blocks {_n(blocks)} x block_size {bs} = {_n(cap)} tokens")
        hybrid_hint = (labels.get("sliding_window") not in (None, "", "None")
                       or any(k.startswith("mamba") and labels[k] not in ("None", "", "False") for k in labels)
                       or (arch is not None and arch.hybrid))
        if hybrid_hint:
            notes.append("blocks x block_size is wrong for hybrid (sliding-window / Mamba) models: "
                         "newer vLLM reports the real figure in the kv_cache_size_tokens label")
    if arch is not None:
        bpt, bl = kv_bytes_per_token(arch, kv_cache_dtype, tp)
        lines += bl
        if arch.mla:
            notes.append("MLA model: KV is one latent per token, the K+V formula overstates it")
        if arch.hybrid and cap is None:
            notes.append("hybrid model: the formula counts every layer as full attention (overstates KV)")
    if cap is None and bpt and gpu_total_bytes and gpu_memory_utilization and weights_bytes is not None:
        budget, bl = kv_budget(gpu_total_bytes, gpu_memory_utilization, weights_bytes, activation_bytes,
                               non_torch_bytes)
        lines += bl
        bs = bs or 16
        tokens = int(budget // bpt)
        blocks = tokens // bs
        cap, source = blocks * bs, "architecture and GPU memory"
        lines.append(f"KV tokens = {_gib(budget)} / {_n(bpt)} B = {_n(tokens)} tokens"
                     f" -> {_n(blocks)} blocks of {bs} = {_n(cap)} tokens")
    elif cap is not None and bpt:
        lines.append(f"KV memory held by a full pool = {_n(cap)} tokens x {_n(bpt)} B = {_gib(cap * bpt)}")
    if cap is None:
        notes.append("KV capacity unknown: no cache_config_info labels, and not enough to compute it "
                     "(needs model architecture, GPU memory, gpu-memory-utilization and weights)")
    if conc is None and cap is not None and max_model_len:
        conc = cap / max_model_len
        lines.append(f"max concurrency at max-model-len {_n(max_model_len)} = {_n(cap)} / {_n(max_model_len)}"
                     f" = {conc:.2f}x")

    per_req = suggested = None
    suggest: dict[str, str] = {}
    if cap is not None and p95_prompt is not None and p95_output is not None:
        per_req = p95_prompt + p95_output
        lines.append(f"tokens per request at p95 = prompt {_n(round(p95_prompt))} + {output_source} output "
                     f"{_n(round(p95_output))} = {_n(round(per_req))}")
        if per_req > 0:
            fit = cap * (1 - headroom) / per_req
            suggested = max(1, int(fit))
            lines.append(f"max-num-seqs that fits = {_n(cap)} x (1 - headroom {headroom:g}) / {_n(round(per_req))}"
                         f" = {fit:.1f} -> {suggested}")
            suggest["max-num-seqs"] = str(suggested)
            if current_max_num_seqs:
                if current_max_num_seqs > suggested:
                    lines.append(f"current max-num-seqs {current_max_num_seqs} > {suggested}: a batch of p95-shaped "
                                 "requests outgrows the pool and vLLM preempts")
                else:
                    lines.append(f"current max-num-seqs {current_max_num_seqs} <= {suggested}: the cap fits "
                                 "p95-shaped traffic")
    elif cap is not None:
        notes.append("request shape unknown (no prompt / generation length histograms yet): "
                     "cannot size max-num-seqs")
    return CapacityPlan(
        capacity_tokens=cap,
        max_concurrency=conc,
        source=source,
        bytes_per_token=bpt,
        kv_budget_bytes=budget,
        num_gpu_blocks=blocks,
        block_size=bs,
        max_model_len=max_model_len,
        tokens_per_request=per_req,
        suggested_max_num_seqs=suggested,
        current_max_num_seqs=current_max_num_seqs,
        lines=tuple(lines),
        notes=tuple(notes),
        suggest=suggest,
    )


def _window_hist(h: ReplicaHistory, name: str, seconds: float) -> Histogram | None:
    win = h.window(seconds)
    if not win:
        return None
    newest = win[-1].page.hist(name)
    if newest is None:
        return None
    oldest = win[0].page.hist(name) if len(win) > 1 else None
    d = newest.minus(oldest)
    return d if d.count > 0 else (newest if newest.count > 0 else None)


def plan_for_history(h: ReplicaHistory, *, window_s: float = 600.0, max_model_len: int | None = None,
                     current_max_num_seqs: int | None = None, arch: ModelArch | None = None,
                     t: Thresholds | None = None, **kw: Any) -> CapacityPlan:
    """The plan for one replica: its cache_config labels and the request shape it served lately."""
    t = t or Thresholds()
    s = h.last_ok
    labels = dict(s.page.cache_config) if s is not None else {}
    p_hist = _window_hist(h, "prompt_len", window_s)
    g_hist = _window_hist(h, "gen_len", window_s)
    src = "generated"
    if g_hist is None:
        g_hist, src = _window_hist(h, "max_tokens", window_s), "max_tokens"
    p95p = p_hist.quantile(0.95) if p_hist is not None else None
    p95o = g_hist.quantile(0.95) if g_hist is not None else None
    if current_max_num_seqs is None and h.latest.max_num_seqs:
        current_max_num_seqs = int(h.latest.max_num_seqs)
    p = plan(cache_config=labels, max_model_len=max_model_len, arch=arch, p95_prompt=p95p, p95_output=p95o,
             output_source=src, current_max_num_seqs=current_max_num_seqs, headroom=t.capacity_headroom, **kw)
    return calibrated(p, h, t)


def observed_fit(h: ReplicaHistory, t: Thresholds, window_s: float = 120.0) -> tuple[int, float] | None:
    """(sequences the replica ran at once, its peak KV usage) over the last `window_s` with no
    preemption at all and KV below the ceiling: that many fit, whatever the p95 arithmetic says."""
    win = h.window(window_s)
    if len(win) < 3:
        return None
    pre = [v for s in win if (v := s.page.value("preemptions")) is not None]
    if len(pre) < len(win) or pre[-1] > pre[0]:
        return None  # preempting (or not exposed): no evidence of what fits
    runs = [v for s in win if (v := s.page.value("running")) is not None]
    kvs = [v for s in win if (v := s.page.value("kv_usage")) is not None]
    if len(runs) < len(win) or len(kvs) < len(win):
        return None
    peak = max(kvs)
    if peak >= t.kv_high:
        return None
    return int(min(runs[-3:])), peak  # held for the last three scrapes, not a passing peak


def calibrated(p: CapacityPlan, h: ReplicaHistory, t: Thresholds) -> CapacityPlan:
    """The plan, held to what the replica was seen doing: a batch it ran without preempting fits
    (the p95-shaped estimate counts every sequence at its longest, all at once). The one model of
    the replica's capacity: the planner, the runbook's cap step and the edit preflight read it."""
    seen = observed_fit(h, t)
    if p.suggested_max_num_seqs is None or seen is None or seen[0] <= p.suggested_max_num_seqs:
        return p
    n, peak = seen
    lines = [ln for ln in p.lines if not ln.startswith("current max-num-seqs")]
    lines.append(f"observed: {n} sequences at once with KV peak {peak:.2f} and no preemption in the last "
                 f"2 min: {n} fit -> {n}")
    cur = p.current_max_num_seqs
    if cur:
        lines.append(f"current max-num-seqs {cur} <= {n}: the cap fits the traffic it serves"
                     if cur <= n else f"current max-num-seqs {cur} > {n} seen fitting: above that, not yet observed")
    return replace(p, suggested_max_num_seqs=n, lines=tuple(lines), suggest={**p.suggest, "max-num-seqs": str(n)})

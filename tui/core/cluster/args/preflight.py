"""KV preflight: will the replica still start with the new values, and what the running
engine reports about its own settings (`vllm:cache_config_info`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from ...engines import vllm as VLLM_MOD
from . import sglang_rules
from .changes import eff_before
from .parse import VllmCommand
from .values import ArgError, coerce

GiB = 1024**3


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
    *,
    fits: int | None = None,
    fits_why: str = "",
) -> Preflight:
    """Estimate the KV pool after the change and whether one max-model-len sequence still fits.

    vLLM refuses to start when one full-length sequence needs more KV than the pool holds
    ("KV cache needed > available"), and Kubernetes then restarts it forever. Capacity comes from
    `vllm:cache_config_info` (kv_cache_size_tokens, or num_gpu_blocks x block_size); a change of
    gpu-memory-utilization moves (old - new) x GPU memory out of the pool, converted to tokens
    with the model's KV bytes per token (per GPU: divided by the tensor-parallel size).
    """
    return with_fit(_kv_preflight(cmd, changes, cache_config, gpu_total_bytes, kv_bytes_token), changes, fits,
                    fits_why)


def with_fit(pf: Preflight, changes: Mapping[str, Any], fits: int | None, why: str = "") -> Preflight:
    """`pf`, warning when the new max-num-seqs is above what the replica's capacity plan says
    fits its traffic (the figure the runbook's cap step and the planner give: one answer)."""
    seqs = changes.get("max-num-seqs")
    if not fits or not isinstance(seqs, int) or seqs <= fits:
        return pf
    line = (f"max-num-seqs {seqs} > {fits} that fits this replica's traffic in its KV pool "
            f"({why or 'capacity plan'}): expect preemptions")
    return replace(pf, status="warn" if pf.status in ("ok", "unknown") else pf.status, messages=(*pf.messages, line))


def _kv_preflight(
    cmd: VllmCommand,
    changes: Mapping[str, Any],
    cache_config: Mapping[str, Any] | None,
    gpu_total_bytes: float | None,
    kv_bytes_token: float | None,
) -> Preflight:
    if cmd.engine == sglang_rules.ENGINE_NAME:
        return Preflight(*sglang_rules.preflight(lambda n: eff_before(cmd, n), changes, cache_config,
                                                 gpu_total_bytes, kv_bytes_token))
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
    if 0 < cap_new < cap * (1 - 1e-6):
        # kvwatch says it loudly, whatever the verdict: a smaller pool is the opposite of what KV
        # pressure needs (lowering gpu-memory-utilization is for CUDA OOM; see diagnosis.gmu_policy)
        status = "warn" if status == "ok" else status
        msgs.insert(0, _shrink_line(cap, cap_new, cmd, changes, mml_new))
    seqs = changes.get("max-num-seqs")
    if seqs and cap_new > 0 and cap_new / seqs < 16:
        status = "warn" if status == "ok" else status
        msgs.append(f"{seqs} sequences share ~{int(cap_new)} KV tokens ({cap_new / seqs:.0f} each): expect preemptions")
    return Preflight(status, tuple(msgs), int(cap), int(cap_new))


def _shrink_line(cap: float, cap_new: float, cmd: VllmCommand, changes: Mapping[str, Any], mml: Any) -> str:
    """The loud line of a change that shrinks the KV pool: before -> after and what still fits."""
    line = f"KV POOL SHRINKS {int(cap):,} -> {int(cap_new):,} tokens ({(cap_new - cap) / cap:+.0%})"
    if isinstance(mml, int) and mml > 0:
        line += f": full-length ({mml}) sequences fit: {cap / mml:.1f} -> {cap_new / mml:.1f}"
    seqs = changes.get("max-num-seqs", eff_before(cmd, "max-num-seqs"))
    if isinstance(seqs, int) and seqs > 0:
        line += f"; at max-num-seqs {seqs} each sequence gets ~{int(cap_new / seqs):,} tokens (was {int(cap / seqs):,})"
    return line + ": worse preemption under KV pressure"


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

"""A change set the SRE typed, checked against the engine's rules, and the incident presets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import sglang_rules
from ...diagnosis import gmu_policy
from ...diagnosis.thresholds import Thresholds
from ..presets import PRESETS  # noqa: F401 - re-exported: `args.PRESETS`
from .parse import VllmCommand
from .values import ArgError, check_range, coerce


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
    """Coerce and check a change set against the engine's rules (single values and their relations)."""
    errors: dict[str, str] = {}
    warnings: list[str] = []
    typed: dict[str, Any] = {}
    SPECS = cmd.specs
    for name, raw in raw_changes.items():
        if name not in SPECS:
            errors[name] = f"kvwatch does not edit --{name}"
            continue
        if not SPECS[name].editable:
            errors[name] = f"--{name} is shown, not edited, by kvwatch"
            continue
        try:
            val = coerce(name, raw, cmd.eng)
            check_range(name, val)
        except ArgError as e:
            errors[name] = str(e)
            continue
        typed[name] = val
    eff = {n: effective(cmd, typed, n, observed) for n in SPECS}
    if cmd.engine == sglang_rules.ENGINE_NAME:
        sglang_rules.relations(eff, typed, errors, warnings)
        changes = {n: v for n, v in typed.items() if v != eff_before(cmd, n, observed)}
        return Validation(changes, errors, tuple(warnings))
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


def presets_for(cmd: VllmCommand) -> dict[str, str]:
    """The incident presets in the command's engine's knobs: key -> what it does."""
    return sglang_rules.PRESETS if cmd.engine == sglang_rules.ENGINE_NAME else PRESETS


def eff_before(cmd: VllmCommand, name: str, observed: Mapping[str, Any] | None = None) -> Any:
    return effective(cmd, {}, name, observed)


def preset(cmd: VllmCommand, key: str, observed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The change set of one incident preset, from the values the replica runs with now.

    `observed` (e.g. max-num-seqs from the engine's config metrics) beats the documented default
    when the flag is absent, since defaults depend on the GPU.
    """
    if cmd.engine == sglang_rules.ENGINE_NAME:
        return sglang_rules.preset(lambda n: eff_before(cmd, n, observed), key)
    if key not in PRESETS:
        raise ArgError(f"unknown preset {key!r}; known: {', '.join(PRESETS)}")
    seqs = eff_before(cmd, "max-num-seqs", observed)
    if key in ("seqs-25", "seqs-50"):
        if not isinstance(seqs, int):
            raise ArgError("current --max-num-seqs is unknown; type a value instead")
        factor = 0.75 if key == "seqs-25" else 0.5
        return {"max-num-seqs": max(1, int(seqs * factor))}
    if key in gmu_policy.LOWER_PRESETS:  # the emergency steps of the one policy
        return {"gpu-memory-utilization": gmu_policy.preset_value(key, Thresholds())}
    batched = eff_before(cmd, "max-num-batched-tokens", observed)
    if not isinstance(batched, int):
        raise ArgError("current --max-num-batched-tokens is unknown; type a value instead")
    floor = seqs if isinstance(seqs, int) else 1
    mml = eff_before(cmd, "max-model-len", observed)
    if eff_before(cmd, "enable-chunked-prefill", observed) is False and isinstance(mml, int):
        floor = max(floor, mml)
    return {"max-num-batched-tokens": max(floor, batched // 2)}

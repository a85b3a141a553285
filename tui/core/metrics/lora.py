"""vLLM's `vllm:lora_requests_info`: which LoRA adapters hold the slots and which wait.

The gauge carries no count: its labels do (`max_lora`, and `running_lora_adapters` /
`waiting_lora_adapters` as comma-separated adapter names) and its value is the time it was set
(`set_to_current_time()`). prometheus_client keeps every label set it was ever given, so a page
lists the old combinations too; the newest (largest timestamp) is the current one.
"""

from __future__ import annotations

from .parser import Page, SampleRow

LORA_INFO = "vllm:lora_requests_info"


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def lora_info(page: Page) -> tuple[int | None, tuple[str, ...], tuple[str, ...]] | None:
    """(max_lora, running adapters, waiting adapters) of the newest series; None without one."""
    return lora_from_rows(page.get(LORA_INFO))


def lora_from_rows(rows: list[SampleRow]) -> tuple[int | None, tuple[str, ...], tuple[str, ...]] | None:
    """lora_info of the page's `vllm:lora_requests_info` rows."""
    best = None
    for labels, v in rows:
        if v == v and (best is None or v > best[1]):
            best = (labels, v)
    if best is None:
        return None
    labels = best[0]
    raw = labels.get("max_lora")
    try:
        mx = int(float(raw)) if raw is not None else None
    except (ValueError, OverflowError):  # "nan", "inf", garbage: not a slot count
        mx = None
    if mx is not None and mx < 0:
        mx = None
    return mx, _names(labels.get("running_lora_adapters")), _names(labels.get("waiting_lora_adapters"))

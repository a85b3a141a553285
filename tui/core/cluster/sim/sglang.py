"""The simulated cluster's SGLang Deployments: their container as an SGLang pod spec writes it,
and SGLang's flags mapped onto the simulator's scheduler model.

The simulator runs one scheduler model for both engines, so each SGLang knob it models is the
vLLM setting with the same effect: the running-request cap, the prefill chunk, the memory
fraction for weights + pool, the context length, the KV page size and dtype. A knob it does not
model (schedule-conservativeness, max-prefill-tokens, max-total-tokens) is refused at planning
time rather than silently dropped from the pod spec.
"""

from __future__ import annotations

from typing import Any

from ...sim.args import EngineArgs

IMAGE = "lmsysorg/sglang:v0.5.1-cu126"

# SGLang flag -> EngineArgs field it stands for in the simulator
FIELDS = {
    "max-running-requests": "max_num_seqs",
    "chunked-prefill-size": "max_num_batched_tokens",
    "mem-fraction-static": "gpu_memory_utilization",
    "context-length": "max_model_len",
    "page-size": "block_size",
    "kv-cache-dtype": "kv_cache_dtype",
    "tp-size": "tensor_parallel_size",
    "dp-size": "data_parallel_size",
}


def container(model: str, args: EngineArgs) -> dict[str, Any]:
    """The pod template's SGLang container for `args`: explicit KV flags, as production specs have."""
    out = ["--model-path", model]
    defaults = EngineArgs()
    for flag, fld in FIELDS.items():
        v = getattr(args, fld)
        # the memory fraction and page size always: SGLang's own defaults differ from the simulator's
        if v is None or (v == getattr(defaults, fld) and flag not in ("mem-fraction-static", "page-size")):
            continue
        out += ["--" + flag, str(v)]
    return {"name": "sglang", "image": IMAGE, "command": ["python3", "-m", "sglang.launch_server"],
            "args": out + ["--enable-metrics", "--port", "8000"]}


def field_for(flag: str) -> str:
    """The EngineArgs field an SGLang flag changes; ValueError for a knob the simulator lacks."""
    if flag not in FIELDS:
        raise ValueError(f"the simulator does not model SGLang's --{flag}")
    return FIELDS[flag]

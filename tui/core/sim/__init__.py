"""Built-in simulated vLLM fleet: the `kvwatch demo` default and a game-day trainer.

Replicas are modelled on vLLM's V1 scheduler (paged KV blocks, chunked prefill, preemption by
recompute, prefix caching) and serve real-format /metrics, /health and DCGM pages on 127.0.0.1.
"""

from .args import EngineArgs
from .fleet import ReplicaStatus, SimFleet, SimTarget
from .hardware import GPUS, MODELS, KvPlan, plan_kv
from .scenarios import SCENARIOS

__all__ = ["EngineArgs", "SimFleet", "SimTarget", "ReplicaStatus", "SCENARIOS", "GPUS", "MODELS", "KvPlan", "plan_kv"]

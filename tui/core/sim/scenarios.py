"""Named scenarios: which fleet runs, what traffic hits it over simulated time, what breaks.

Each scenario doubles as a game-day exercise; its docstring says what the SRE should see and
what fixes it. Rates are requests/s per initially configured replica; the fleet's router spreads
the total over the replicas in rotation, so adding or draining replicas shifts the load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .args import EngineArgs
from .workload import Shape

HW_THERMAL = 0x40  # DCGM clock-event reason: hw_thermal_slowdown


@dataclass(frozen=True, slots=True)
class Deployment:
    """A group of identical replicas (a Kubernetes Deployment)."""

    group: str
    model: str = "llama-3.1-8b"  # hardware.MODELS key
    gpu: str = "a100-40gb"  # hardware.GPUS key
    args: EngineArgs = EngineArgs(max_model_len=8192, max_num_seqs=64)


@dataclass(frozen=True, slots=True)
class Phase:
    start_s: float  # simulated seconds after the fleet starts (within the period, if any)
    rate: float  # requests/s per configured replica
    shape: Shape


@dataclass(frozen=True, slots=True)
class NodeFault:
    node: int  # index of the node (gpu-node-N) of the N-th initial replica
    start_s: float
    throttle_mask: int = 0
    slowdown: float = 1.0  # step-time factor
    xid: int = 0
    ecc_dbe: int = 0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    doc: str
    deployment: Deployment
    phases: tuple[Phase, ...]
    period_s: float | None = None  # phases repeat with this period (bursts)
    faults: tuple[NodeFault, ...] = ()
    client_timeout_s: float = 300.0

    def phase_at(self, t: float) -> Phase:
        if self.period_s:
            t %= self.period_s
        cur = self.phases[0]
        for p in self.phases:
            if p.start_s <= t:
                cur = p
        return cur

    def next_change(self, t: float) -> float:
        """Next time the phase changes after t (inf if never)."""
        if self.period_s:
            base = t - t % self.period_s
            for p in self.phases:
                if base + p.start_s > t:
                    return base + p.start_s
            return base + self.period_s
        later = [p.start_s for p in self.phases if p.start_s > t]
        return min(later) if later else float("inf")


# Traffic shapes
CHAT = Shape()  # ~600-token prompts (40% with a shared system prompt), ~220-token answers
LONG = Shape(prompt_median=3000, prompt_sigma=0.45, prompt_min=512, prompt_max=7000, output_median=1400,
             output_sigma=0.5, max_tokens=(1024, 2048, 2048, 4096), prefix_share=0.2)
PREFILL_HEAVY = Shape(prompt_median=1800, prompt_sigma=0.35, prompt_max=6000, output_median=12,
                      output_sigma=0.5, max_tokens=(16, 32), prefix_share=0.0)
CPU_HEAVY = Shape(prompt_median=180, prompt_sigma=0.5, output_median=60, output_sigma=0.5,
                  max_tokens=(128, 256), prefix_share=0.0, cpu_base_s=0.085, cpu_per_prompt_token_s=2e-5,
                  cpu_per_output_token_s=1e-4)

FLEET = Deployment("llama-8b")
STEADY_RATE = 4.0


def steady() -> Scenario:
    """Healthy fleet: chat traffic well inside capacity.

    KV usage stays around 5-30%, nothing waits, no preemptions, GPU busy (~40-65%) but not saturated.
    Game day: learn the baseline (what normal looks like) before breaking anything.
    """
    return Scenario("steady", _doc(steady), FLEET, (Phase(0, STEADY_RATE, CHAT),))


def long_prompts() -> Scenario:
    """KV-cache pressure: after ~45 s of healthy chat, traffic shifts to long prompts and large max_tokens.

    Each request now holds ~3-5k tokens of KV and grows by one token per step, so the pool fills,
    the scheduler preempts the newest requests by recompute, preempted requests re-prefill and
    are preempted again: KV usage pinned near 100%, waiting > 0 and growing, preemptions
    climbing, throughput and latency collapsing. GPU memory sits at ~92% throughout (vLLM
    pre-allocates its pool), so memory alone says nothing.
    Game day: confirm (KV >= 0.9 + waiting + preemption rate, node healthy), then cap
    concurrency: --max-num-seqs 64 -> 32 stops the preemptions (KV leaves the ceiling; the
    queue then needs more replicas). Raising --gpu-memory-utilization or --kv-cache-dtype fp8
    adds KV blocks and reduces preemptions too.
    """
    return Scenario("long-prompts", _doc(long_prompts), FLEET,
                    (Phase(0, STEADY_RATE, CHAT), Phase(45, 1.3, LONG)))


def burst() -> Scenario:
    """Arrival spikes: steady chat with a 4x burst for 20 s every 2 minutes.

    During a burst running hits --max-num-seqs, the queue builds and TTFT jumps from ~0.1 s to
    seconds while KV usage stays moderate; between bursts the fleet recovers by itself.
    Game day: tell a transient from sustained pressure (look at the window, not one scrape);
    do not roll the fleet for a spike.
    """
    return Scenario("burst", _doc(burst), FLEET,
                    (Phase(0, STEADY_RATE, CHAT), Phase(90, STEADY_RATE * 4, CHAT), Phase(110, STEADY_RATE, CHAT)),
                    period_s=120.0)


def compute_bound() -> Scenario:
    """Compute-bound: prefill-heavy traffic (long documents in, short answers out).

    GPU util > 85% with batching effective, KV usage low, no preemptions; GPU memory moderate
    (the fleet runs with --gpu-memory-utilization 0.7). TTFT rises with load, ITL stays flat.
    Game day: this is not KV pressure; tuning KV args does nothing, only more GPUs (scale out)
    or fewer prefill tokens help.
    """
    dep = Deployment("llama-8b", args=EngineArgs(max_model_len=8192, max_num_seqs=64, gpu_memory_utilization=0.7))
    return Scenario("compute-bound", _doc(compute_bound), dep, (Phase(0, 5.6, PREFILL_HEAVY),))


def host_bound() -> Scenario:
    """Host-bound: the API server's CPU is the bottleneck (slow tokenizer, CPU-heavy request handling).

    Every request costs ~100 ms of API-server CPU, so the front end saturates one core
    (process_cpu_seconds_total rate ~1) while the GPU idles: GPU util and memory pressure low,
    the engine's waiting queue ~0, yet TTFT and e2e latency climb because requests wait in the
    API server before the engine sees them.
    Game day: engine args will not help; more API-server processes (--api-server-count), CPU
    limits or more replicas will.
    """
    return Scenario("host-bound", _doc(host_bound), FLEET, (Phase(0, 10.3, CPU_HEAVY),))


def throttled_node() -> Scenario:
    """Node fault: after 60 s one node's GPU throttles (hw_thermal_slowdown) and runs ~1.5x slower.

    The replica on gpu-node-1 regresses (ITL up ~1.5x or more, more requests in flight)
    with no KV pressure; its DCGM page reports clock throttle reason 0x40 and a hot GPU. The
    other replicas are fine.
    Game day: do not tune vLLM; drain the replica off the node (the replacement lands on a
    healthy node) and hand the node to the hardware runbook.
    """
    return Scenario("throttled-node", _doc(throttled_node), FLEET, (Phase(0, STEADY_RATE, CHAT),),
                    faults=(NodeFault(1, 60.0, throttle_mask=HW_THERMAL, slowdown=1.5),))


def _doc(fn: Callable[..., Any]) -> str:
    return " ".join((fn.__doc__ or "").split())


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "steady": steady,
    "long-prompts": long_prompts,
    "burst": burst,
    "compute-bound": compute_bound,
    "host-bound": host_bound,
    "throttled-node": throttled_node,
}


def get(name: str) -> Scenario:
    try:
        return SCENARIOS[name]()
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}") from None

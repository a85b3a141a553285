"""Request traffic: Poisson arrivals and request shapes, from a seeded `random.Random` only.

A `Shape` describes one kind of traffic (prompt and output length distributions, max_tokens,
shared prefixes, API-server CPU cost); scenarios switch shapes and rates over simulated time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Shape:
    prompt_median: float = 600.0
    prompt_sigma: float = 0.8  # lognormal sigma
    prompt_min: int = 16
    prompt_max: int = 7000
    output_median: float = 220.0  # tokens the model would write before EOS
    output_sigma: float = 0.7
    max_tokens: tuple[int, ...] = (256, 512, 1024)  # client max_tokens, drawn uniformly
    prefix_share: float = 0.4  # share of requests that start with a shared system prompt
    prefix_lens: tuple[int, ...] = (512, 1024, 256, 768)  # token length per shared prefix id
    # API-server (front-end) CPU per request: tokenization, chat template, detokenization.
    cpu_base_s: float = 0.0015
    cpu_per_prompt_token_s: float = 4e-6
    cpu_per_output_token_s: float = 3e-5


@dataclass(slots=True)
class Request:
    """One request; the engine fills its scheduling fields as it moves through the queue."""

    rid: int
    arrival: float  # at the API server (TTFT and e2e are measured from here)
    prompt: int
    max_tokens: int
    out_target: int  # tokens it will generate (EOS or max_tokens)
    prefix: int = -1  # shared-prefix id, -1 for none
    prefix_len: int = 0
    cpu_s: float = 0.0  # front-end CPU cost
    # engine side
    engine_arrival: float = 0.0
    scheduled_ts: float | None = None  # first time scheduled
    first_token_ts: float | None = None
    last_token_ts: float = 0.0
    generated: int = 0
    computed: int = 0  # KV tokens computed while (re)prefilling
    target: int = 0  # tokens to prefill: prompt + generated (recompute after preemption)
    own_blocks: int = 0  # blocks held while prefilling (excluding a shared prefix)
    shared: int = 0  # prefix blocks shared with others (0 when not sharing)
    kv_offset: int = 0  # while decoding: KV tokens = kv_offset + engine decode counter
    finish_d: int = 0
    preemptions: int = 0
    cached_first: int = 0  # prefix-cache hit tokens at first admission
    decoding: bool = False

    @property
    def finish_reason(self) -> str:
        return "length" if self.out_target >= self.max_tokens else "stop"


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return rng.lognormvariate(math.log(max(median, 1e-9)), sigma)


class Workload:
    """Draws arrival gaps and requests from one seeded RNG (reproducible with --seed)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self._rid = 0

    def gap(self, rate: float) -> float:
        """Time to the next Poisson arrival at `rate` per second (inf when the rate is 0)."""
        if rate <= 0:
            return math.inf
        return self.rng.expovariate(rate)

    def request(self, t: float, shape: Shape) -> Request:
        rng = self.rng
        self._rid += 1
        prompt = int(_lognormal(rng, shape.prompt_median, shape.prompt_sigma))
        prompt = min(max(prompt, shape.prompt_min), shape.prompt_max)
        prefix, plen = -1, 0
        if shape.prefix_lens and rng.random() < shape.prefix_share:
            prefix = rng.randrange(len(shape.prefix_lens))
            plen = shape.prefix_lens[prefix]
            prompt = max(prompt, plen + shape.prompt_min)
        max_tokens = rng.choice(shape.max_tokens)
        out = max(1, int(_lognormal(rng, shape.output_median, shape.output_sigma)))
        out = min(out, max_tokens)
        cpu = shape.cpu_base_s + shape.cpu_per_prompt_token_s * prompt + shape.cpu_per_output_token_s * out
        return Request(self._rid, t, prompt, max_tokens, out, prefix, plen, cpu)

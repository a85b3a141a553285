"""One vLLM V1 engine core: a paged KV pool and the scheduler that fills it, step by step.

Per step (as vLLM V1's scheduler): running requests first (decodes take one token each, partial
prefills take a chunk of the token budget), allocating KV blocks as they grow; when no block is
free the newest running request is preempted by recompute (blocks freed, back to the front of
the waiting queue). Waiting requests are admitted only in steps without preemption, while
`max_num_seqs`, the `max_num_batched_tokens` budget and free blocks allow; long prompts are
prefilled in chunks across steps. Step time comes from a roofline of the batch (weights and KV
read from memory vs FLOPs of the tokens computed), so latency histograms and GPU activity fall
out of the same state.

Decoding requests are kept as aggregates (count, block-boundary phases, sum of KV offsets and a
heap of finish steps) so a step costs O(1) in the batch size, and stretches of pure decode with
nothing to change are advanced many steps at once.

One module (~500 lines) on purpose: it is one class whose methods all share the scheduler's
mutable state (block pool, queues, decode aggregates, counters) within a step; split across
files, each piece would reach into the others' private state. Its parts that stand alone
already live beside it (buckets.py, hardware.py, workload.py). This is the simulated engine
core, not an `engines.Engine` (the interface to a real engine's pages and flags).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any, Callable

from . import buckets as B
from .args import EngineArgs
from .hardware import GpuSpec, KvPlan, ModelSpec
from .workload import Request

MACRO_MAX = 48  # steps advanced at once; bounds the error of a constant step time
UTIL_TAU_S = 2.0  # time constant of the GPU activity average (DCGM samples ~1 s)
FINISH_REASONS = ("stop", "length", "abort", "error")
PREEMPT_LOG_EVERY = 50  # vLLM's scheduler logs its preemption warning once per this many preemptions


class Counters:
    """Monotonic counters of one engine, named as the canonical signals."""

    __slots__ = ("preemptions", "prompt_tokens", "prompt_local", "prompt_cached", "generation_tokens",
                 "prefix_queries", "prefix_hits", "success", "steps")

    def __init__(self) -> None:
        self.preemptions = 0
        self.prompt_tokens = 0
        self.prompt_local = 0  # prompt tokens computed (by source: local_compute)
        self.prompt_cached = 0  # prompt tokens from the prefix cache (local_cache_hit)
        self.generation_tokens = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.success = {r: 0 for r in FINISH_REASONS}
        self.steps = 0


class Engine:
    def __init__(self, args: EngineArgs, model: ModelSpec, gpu: GpuSpec, plan: KvPlan,
                 index: int = 0, t0: float = 0.0) -> None:
        assert args.max_num_seqs is not None and args.max_num_batched_tokens is not None, "resolve args first"
        self.args, self.model, self.gpu, self.plan = args, model, gpu, plan
        self.index = index
        self.bs = args.block_size
        self.max_len = plan.max_model_len
        self.total = plan.num_gpu_blocks
        self.used = 0  # blocks held by running requests (own blocks + referenced prefixes)
        self.now = t0
        self.started = t0
        self.d = 0  # decode-step counter (advances every engine step)
        self.running: dict[int, Request] = {}  # admission order: the last one is preempted first
        self.prefilling: dict[int, Request] = {}
        self.waiting: deque[Request] = deque()
        self.incoming: deque[Request] = deque()  # routed here, not yet at the engine (future times)
        # decoder aggregates
        self.n_dec = 0
        self.phase = [0] * self.bs  # decoders that need a new block when d % bs == i
        self.sum_off = 0
        self.heap: list[tuple[int, int]] = []  # (finish step, rid), stale entries skipped
        # prefix cache: id -> [blocks, refs, last_used]; evictable blocks count as free
        self.prefixes: dict[int, list[Any]] = {}  # prefix id -> [blocks, users, last used]
        self.evictable = 0
        self.slowdown = 1.0  # > 1 while the GPU throttles
        self._grown = False  # decoders got this step's blocks (preemption must free them too)
        self.on_step: Callable[[Engine, int, int], None] | None = None  # (engine, tokens/step, steps): tests
        # (engine, preempted request): called on every PREEMPT_LOG_EVERY-th preemption, as vLLM logs it
        self.on_preempt: Callable[[Engine, Request], None] | None = None
        self.c = Counters()
        self.h = self._new_hists()
        self.activity = 0.0  # smoothed GPU activity 0..1
        self._abort_check = t0
        self.client_timeout_s = 300.0  # queued requests older than this are abandoned by clients
        tp = max(1, args.tensor_parallel_size)
        self._flops_per_token = 2.0 * model.params / tp
        self._weight_read_s = plan.weight_bytes / gpu.mem_bw
        self._kv_read_s_per_token = plan.bytes_per_token / gpu.mem_bw
        self._overhead_s = 0.0018 + (0.0004 if tp > 1 else 0.0)

    def _new_hists(self) -> dict[str, B.SimHist]:
        tok = B.buckets_1_2_5(self.max_len)
        lat = B.union(B.LATENCY_V1, B.LATENCY_V0)
        return {
            "ttft": B.SimHist(B.union(B.TTFT_V1, B.TTFT_V0)),
            "itl": B.SimHist(B.union(B.ITL_V1, B.TPOT_V0)),
            "tpot": B.SimHist(B.union(B.ITL_V1, B.TPOT_V0)),
            "e2e": B.SimHist(lat),
            "queue_time": B.SimHist(lat),
            "inference_time": B.SimHist(lat),
            "prefill_time": B.SimHist(lat),
            "decode_time": B.SimHist(lat),
            "prompt_len": B.SimHist(tok),
            "gen_len": B.SimHist(tok),
            "max_gen": B.SimHist(tok),
            "max_tokens": B.SimHist(tok),
            "prefill_kv_computed": B.SimHist(tok),
            "iteration_tokens": B.SimHist(B.union(B.ITERATION_V1, B.ITERATION_V0)),
            "params_n": B.SimHist(B.PARAMS_N),
            "request_preemptions": B.SimHist(B.PREEMPTIONS),
            "http_e2e": B.SimHist(B.HTTP_HIGHR),
        }

    # -- public state ---------------------------------------------------------
    @property
    def free(self) -> int:
        return self.total - self.used

    @property
    def kv_usage(self) -> float:
        """vLLM's block_pool.get_usage(): evictable prefix-cache blocks count as free."""
        return self.used / self.total if self.total else 0.0

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def add(self, req: Request) -> None:
        """Route a request here; it joins the waiting queue at req.engine_arrival."""
        self.incoming.append(req)

    def owned_blocks(self) -> int:
        """Blocks held, recomputed request by request (the invariant check: == self.used)."""
        n: int = sum(p[0] for p in self.prefixes.values() if p[1] > 0)
        for r in self.running.values():
            if r.decoding:
                n += self._blocks(r.kv_offset + self.d) - r.shared
            else:
                n += r.own_blocks
        return n

    def in_flight(self) -> int:
        return len(self.running) + len(self.waiting) + len(self.incoming)

    # -- time -------------------------------------------------------------------
    def advance_to(self, t: float) -> None:
        """Run engine steps until the engine clock reaches `t` (a step may end a little after)."""
        while self.now < t:
            self._arrivals()
            if self.now >= self._abort_check:
                self._abort_stale()
            if not self.running:
                if not self.waiting:
                    nxt = self.incoming[0].engine_arrival if self.incoming else t
                    self._idle(min(max(nxt, self.now), t))
                    continue
            elif not self.prefilling and self._admission_blocked():
                k, dt = self._macro_k(t)
                if k >= 2:
                    self._macro_decode(k, dt)
                    continue
            if not self._step():
                # nothing schedulable (should not happen with a valid pool): let time pass, never spin
                nxt = self.incoming[0].engine_arrival if self.incoming else t
                self._idle(min(max(nxt, self.now + 1e-3), t))

    def _idle(self, until: float) -> None:
        if until > self.now:
            self.activity *= math.exp(-(until - self.now) / UTIL_TAU_S)
            self.now = until

    def _arrivals(self) -> None:
        inc = self.incoming
        while inc and inc[0].engine_arrival <= self.now:
            r = inc.popleft()
            r.target = r.prompt
            self.waiting.append(r)

    def _abort_stale(self) -> None:
        """Clients give up on requests that never started within client_timeout_s."""
        self._abort_check = self.now + 1.0
        limit = self.now - self.client_timeout_s
        if not self.waiting or all(r.arrival > limit or r.scheduled_ts is not None for r in self.waiting):
            return
        keep: deque[Request] = deque()
        for r in self.waiting:
            if r.scheduled_ts is None and r.arrival <= limit:
                self.c.success["abort"] += 1
            else:
                keep.append(r)
        self.waiting = keep

    # -- blocks -----------------------------------------------------------------
    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.bs)

    def _alloc(self, n: int) -> None:
        self.used += n
        if self.evictable > self.total - self.used:
            self._evict()

    def _evict(self) -> None:
        """Reuse evictable prefix blocks, least recently used first."""
        idle = sorted((p[2], pid) for pid, p in self.prefixes.items() if p[1] == 0)
        for _, pid in idle:
            if self.evictable <= self.total - self.used:
                break
            self.evictable -= self.prefixes.pop(pid)[0]

    def _release_prefix(self, r: Request) -> None:
        if r.shared:
            p = self.prefixes[r.prefix]
            p[1] -= 1
            if p[1] == 0:
                self.used -= p[0]
                self.evictable += p[0]
                p[2] = self.now
            r.shared = 0

    # -- scheduling -----------------------------------------------------------
    def _admission_blocked(self) -> bool:
        """True when the waiting head cannot be admitted and pure decode cannot change that."""
        if not self.waiting:
            return True
        if len(self.running) >= self.args.seqs:
            return True
        budget = self.args.batched_tokens - self.n_dec
        return budget <= 0 or self._admit_plan(self.waiting[0], budget) is None  # free only shrinks

    def _preempt_newest(self) -> Request:
        rid, v = self.running.popitem()
        if v.decoding:
            kv = v.kv_offset + self.d
            if self._grown and (-v.kv_offset) % self.bs == self.d % self.bs:
                kv += 1  # got its block for this step already
            self.used -= self._blocks(kv) - v.shared
            self.n_dec -= 1
            self.phase[(-v.kv_offset) % self.bs] -= 1
            self.sum_off -= v.kv_offset
            v.decoding = False
            v.last_token_ts = self.now
        else:
            self.used -= v.own_blocks
            del self.prefilling[rid]
        self._release_prefix(v)
        v.own_blocks = 0
        v.computed = 0
        v.target = v.prompt + v.generated
        v.preemptions += 1
        self.c.preemptions += 1
        if self.on_preempt is not None and (self.c.preemptions - 1) % PREEMPT_LOG_EVERY == 0:
            self.on_preempt(self, v)  # vLLM's scheduler warns on its 1st, 51st, 101st ... preemption
        self.waiting.appendleft(v)
        return v

    def _admit_plan(self, r: Request, budget: int) -> tuple[int, int, int, int] | None:
        """(cached tokens, chunk, own blocks, prefix blocks) to admit r now, None if it cannot."""
        cached, pblocks, extra = 0, 0, 0
        if self.args.enable_prefix_caching and r.prefix >= 0:
            pblocks = r.prefix_len // self.bs
        if pblocks:
            p = self.prefixes.get(r.prefix)
            if p is None:
                extra = pblocks  # computed by this request, then shared
            else:
                cached = min(pblocks * self.bs, r.target - 1)  # the last token is always computed
                if p[1] == 0:
                    extra = p[0]  # evictable blocks become held again
        remaining = r.target - cached
        if not self.args.enable_chunked_prefill and remaining > budget:
            return None
        chunk = min(remaining, budget)
        own = max(0, self._blocks(cached + chunk) - pblocks)
        if own + extra > self.free:
            return None
        return cached, chunk, own, pblocks

    def _try_admit(self, r: Request, budget: int) -> int:
        """Admit the waiting head if it fits; returns the tokens scheduled (0 = blocked)."""
        plan = self._admit_plan(r, budget)
        if plan is None:
            return 0
        cached, chunk, own, pblocks = plan
        self.waiting.popleft()
        if pblocks:
            p = self.prefixes.get(r.prefix)
            if p is None:
                self.prefixes[r.prefix] = [pblocks, 1, self.now]
                self._alloc(pblocks)
            elif p[1] == 0:
                self.evictable -= p[0]
                p[1], p[2] = 1, self.now
                self._alloc(p[0])
            else:
                p[1] += 1
                p[2] = self.now
        self._alloc(own)
        r.shared, r.own_blocks = pblocks, own
        r.computed = cached + chunk
        self.c.prefix_queries += r.target
        self.c.prefix_hits += cached
        if r.scheduled_ts is None:
            r.scheduled_ts = self.now
            r.cached_first = cached
            self.h["queue_time"].observe(self.now - r.engine_arrival)
        self.running[r.rid] = r
        self.prefilling[r.rid] = r
        return chunk

    def _step(self) -> bool:
        """One scheduler step; False when it neither scheduled nor preempted anything."""
        a = self.args
        budget = a.batched_tokens
        preempted = False
        # 1. decodes: every decoder needing a new block this step gets one, or the newest goes
        slot = self.d % self.bs
        while self.n_dec and self.phase[slot] > self.free:
            self._preempt_newest()
            preempted = True
        if self.n_dec:
            self._alloc(self.phase[slot])
        self._grown = True
        n_dec = self.n_dec
        budget -= n_dec
        # 2. partial prefills, oldest first
        prefill_tokens, ctx = 0, 0
        chunks: list[tuple[Request, int]] = []
        for r in list(self.prefilling.values()):
            if budget <= 0:
                break
            if r.rid not in self.prefilling:
                continue  # preempted earlier in this loop
            rem = r.target - r.computed
            if rem <= 0:
                continue
            if not a.enable_chunked_prefill and rem > budget:
                continue
            chunk = min(rem, budget)
            need = max(0, self._blocks(r.computed + chunk) - r.shared - r.own_blocks)
            while need > self.free and r.rid in self.running:
                self._preempt_newest()
                preempted = True
            if r.rid not in self.running:
                continue
            self._alloc(need)
            r.own_blocks += need
            ctx += r.computed
            r.computed += chunk
            budget -= chunk
            prefill_tokens += chunk
            chunks.append((r, chunk))
        # 3. new and resumed requests, only when nothing was preempted in this step
        if not preempted:
            while self.waiting and len(self.running) < a.seqs and budget > 0:
                r = self.waiting[0]
                got = self._try_admit(r, budget)
                if not got:
                    break
                budget -= got
                prefill_tokens += got
                ctx += r.computed - got
                chunks.append((r, got))
        self._grown = False
        n_dec = self.n_dec  # preemptions may have removed decoders
        tokens = n_dec + prefill_tokens
        if tokens == 0:
            return preempted
        ctx += self.sum_off + n_dec * self.d
        dt, act = self._step_time(tokens, ctx, len(self.running))
        self._account(dt, act, tokens, 1)
        end = self.now
        # decode results
        if n_dec:
            self.c.generation_tokens += n_dec
            self.h["itl"].observe(dt, n_dec)
        self.d += 1
        # prefill completions: sample a token
        for r, _chunk in chunks:
            if r.rid not in self.prefilling or r.computed < r.target:
                continue
            del self.prefilling[r.rid]
            self._prefill_done(r, end)
        self._finish_due(end)
        if self.on_step is not None:
            self.on_step(self, tokens, 1)
        return True

    def _prefill_done(self, r: Request, end: float) -> None:
        r.generated += 1
        self.c.generation_tokens += 1
        if r.first_token_ts is None:
            r.first_token_ts = end
            self.h["ttft"].observe(end - r.arrival)
            self.c.prompt_tokens += r.prompt
            self.c.prompt_cached += r.cached_first
            self.c.prompt_local += r.prompt - r.cached_first
            self.h["prefill_kv_computed"].observe(max(1, r.prompt - r.cached_first))
        else:
            self.h["itl"].observe(end - r.last_token_ts)  # the gap a preemption caused
        r.last_token_ts = end
        if r.generated >= r.out_target:
            self.used -= r.own_blocks
            r.own_blocks = 0
            del self.running[r.rid]
            self._finish(r, end)
            return
        # join the decode aggregate: KV tokens = kv_offset + d from here on
        kv = r.target
        self.used -= r.own_blocks
        r.own_blocks = 0
        r.kv_offset = kv - self.d
        r.decoding = True
        self.used += self._blocks(kv) - r.shared
        self.n_dec += 1
        self.phase[(-r.kv_offset) % self.bs] += 1
        self.sum_off += r.kv_offset
        r.finish_d = self.d + (r.out_target - r.generated)
        heapq.heappush(self.heap, (r.finish_d, r.rid))

    def _finish_due(self, end: float) -> None:
        heap = self.heap
        while heap and heap[0][0] <= self.d:
            fd, rid = heapq.heappop(heap)
            r = self.running.get(rid)
            if r is None or not r.decoding or r.finish_d != fd:
                continue  # preempted since (stale entry)
            del self.running[rid]
            self.used -= self._blocks(r.kv_offset + self.d) - r.shared
            self.n_dec -= 1
            self.phase[(-r.kv_offset) % self.bs] -= 1
            self.sum_off -= r.kv_offset
            r.decoding = False
            r.generated = r.out_target
            self._finish(r, end)

    def _finish(self, r: Request, end: float) -> None:
        self._release_prefix(r)
        h = self.h
        self.c.success[r.finish_reason] += 1
        e2e = end - r.arrival
        h["e2e"].observe(e2e)
        h["http_e2e"].observe(e2e)
        sched = r.scheduled_ts if r.scheduled_ts is not None else end
        first = r.first_token_ts if r.first_token_ts is not None else end
        h["inference_time"].observe(end - sched)
        h["prefill_time"].observe(first - sched)
        h["decode_time"].observe(end - first)
        h["tpot"].observe((end - first) / (r.out_target - 1) if r.out_target > 1 else 0.0)
        h["prompt_len"].observe(r.prompt)
        h["gen_len"].observe(r.out_target)
        h["max_gen"].observe(r.max_tokens)
        h["max_tokens"].observe(r.max_tokens)
        h["params_n"].observe(1)
        h["request_preemptions"].observe(r.preemptions)

    # -- pure-decode stretches --------------------------------------------------
    def _macro_k(self, t: float) -> tuple[int, float]:
        """How many decode-only steps can run with nothing changing but token counts."""
        n = self.n_dec
        ctx = self.sum_off + n * self.d
        dt, _ = self._step_time(n, ctx, len(self.running))
        limit = t
        if self.incoming:
            limit = min(limit, self.incoming[0].engine_arrival)
        limit = min(limit, self._abort_check)
        k = min(MACRO_MAX, math.ceil((limit - self.now) / dt) if limit > self.now else 1)
        if self.heap:
            k = min(k, max(1, self.heap[0][0] - self.d))
        # blocks: each run of bs steps costs exactly n blocks
        free = self.free
        full = (free // n) * self.bs if n else k
        if full < k:
            j, rest = full, free - (full // self.bs) * n
            while j < k:
                need = self.phase[(self.d + j) % self.bs]
                if need > rest:
                    break
                rest -= need
                j += 1
            k = j
        if k >= 2:
            dt, _ = self._step_time(n, ctx + n * (k - 1) // 2, len(self.running))
        return k, dt

    def _macro_decode(self, k: int, dt: float) -> None:
        n = self.n_dec
        need, d0, bs, ph = 0, self.d, self.bs, self.phase
        cycles, rem = divmod(k, bs)
        need = cycles * n + sum(ph[(d0 + j) % bs] for j in range(rem))
        self._alloc(need)
        _, act = self._step_time(n, self.sum_off + n * (d0 + k // 2), len(self.running))
        self._account(dt * k, act, n, k)
        self.c.generation_tokens += n * k
        self.h["itl"].observe(dt, n * k)
        self.d += k
        self._finish_due(self.now)
        if self.on_step is not None:
            self.on_step(self, n, k)

    # -- cost model -------------------------------------------------------------
    def _step_time(self, tokens: int, ctx_tokens: int, seqs: int) -> tuple[float, float]:
        """Roofline step time (s) and the share of it the SMs spend on math (0..1)."""
        compute = tokens * self._flops_per_token / self.gpu.flops
        memory = self._weight_read_s + ctx_tokens * self._kv_read_s_per_token
        busy = max(compute, memory)
        base = self._overhead_s + 6e-6 * seqs
        act = min(1.0, (compute + 0.3 * memory) / (base + busy))
        return (base + busy) * self.slowdown, act

    def _account(self, dt: float, act: float, tokens: int, steps: int) -> None:
        self.now += dt
        w = 1.0 - math.exp(-dt / UTIL_TAU_S)
        self.activity += (act - self.activity) * w
        self.c.steps += steps
        self.h["iteration_tokens"].observe(tokens, steps)

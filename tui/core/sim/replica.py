"""One simulated vLLM server (pod): API-server front end, its engine core(s), its GPU(s), its log.

Lifecycle as in a pod: `loading` (weights load and profiling take simulated minutes; /health
answers 503), then `ready`, or `failed` with vLLM's start-up error when the engine args cannot
work on this GPU. The front end is one CPU core serving requests in order (tokenization, chat
template, detokenization); when it saturates, requests wait before ever reaching the engine,
which is what a host-bound server looks like.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, replace

from .args import EngineArgs
from .engine import Engine
from .hardware import GiB, GpuSpec, KvPlan, ModelSpec, plan_kv
from .workload import Request

LOADING, READY, FAILED = "loading", "ready", "failed"
LOG_EVERY_S = 10.0  # vLLM's periodic stats line
IDLE_CPU_CORES = 0.02  # health checks, scrapes, the event loop


@dataclass(slots=True)
class Node:
    """A simulated GPU node; faults belong to the node, so a replica moved elsewhere recovers."""

    name: str
    throttle_mask: int = 0  # DCGM clock-event reasons (0x40 = hw_thermal_slowdown)
    slowdown: float = 1.0  # step-time factor while throttled
    xid: int = 0
    ecc_dbe: int = 0


@dataclass(slots=True)
class Gpu:
    index: int
    uuid: str
    pci_bus_id: str


def fmt_ts(t: float) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.gmtime(t))


class Replica:
    def __init__(self, name: str, group: str, model: ModelSpec, gpu: GpuSpec, args: EngineArgs, *,
                 t0: float, load_s: float = 0.0, v0: bool = False, node: Node | None = None,
                 namespace: str = "inference", gpu_offset: int = 0, sglang: bool = False) -> None:
        self.name, self.group, self.model, self.gpu_spec = name, group, model, gpu
        self.args = args
        self.v0 = v0
        self.sglang = sglang  # serves SGLang's metric names and log lines (same scheduler model)
        self.node = node or Node("gpu-node-0")
        self.namespace = namespace
        self.created = t0
        self.ready_at = t0 + load_s
        self.now = t0
        self.state = LOADING
        self.error: str | None = None
        self.in_rotation = True
        self.engines: list[Engine] = []
        self.log: deque[str] = deque(maxlen=500)
        self.version = 0  # bumped whenever state moves on, for page caching
        self._rr = 0
        self._fe_free = t0  # the front end is busy until then
        self._fe_work = 0.0  # front-end CPU seconds scheduled so far
        self._next_log = t0 + LOG_EVERY_S
        self._log_prev = (0, 0, 0, 0, 0)
        self._preempt_warnings: list[tuple[float, int, int, int]] = []  # (time, engine, request, total)
        self.last_throughput = (0.0, 0.0)  # prompt, generation tokens/s over the last log interval
        self.resolved, self.plan = self._plan(args)
        n_gpus = max(1, self.resolved.tensor_parallel_size) * max(1, self.resolved.data_parallel_size)
        self.gpus = [Gpu(i, _uuid(name, i), f"00000000:{0x18 + gpu_offset + i:02X}:00.0") for i in range(n_gpus)]
        self._log("INFO", "api_server.py:1043", "SGLang server version 0.5.1" if sglang else
                  "vLLM API server version 0.10.1" if not v0 else "vLLM API server version 0.6.3")
        self._log("INFO", "utils.py:326", f"non-default args: {{'model': '{model.name}', " + ", ".join(
            f"'{k}': {v!r}" for k, v in args.as_dict().items() if v is not None and v != getattr(EngineArgs(), k)) + "}")
        if self.error is None and load_s <= 0:
            self._start_engines()
        elif self.error is not None and self._early_error:
            self._fail()

    # -- lifecycle --------------------------------------------------------------
    def _plan(self, args: EngineArgs) -> tuple[EngineArgs, KvPlan | None]:
        self._early_error = False
        resolved = args.resolved(self.gpu_spec.large)
        resolved = replace(resolved, max_model_len=resolved.max_model_len or self.model.context)
        try:
            resolved.validate()
        except ValueError as e:
            self.error = f"ValueError: {e}"
            self._early_error = True
            return resolved, None
        plan = plan_kv(resolved, self.model, self.gpu_spec)
        self.error = plan.error
        return resolved, plan

    def _start_engines(self) -> None:
        assert self.plan is not None
        p = self.plan
        load_s = max(1.0, self.ready_at - self.created)
        self._log("INFO", "gpu_model_runner.py:1892",
                  f"Model loading took {p.weight_bytes / GiB:.2f} GiB and {load_s:.1f} seconds")
        self._log("INFO", "gpu_worker.py:276", f"Available KV cache memory: {p.num_gpu_blocks * p.block_bytes / GiB:.2f} GiB")
        if self.v0:
            self._log("INFO", "executor_base.py:89", f"# GPU blocks: {p.num_gpu_blocks}, # CPU blocks: {self.num_cpu_blocks}")
        self._log("INFO", "kv_cache_utils.py:849", f"GPU KV cache size: {p.kv_cache_size_tokens:,} tokens")
        self._log("INFO", "kv_cache_utils.py:853", f"Maximum concurrency for {p.max_model_len:,} tokens per request: "
                  f"{p.max_concurrency:.2f}x")
        self.engines = [Engine(self.resolved, self.model, self.gpu_spec, p, i, self.now)
                        for i in range(max(1, self.resolved.data_parallel_size))]
        for e in self.engines:
            e.slowdown = self.node.slowdown
            if not self.sglang:  # (SGLang's retraction warning is its scheduler summary's)
                e.on_preempt = self._preempted
        self.state = READY
        self.ready_at = self.now
        self._log("INFO", "launcher.py:29", "Route: /metrics, Methods: GET")
        self._log("INFO", "on.py:62", "Application startup complete.")

    def _fail(self) -> None:
        self.state = FAILED
        self._log("ERROR", "core.py:700", "EngineCore failed to start.")
        self._log("ERROR", "core.py:700", self.error or "unknown error")
        self._log("ERROR", "core_client.py:562",
                  "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")

    @property
    def num_cpu_blocks(self) -> int:
        if self.plan is None:
            return 0
        swap = self.resolved.swap_space if self.resolved.swap_space is not None else 4
        return int(swap * GiB) // self.plan.block_bytes

    # -- traffic ----------------------------------------------------------------
    def submit(self, req: Request) -> bool:
        """The API server takes a request; False if refused (not ready, or too long for the model)."""
        if self.state != READY or self.plan is None:
            return False
        max_len = self.plan.max_model_len
        if req.prompt >= max_len:
            return False  # HTTP 400: prompt longer than max_model_len
        if req.prompt + req.max_tokens > max_len:
            req.max_tokens = max_len - req.prompt
            req.out_target = min(req.out_target, req.max_tokens)
        start = max(req.arrival, self._fe_free)
        done = start + req.cpu_s
        if done - req.arrival > self.engines[0].client_timeout_s:
            return False  # the client gives up before tokenization finishes
        self._fe_free = done
        self._fe_work += req.cpu_s
        req.engine_arrival = done
        e = self.engines[self._rr % len(self.engines)]
        self._rr += 1
        e.add(req)
        return True

    def advance_to(self, t: float) -> None:
        if t <= self.now:
            return
        if self.state == LOADING and t >= self.ready_at:
            self.now = self.ready_at
            if self.error is not None:
                self._fail()
            else:
                self._start_engines()
        for e in self.engines:
            e.slowdown = self.node.slowdown
            e.advance_to(t)
        self.now = t
        if self.state == READY:
            # the preemption warnings of this advance, in time order with the stats lines
            warn, self._preempt_warnings = sorted(self._preempt_warnings), []
            i = 0
            while self._next_log <= t:
                while i < len(warn) and warn[i][0] <= self._next_log:
                    self._preempt_warning(*warn[i])
                    i += 1
                self._stats_log(self._next_log)
                self._next_log += LOG_EVERY_S
            for w in warn[i:]:
                self._preempt_warning(*w)
        self.version += 1

    def _stats_log(self, at: float) -> None:
        c = [e.c for e in self.engines]
        cur = (sum(x.prompt_tokens for x in c), sum(x.generation_tokens for x in c), sum(x.preemptions for x in c),
               sum(x.prefix_queries for x in c), sum(x.prefix_hits for x in c))
        d = [a - b for a, b in zip(cur, self._log_prev, strict=True)]
        self._log_prev = cur
        self.last_throughput = (d[0] / LOG_EVERY_S, d[1] / LOG_EVERY_S)
        hit = f", Prefix cache hit rate: {100.0 * d[4] / d[3]:.1f}%" if d[3] else ""
        pre = f", Preemptions: {d[2]}" if d[2] and not self.v0 else ""
        if self.v0:
            e = self.engines[0]
            self._log("INFO", "metrics.py:351",
                      f"Avg prompt throughput: {d[0] / LOG_EVERY_S:.1f} tokens/s, Avg generation throughput: "
                      f"{d[1] / LOG_EVERY_S:.1f} tokens/s, Running: {e.num_running} reqs, Swapped: 0 reqs, "
                      f"Pending: {e.num_waiting} reqs, GPU KV cache usage: {100.0 * e.kv_usage:.1f}%, "
                      "CPU KV cache usage: 0.0%.", at)
        for e in self.engines if not (self.v0 or self.sglang) else ():
            self._log("INFO", "loggers.py:123",
                      f"Engine {e.index:03d}: Avg prompt throughput: {d[0] / LOG_EVERY_S:.1f} tokens/s, "
                      f"Avg generation throughput: {d[1] / LOG_EVERY_S:.1f} tokens/s, Running: {e.num_running} reqs, "
                      f"Waiting: {e.num_waiting} reqs{pre}, GPU KV cache usage: {100.0 * e.kv_usage:.1f}%{hit}", at)
        if self.sglang:
            self._sglang_log(d, at)
            return

    def _preempted(self, e: Engine, req: Request) -> None:
        self._preempt_warnings.append((e.now, e.index, req.rid, e.c.preemptions))

    def _preempt_warning(self, at: float, engine: int, rid: int, total: int) -> None:
        """vLLM's warning on a preemption (its scheduler logs every 50th): V0's words, or early
        V1's from the engine core process (the newest V1 only counts them in its stats line)."""
        why = ("because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
               "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
               f"total_num_cumulative_preemption={total}")
        if self.v0:
            self._log("WARNING", "scheduler.py:1560",
                      f"Sequence group {rid} is preempted by PreemptionMode.RECOMPUTE mode {why}", at)
        else:
            self._log("WARNING", "scheduler.py:262", f"request {rid} is preempted by RECOMPUTE mode {why}", at,
                      proc=f"(EngineCore_DP{engine} pid={100 + engine}) ")

    def _sglang_log(self, d: list[int], at: float) -> None:
        """SGLang's scheduler lines: the decode-batch summary, and the retraction warning."""
        for e in self.engines:
            self._log("INFO", "scheduler.py:1672",
                      f"Decode batch. #running-req: {e.num_running}, #token: {e.used * e.bs}, "
                      f"token usage: {e.kv_usage:.2f}, gen throughput (token/s): {d[1] / LOG_EVERY_S:.2f}, "
                      f"#queue-req: {e.num_waiting}", at)
        if d[2]:
            self._log("WARNING", "scheduler.py:1489",
                      f"KV cache pool is full. Retract requests. #retracted_reqs: {d[2]}", at)

    def _log(self, level: str, where: str, text: str, at: float | None = None, proc: str | None = None) -> None:
        if proc is None:
            proc = "(APIServer pid=1) " if not (self.v0 or self.sglang) else ""
        self.log.append(f"{proc}{level} {fmt_ts(self.now if at is None else at)} [{where}] {text}")

    # -- observed state ---------------------------------------------------------
    def throughput(self) -> tuple[float, float]:
        return self.last_throughput

    @property
    def ready(self) -> bool:
        return self.state == READY

    def cpu_seconds(self) -> float:
        """process_cpu_seconds_total of the API server at the replica's clock."""
        busy = self._fe_work - max(0.0, self._fe_free - self.now)
        return IDLE_CPU_CORES * (self.now - self.created) + busy

    def frontend_backlog_s(self) -> float:
        return max(0.0, self._fe_free - self.now)

    def load(self) -> tuple[int, int]:
        """(running, waiting) summed over engines, as the metrics show them."""
        return sum(e.num_running for e in self.engines), sum(e.num_waiting for e in self.engines)

    def in_flight(self) -> int:
        """Requests accepted and not finished, including those still in the front end."""
        return sum(e.in_flight() for e in self.engines)

    @property
    def activity(self) -> float:
        return max((e.activity for e in self.engines), default=0.0)

    def gpu_memory_used_bytes(self) -> int:
        """Per GPU: vLLM holds weights + the whole KV pool + activations once up."""
        if self.plan is None or self.state == FAILED:
            return 0
        if self.state == LOADING:
            span = max(1e-9, self.ready_at - self.created)
            return int(self.plan.weight_bytes * min(1.0, max(0.0, (self.now - self.created) / span)))
        return self.plan.used_bytes


def _uuid(name: str, i: int) -> str:
    import hashlib

    h = hashlib.sha1(f"{name}/{i}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


__all__ = ["Replica", "Node", "Gpu", "LOADING", "READY", "FAILED"]

"""SimFleet: simulated vLLM replicas serving real-format pages on 127.0.0.1, stepped in one thread.

The fleet owns one background thread with its own asyncio loop: it serves every replica's HTTP
port and advances the simulation to `clock()` about 20 times a second, so the Textual app's loop
stays free. Everything else (targets, the cluster-facing methods the simulated Kubernetes uses)
is thread-safe behind one lock. Without `start()` the fleet can be stepped synchronously with
`advance()`, which is how the model tests run (fast and deterministic).
"""

from __future__ import annotations

from typing import Any, Callable, Coroutine

import asyncio
import random
import sys
import threading
import time
from dataclasses import dataclass, replace

from ..engines.vllm import ENGINE as VLLM
from . import scenarios as S
from .args import EngineArgs
from .exposition import CONTENT_TYPE, PageRenderer, render_dcgm
from .hardware import GPUS, MODELS, KvPlan, plan_kv
from .replica import FAILED, LOADING, READY, Node, Replica
from .server import HttpServer
from .workload import Request, Workload

TICK_S = 0.05  # wall seconds between simulation steps in the background thread
DEFAULT_LOAD_S = 120.0  # simulated seconds to load weights and profile before /health is 200


@dataclass(frozen=True, slots=True)
class SimTarget:
    name: str
    url: str  # base URL, "" when the fleet is not serving
    metrics_url: str
    gpu_url: str  # the replica's DCGM exporter page
    group: str


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    name: str
    group: str
    state: str  # "loading", "ready", "failed"
    error: str | None
    in_rotation: bool
    node: str
    created: float
    ready_at: float
    running: int
    waiting: int


class _Group:
    """One Deployment's traffic: its own arrival stream and router."""

    def __init__(self, name: str, dep: S.Deployment, base: int, v0: bool, seed: int, sglang: bool = False) -> None:
        self.name, self.dep, self.base, self.v0, self.sglang = name, dep, base, v0, sglang
        self.workload = Workload(seed)
        self.router = random.Random(seed + 7919)
        self.next_t = float("inf")
        self.next_shape: S.Shape | None = None
        self.dropped = 0  # arrivals with no replica in rotation (the gateway's 503s)


class _Served:
    __slots__ = ("replica", "renderer", "server", "url")

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.renderer = PageRenderer(replica)
        self.server: HttpServer | None = None
        self.url = ""


class SimFleet:
    def __init__(self, scenario: str = "steady", replicas: int = 4, speed: float = 1.0, seed: int = 0,
                 v0_replicas: int = 0, host: str = "127.0.0.1", base_port: int = 0,
                 namespace: str = "inference", start_time: float | None = None, sglang_replicas: int = 0) -> None:
        if not isinstance(replicas, int) or replicas < 1 or replicas > 4096:
            raise ValueError(f"replicas must be an integer in 1..4096, got {replicas!r}")
        if not isinstance(v0_replicas, int) or not 0 <= v0_replicas <= replicas:
            raise ValueError(f"v0_replicas must be in 0..{replicas}, got {v0_replicas!r}")
        if not isinstance(sglang_replicas, int) or not 0 <= sglang_replicas <= 4096:
            raise ValueError(f"sglang_replicas must be in 0..4096, got {sglang_replicas!r}")
        if not speed > 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.scenario = S.get(scenario)
        self.speed = float(speed)
        self.seed = seed
        self.host = host
        self.base_port = base_port
        self.namespace = namespace
        self.t0 = time.time() if start_time is None else float(start_time)
        self._now = self.t0  # simulated time stepped so far
        self._lock = threading.RLock()
        self._served: dict[str, _Served] = {}
        self._nodes: dict[str, Node] = {}
        self._groups: dict[str, _Group] = {}
        self._replacing: list[list[Any]] = []  # [old, new, grace_s, drain_since or None]
        self._faults_applied: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping = False
        self._mono0: float | None = None
        self._clock0 = self.t0  # simulated time when stepping in the thread began
        self.errors: list[str] = []  # stepping errors (kept, never raised into the app)

        dep = self.scenario.deployment
        self._initial = replicas
        n1 = replicas - v0_replicas
        if n1:
            self._add_group(dep.group, dep, n1, False)
        if v0_replicas:
            # V0 replicas run with vLLM V0's own defaults, as V0 pods without those flags do.
            v0_args = replace(dep.args, gpu_memory_utilization=VLLM.default("gpu-memory-utilization", "v0"),
                              enable_prefix_caching=VLLM.default("enable-prefix-caching", "v0"))
            v0dep = replace(dep, group=dep.group + "-v0", args=v0_args)
            self._add_group(v0dep.group, v0dep, v0_replicas, True)
        if sglang_replicas:
            # SGLang replicas are a Deployment of their own beside the vLLM ones (a mixed fleet),
            # fed the same traffic: the same scheduler model, SGLang's names on the page.
            sgdep = replace(dep, group=dep.group + "-sglang")
            self._add_group(sgdep.group, sgdep, sglang_replicas, False, sglang=True)
        for g in list(self._groups.values()):
            for i in range(g.base):
                self._new_replica(f"{g.name}-{i}", g, g.dep.args, load_s=0.0)
            self._schedule_next(g, self.t0)

    # -- construction -------------------------------------------------------------
    def _add_group(self, name: str, dep: S.Deployment, base: int, v0: bool, sglang: bool = False) -> _Group:
        g = _Group(name, dep, base, v0, self.seed * 1009 + len(self._groups) * 101 + 1, sglang)
        self._groups[name] = g
        return g

    def _pick_node(self, want: str | None) -> Node:
        if want:
            return self._nodes.setdefault(want, Node(want))
        busy = {s.replica.node.name for s in self._served.values()}
        for n in self._nodes.values():
            if n.name not in busy and n.throttle_mask == 0 and n.xid == 0 and n.ecc_dbe == 0:
                return n
        name = f"gpu-node-{len(self._nodes)}"
        return self._nodes.setdefault(name, Node(name))

    def _new_replica(self, name: str, g: _Group, args: EngineArgs, load_s: float, node: str | None = None,
                     model: str | None = None, gpu: str | None = None) -> _Served:
        if name in self._served:
            raise ValueError(f"replica {name!r} already exists")
        model_spec = MODELS[model or g.dep.model]
        gpu_spec = GPUS[gpu or g.dep.gpu]
        r = Replica(name, g.name, model_spec, gpu_spec, args, t0=self._now, load_s=load_s, v0=g.v0,
                    node=self._pick_node(node), namespace=self.namespace, gpu_offset=len(self._served) % 64,
                    sglang=g.sglang)
        for e in r.engines:
            e.client_timeout_s = self.scenario.client_timeout_s
        s = self._served[name] = _Served(r)
        return s

    # -- clock and stepping -------------------------------------------------------
    def clock(self) -> float:
        """Simulated unix seconds: wall time at start + speed x elapsed wall time."""
        if self._mono0 is None:
            return self._now
        return self._clock0 + self.speed * (time.monotonic() - self._mono0)

    def advance(self, seconds: float, tick: float = 0.5) -> None:
        """Step the simulation synchronously (fleet not started): for tests and tools."""
        if self._thread is not None:
            raise RuntimeError("the fleet is running in its thread; it advances by itself")
        end = self._now + seconds
        while self._now < end - 1e-9:
            self.step_to(min(end, self._now + tick))

    def step_to(self, t: float) -> None:
        with self._lock:
            for s in self._begin_tick(t):
                self._advance_one(s, t)
            self._now = max(self._now, t)

    def _begin_tick(self, t: float) -> list[_Served]:
        """Arrivals, faults and rollouts up to t; returns the replicas to advance."""
        with self._lock:
            self._route(t)
            self._apply_faults(t)
            self._rollouts(t)
            return list(self._served.values())

    def _advance_one(self, s: _Served, t: float) -> None:
        r = s.replica
        was = r.state
        try:
            r.advance_to(t)
        except Exception as e:  # a model bug must not kill the fleet thread
            self.errors.append(f"{r.name}: {type(e).__name__}: {e}")
            del self.errors[:-20]
        if was == LOADING and r.state == READY:
            for eng in r.engines:
                eng.client_timeout_s = self.scenario.client_timeout_s

    def _schedule_next(self, g: _Group, after: float) -> None:
        sc, cur = self.scenario, after
        while True:
            rel = cur - self.t0
            ph = sc.phase_at(rel)
            change = self.t0 + sc.next_change(rel)
            gap = g.workload.gap(ph.rate * g.base)
            if cur + gap < change:
                g.next_t, g.next_shape = cur + gap, ph.shape
                return
            if change == float("inf"):
                g.next_t = float("inf")
                return
            cur = change

    def _route(self, t: float) -> None:
        for g in self._groups.values():
            while g.next_t <= t:
                if g.next_shape is None:  # scheduled without a phase: nothing arrives
                    break
                req = g.workload.request(g.next_t, g.next_shape)
                self._dispatch(g, req)
                self._schedule_next(g, g.next_t)

    def _dispatch(self, g: _Group, req: Request) -> None:
        pool = [s.replica for s in self._served.values()
                if s.replica.group == g.name and s.replica.in_rotation and s.replica.state == READY]
        if not pool or not g.router.choice(pool).submit(req):
            g.dropped += 1

    def _apply_faults(self, t: float) -> None:
        for i, f in enumerate(self.scenario.faults):
            if i in self._faults_applied or t - self.t0 < f.start_s:
                continue
            self._faults_applied.add(i)
            n = self._nodes.get(f"gpu-node-{min(f.node, self._initial - 1)}")  # 1 replica: it gets the fault
            if n is not None:
                n.throttle_mask, n.slowdown, n.xid, n.ecc_dbe = f.throttle_mask, f.slowdown, f.xid, f.ecc_dbe

    def _rollouts(self, t: float) -> None:
        for item in list(self._replacing):
            old, new, grace, since = item
            so, sn = self._served.get(old), self._served.get(new)
            if so is None:
                self._replacing.remove(item)
                continue
            if sn is None or sn.replica.state == FAILED:
                continue  # the rollout is stuck; the old replica keeps serving
            if sn.replica.state != READY:
                continue
            if since is None:
                so.replica.in_rotation = False
                item[3] = t
                continue
            if so.replica.in_flight() == 0 or t - since >= grace:
                self._replacing.remove(item)
                self._drop(old)

    def _drop(self, name: str) -> None:
        """Remove a replica from inside the fleet thread (or offline)."""
        s = self._served.pop(name, None)
        if s is not None and s.server is not None and self._loop is not None:
            self._loop.create_task(s.server.stop())

    # -- HTTP -------------------------------------------------------------------------
    def _route_fn(self, s: _Served) -> Callable[[str], tuple[int, str, bytes]]:
        def route(path: str) -> tuple[int, str, bytes]:
            with self._lock:
                r = s.replica
                if path in s.renderer.scrapes:
                    s.renderer.scrapes[path] += 1
                if path == "/metrics":
                    if r.state == READY:
                        return 200, CONTENT_TYPE, s.renderer.render().encode()
                    return 503, "text/plain", _unready(r).encode()
                if path == "/health":
                    return (200, "text/plain", b"") if r.state == READY else (503, "text/plain", _unready(r).encode())
                if path in ("/dcgm", "/gpu"):
                    return 200, CONTENT_TYPE, render_dcgm(r).encode()
                if path == "/version":
                    return 200, "application/json", b'{"version":"%s"}' % (b"0.6.3" if r.v0 else b"0.10.1")
                return 404, "text/plain", b"not found\n"
        return route

    async def _serve(self, s: _Served, port: int = 0) -> None:
        srv = HttpServer(self._route_fn(s), self.host, port)
        p = await srv.start()
        s.server = srv
        s.url = f"http://{self.host}:{p}"

    async def _main(self) -> None:
        try:
            for i, s in enumerate(list(self._served.values())):
                await self._serve(s, self.base_port + i if self.base_port else 0)
        except Exception as e:
            self.errors.append(f"start: {e}")
            self._ready.set()
            raise
        self._clock0 = self._now
        self._mono0 = time.monotonic()
        self._ready.set()
        while not self._stopping:
            t = self.clock()
            for s in self._begin_tick(t):
                with self._lock:
                    self._advance_one(s, t)
                await asyncio.sleep(0)  # let scrapes in between replicas
            with self._lock:
                self._now = max(self._now, t)
            await asyncio.sleep(TICK_S)
        for s in list(self._served.values()):
            if s.server is not None:
                await s.server.stop()

    def start(self, timeout: float = 30.0) -> "SimFleet":
        """Bind every replica's port and start stepping; returns once all serve."""
        if self._thread is not None:
            return self
        self._stopping = False
        self._ready.clear()
        self._mono0 = None
        self._thread = threading.Thread(target=self._run, name="kvwatch-sim", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or self._mono0 is None:
            self.stop()
            raise RuntimeError("simulated fleet failed to start: " + "; ".join(self.errors or ["timeout"]))
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except Exception as e:
            print(f"kvwatch sim: {e}", file=sys.stderr)
        finally:
            loop.close()

    def stop(self) -> None:
        """Stop stepping and close every port (the simulated clock stands still afterwards)."""
        self._stopping = True
        if self._thread is not None:
            self._thread.join(10.0)
        self._thread = None
        self._loop = None
        self._mono0 = None
        for s in self._served.values():
            s.server, s.url = None, ""

    def __enter__(self) -> "SimFleet":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_loop(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run a coroutine on the fleet loop from another thread and wait for it."""
        if self._loop is None:
            coro.close()
            return
        if threading.current_thread() is self._thread:
            self._loop.create_task(coro)
            return
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10.0)

    # -- read side ----------------------------------------------------------------------
    def targets(self) -> list[SimTarget]:
        with self._lock:
            return [self._target(s) for s in self._served.values()]

    def _target(self, s: _Served) -> SimTarget:
        u = s.url
        return SimTarget(s.replica.name, u, u + "/metrics" if u else "", u + "/dcgm" if u else "", s.replica.group)

    def replica(self, name: str) -> Replica:
        """The live model object (read it under `lock`); for tests and tools."""
        return self._get(name).replica

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def _get(self, name: str) -> _Served:
        s = self._served.get(name)
        if s is None:
            raise KeyError(f"no simulated replica {name!r}")
        return s

    @property
    def description(self) -> str:
        return f"demo: {len(self._served)} simulated replicas, scenario {self.scenario.name}, speed {self.speed:g}x"

    # -- cluster-facing ---------------------------------------------------------------
    def replica_names(self) -> list[str]:
        with self._lock:
            return list(self._served)

    def groups(self) -> list[str]:
        with self._lock:
            return list(self._groups)

    def engine_args(self, name: str) -> EngineArgs:
        with self._lock:
            return self._get(name).replica.args

    def kv_plan(self, args: EngineArgs, group: str | None = None) -> KvPlan:
        """vLLM's start-up arithmetic for `args` on the group's model and GPU (a preflight)."""
        with self._lock:
            g = self._groups.get(group or "") or next(iter(self._groups.values()))
            model, gpu = MODELS[g.dep.model], GPUS[g.dep.gpu]
        args.validate()
        resolved = args.resolved(gpu.large)
        return plan_kv(replace(resolved, max_model_len=resolved.max_model_len or model.context), model, gpu)

    def status(self, name: str) -> ReplicaStatus:
        with self._lock:
            r = self._get(name).replica
            run, wait = r.load()
            return ReplicaStatus(r.name, r.group, r.state, r.error, r.in_rotation, r.node.name, r.created,
                                 r.ready_at, run, wait)

    def logs(self, name: str, tail: int = 200) -> list[str]:
        with self._lock:
            lines = list(self._get(name).replica.log)
        return lines[-tail:] if tail else lines

    def load(self, name: str) -> tuple[int, int]:
        """(running, waiting) as the replica's metrics show them."""
        with self._lock:
            return self._get(name).replica.load()

    def set_in_rotation(self, name: str, in_rotation: bool) -> None:
        with self._lock:
            self._get(name).replica.in_rotation = bool(in_rotation)

    def add_replica(self, name: str, args: EngineArgs, group: str, load_delay_s: float = DEFAULT_LOAD_S,
                    node: str | None = None) -> SimTarget:
        """Start a replica (a new pod); /health is 503 until the model has loaded (simulated time)."""
        with self._lock:
            g = self._groups.get(group)
            if g is None:
                base = next(iter(self._groups.values()))
                g = self._add_group(group, replace(base.dep, group=group), 0, base.v0, base.sglang)
            s = self._new_replica(name, g, args, max(0.0, load_delay_s), node)
        if self._loop is not None:
            try:
                self._on_loop(self._serve(s))
            except Exception:
                with self._lock:
                    self._served.pop(name, None)
                raise
        with self._lock:
            return self._target(s)

    def remove_replica(self, name: str) -> None:
        """Delete a replica (its port closes; requests in flight are lost)."""
        with self._lock:
            s = self._served.pop(name, None)
            if s is None:
                raise KeyError(f"no simulated replica {name!r}")
            self._replacing = [x for x in self._replacing if x[1] != name]
        if s.server is not None:
            self._on_loop(s.server.stop())

    def replace_replica(self, name: str, new_name: str, args: EngineArgs, load_delay_s: float = DEFAULT_LOAD_S,
                        grace_s: float = 60.0) -> SimTarget:
        """Rolling-update one replica: start `new_name`; once it is ready take `name` out of rotation,
        let it drain (or `grace_s` simulated seconds) and remove it. A new replica that fails to start
        leaves the old one serving (a stuck rollout)."""
        with self._lock:
            group = self._get(name).replica.group
        t = self.add_replica(new_name, args, group, load_delay_s)
        with self._lock:
            self._replacing.append([name, new_name, grace_s, None])
        return t

    def set_node_fault(self, node: str, throttle_mask: int = 0, slowdown: float = 1.0, xid: int = 0,
                       ecc_dbe: int = 0) -> None:
        """Inject (or clear, with the defaults) a GPU fault on a node, for game days."""
        with self._lock:
            n = self._nodes.setdefault(node, Node(node))
            n.throttle_mask, n.slowdown, n.xid, n.ecc_dbe = throttle_mask, max(1.0, slowdown), xid, ecc_dbe

    def dropped(self) -> int:
        """Arrivals no replica took (none in rotation, or refused)."""
        with self._lock:
            return sum(g.dropped for g in self._groups.values())


def _unready(r: Replica) -> str:
    if r.state == FAILED:
        return f"engine failed to start: {r.error}\n"
    return "model loading\n"

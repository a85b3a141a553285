"""SGLang replicas in the simulated fleet: SGLang's names on the page, a mixed fleet, and the
long-prompts incident turning them kv-pressure with retraction evidence."""

from __future__ import annotations


from prometheus_client.parser import text_string_to_metric_families

from tui.core import engines
from tui.core.diagnosis import Thresholds, diagnose
from tui.core.export import replica_json
from tui.core.history import ReplicaHistory
from tui.core.model import Scrape
from tui.core.sim.args import EngineArgs
from tui.core.sim.exposition import PageRenderer
from tui.core.sim.fleet import SimFleet
from tui.core.sim.hardware import GPUS, MODELS
from tui.core.sim.replica import Replica
from tui.core.sim.scenarios import CHAT
from tui.core.sim.workload import Workload

T0 = 1.75e9


def busy(sglang: bool = True, dp: int = 1) -> Replica:
    args = EngineArgs(max_model_len=8192, max_num_seqs=64, data_parallel_size=dp)
    r = Replica("sg-0", "sg", MODELS["llama-3.1-8b"], GPUS["a100-40gb"], args, t0=T0, sglang=sglang)
    w = Workload(3)
    t, nxt = r.now, r.now + w.gap(4.0)
    while t < r.created + 60:
        t += 0.5
        while nxt <= t:
            r.submit(w.request(nxt, CHAT))
            nxt += w.gap(4.0)
        r.advance_to(t)
    return r


def test_an_sglang_replica_serves_sglang_names_only_and_parses_as_sglang():
    r = busy()
    text = PageRenderer(r).render()
    fams = {f.name for f in text_string_to_metric_families(text)}  # valid text format
    for name in ("sglang:token_usage", "sglang:num_running_reqs", "sglang:num_queue_reqs",
                 "sglang:num_retracted_requests", "sglang:max_total_num_tokens", "sglang:cache_hit_rate",
                 "sglang:gen_throughput", "sglang:time_to_first_token_seconds", "sglang:cache_config_info"):
        assert name in fams, name
    assert not any(n.startswith("vllm:") for n in fams)
    s = engines.parse_page(text)
    assert s.engine == "sglang"
    e = r.engines[0]
    assert s.value("running") == e.num_running and s.value("waiting") == e.num_waiting
    assert abs(s.value("kv_usage") - e.kv_usage) < 1e-4
    assert s.value("max_total_tokens") == r.plan.kv_cache_size_tokens
    assert s.hist("ttft").count == e.h["ttft"].count > 0
    assert s.cache_config["page_size"] == "16"


def test_a_data_parallel_sglang_replica_is_one_replica_with_dp_ranks():
    s = engines.parse_page(PageRenderer(busy(dp=2)).render())
    assert {"0", "1"} <= set(s.engines)
    assert s.value("max_total_tokens") == 2 * s.engines["0"].values["max_total_tokens"]


def test_mixed_fleet_groups_and_engines():
    f = SimFleet("steady", replicas=2, seed=2, start_time=T0, sglang_replicas=2)
    assert f.replica_names() == ["llama-8b-0", "llama-8b-1", "llama-8b-sglang-0", "llama-8b-sglang-1"]
    assert [f.replica(n).sglang for n in f.replica_names()] == [False, False, True, True]


def test_long_prompts_turn_sglang_replicas_kv_pressure_with_retraction_evidence():
    f = SimFleet("long-prompts", replicas=2, seed=0, start_time=T0, sglang_replicas=2)
    hs = {n: ReplicaHistory(n) for n in f.replica_names()}
    renderers = {n: PageRenderer(f.replica(n)) for n in hs}
    t = T0
    for _ in range(60):  # 10 simulated minutes, one scrape every 10 s
        t += 10.0
        f.step_to(t)
        for n, h in hs.items():
            h.add(Scrape(ts=t, replica=n, sample=engines.parse_page(renderers[n].render())))
    for n, h in hs.items():
        finding = diagnose(h, t, Thresholds())
        assert finding.verdict == "kv-pressure", (n, finding.verdict, [e.text for e in finding.evidence])
        texts = [e.text for e in finding.evidence]
        if "sglang" in n:
            assert any(x.startswith("SGLang retractions/s") for x in texts), texts
            assert any(x.startswith("SGLang token usage") for x in texts), texts
        else:
            assert any(x.startswith("preemptions/s") for x in texts), texts


def test_json_says_which_engine():
    from tui.core.model import Finding, ReplicaMetrics, ReplicaView

    def view(engine, generation):
        return ReplicaView("r", "ok", Finding("healthy"), ReplicaMetrics(), {}, engine=engine, generation=generation)

    assert replica_json(view("sglang", "sglang"))["engine"] == "SGLang"
    assert replica_json(view("vllm", "v0"))["engine"] == "vLLM V0"
    assert replica_json(view("", "unknown"))["engine"] == ""


# -- the game day on SGLang replicas (the demo's simulated cluster) ----------------------------


async def test_game_day_on_sglang_cap_running_requests_and_retractions_fall(tmp_path) -> None:
    from tui.core.cluster import args as A
    from tui.core.cluster.audit import AuditLog
    from tui.core.cluster.base import EditArgsRequest
    from tui.core.cluster.sim import SimCluster

    f = SimFleet("long-prompts", replicas=1, seed=3, start_time=T0, sglang_replicas=2)
    c = SimCluster(f, audit=AuditLog(tmp_path / "audit.jsonl"), load_delay_s=60)
    ns, dep = f.namespace, "llama-8b-sglang"
    sg = [n for n in f.replica_names() if "sglang" in n]

    def retracted() -> int:
        with f.lock:
            return sum(e.c.preemptions for n in sg for e in f.replica(n).engines)

    info = await c.get_deployment(ns, dep)
    cmd = A.parse_container(info.containers[0].as_dict())
    assert cmd.engine == "sglang" and cmd.value("max-running-requests") == 64
    await c.sleep(150)
    r0 = retracted()
    await c.sleep(60)
    before = (retracted() - r0) / 60
    assert before > 1.0
    unmodelled = await c.plan_edit_args(EditArgsRequest(ns, dep, {}, preset="conservative-1.3"))
    assert not unmodelled.ok and "does not model" in unmodelled.errors[0]
    plan = await c.plan_edit_args(EditArgsRequest(ns, dep, {}, preset="running-50"))
    assert plan.ok, plan.errors
    assert [ln for ln in plan.diff.splitlines() if ln[:1] in "+-" and ln[:3] not in ("---", "+++")] == ["-- 64", "+- 32"]
    assert (await c.apply(plan)).ok
    for _ in range(120):
        if (await c.rollout_status(ns, dep)).state == "done":
            break
        await c.sleep(5)
    sg = [n for n in f.replica_names() if "sglang" in n]
    assert len(sg) == 2 and all(f.replica(n).sglang and f.engine_args(n).max_num_seqs == 32 for n in sg)
    await c.sleep(60)
    r1 = retracted()
    await c.sleep(60)
    after = (retracted() - r1) / 60
    assert after < 0.05 * before and after < 0.1

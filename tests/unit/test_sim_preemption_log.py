"""A simulated pod that preempts logs vLLM's preemption warning, rate-limited as the engine does
(every 50th preemption: the 1st, the 51st, ...), in its engine's words (V0: "Sequence group N is
preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space"); a calm
pod logs none. These are the lines the logs screen shows and triage step 4 greps for."""

from __future__ import annotations

import re

from tui.core.diagnosis import loglines
from tui.core.sim.fleet import SimFleet

T0 = 1.75e9
EVERY = 50
V0_TEXT = re.compile(r"WARNING .* Sequence group \d+ is preempted by PreemptionMode\.RECOMPUTE mode because there "
                     r"is not enough KV cache space\. .* total_num_cumulative_preemption=(\d+)$")
V1_TEXT = re.compile(r"WARNING .* request \d+ is preempted by RECOMPUTE mode because there is not enough KV cache "
                     r"space\. .* total_num_cumulative_preemption=(\d+)$")


def _warnings(f: SimFleet, name: str, rx: re.Pattern[str]) -> list[int]:
    return [int(m.group(1)) for line in f.logs(name, tail=500) if (m := rx.search(line))]


def test_a_preempting_pod_logs_the_engine_warning_every_50_preemptions() -> None:
    f = SimFleet("long-prompts", replicas=2, v0_replicas=1, seed=3, start_time=T0)
    f.advance(200)
    for name in f.replica_names():
        r = f.replica(name)
        total = sum(e.c.preemptions for e in r.engines)
        assert total > EVERY, (name, total)  # thrashing: enough to be logged more than once
        got = _warnings(f, name, V0_TEXT if r.v0 else V1_TEXT)
        # the engine's rate limit: one line for the 1st, 51st, 101st ... preemption of each engine
        want = [n for e in r.engines for n in range(1, e.c.preemptions + 1, EVERY)]
        assert sorted(got) == sorted(want), (name, got, want)
        # the logs screen and triage call them preemption lines
        assert all(loglines.kind(line) == "preemption" for line in f.logs(name, tail=500)
                   if "is preempted by" in line)


def test_a_calm_pod_logs_no_preemption_warning() -> None:
    f = SimFleet("steady", replicas=2, v0_replicas=1, seed=3, start_time=T0)
    f.advance(120)
    for name in f.replica_names():
        assert sum(e.c.preemptions for e in f.replica(name).engines) == 0
        lines = f.logs(name, tail=500)
        assert lines and not [x for x in lines if "preempted" in x], lines[-5:]

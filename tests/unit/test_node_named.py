"""The throttled GPU's node is named on the detail's evidence and the runbook screens, from
PodInfo (issue 11 item 8), and the runbook is titled by the verdict."""

from __future__ import annotations

from tui.core.diagnosis import Thresholds
from tui.core.diagnosis.runbook import runbook
from tui.core.model import PodInfo
from tui.core.monitor import Monitor
from tui.screens.detail import evidence_text
from tui.screens.diagnosis_text import runbook_text

from .diagnosis_helpers import series

POD = PodInfo("inference", "vllm-0", node="gpu-node-7", phase="Running", ready=True)


def test_the_node_of_a_throttled_gpu_is_on_the_detail_and_the_runbook():
    mon = Monitor(None)
    st = mon.ingest([s.__class__(**{**{f: getattr(s, f) for f in s.__dataclass_fields__}, "pod": POD})
                     for s in series(6, throttle=("hw_thermal_slowdown",), name="vllm-0")])
    (v,) = st.replicas
    assert v.verdict == "node-fault"
    assert "node gpu-node-7" in evidence_text(v, st.ts, {}).plain
    h = mon.histories["vllm-0"]
    rb = runbook(h, st.ts, Thresholds(), rollouts=[])
    text = runbook_text(rb, lambda a: ("x", None), {}).plain
    first = text.splitlines()[0]
    assert "GPU node fault" in first and "gpu-node-7" in first and "preemption thrash" not in first
    assert "steady preemption" not in text

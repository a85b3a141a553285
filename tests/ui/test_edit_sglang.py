"""The edit form on an SGLang replica: SGLang's knobs and presets, and the exact args diff."""

from __future__ import annotations

from textual.widgets import Button

from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture
from tests.integration.test_kube_sglang import changed_lines, sglang_deployment
from tests.ui.kube_app import kube_app, start, until, select
from tui.screens.edit_args import EditArgsScreen

_L = 'engine_type="unified",model_name="Qwen/Qwen3-8B",pp_rank="0",tp_rank="0"'


def sglang_page() -> str:
    return "".join(f"# TYPE sglang:{n} gauge\nsglang:{n}{{{_L}}} {v}\n" for n, v in
                   (("token_usage", 0.97), ("num_running_reqs", 128.0), ("num_queue_reqs", 9.0)))


async def test_the_edit_form_of_an_sglang_replica_offers_sglang_knobs(env: Env) -> None:
    env.emu.add(sglang_deployment())
    pods = [p["metadata"]["name"] for p in env.pods(app="qwen-sg")]
    for p in pods:
        env.emu.pod_metrics[(NS, p)] = sglang_page
    app, src = kube_app(env)
    async with app.run_test(size=(120, 36)) as pilot:
        await start(pilot, src)
        view = next(v for v in app.monitor.state.replicas if v.name == pods[0])
        assert view.engine == "sglang"
        select(pilot, pods[0])
        await pilot.press("e")
        form = await until(pilot, lambda: isinstance(app.screen, EditArgsScreen) and app.screen.cmd is not None
                           and app.screen)
        assert form.value_of("max-running-requests") == "128"
        assert form.value_of("mem-fraction-static") == "0.85"
        assert not form.query("#r-max-num-seqs")  # vLLM's knob is not offered
        labels = [str(b.label) for b in form.query("#edit-presets Button").results(Button)]
        assert labels[:2] == ["f2 running -25%", "f3 running -50%"]
        await pilot.press("f3")  # the slot of vLLM's "seqs -50%": SGLang's running -50%
        await pilot.pause()
        assert form.value_of("max-running-requests") == "64"
        assert changed_lines(form.diff) == ["-- 128", "+- 64"]

"""Capacity planner view: the arithmetic on screen, against the worked figures of
shared/reference/engine-args.md (the real V0 log: "# GPU blocks: 5691", block size 16,
"Maximum concurrency for 8192 tokens per request: 11.12x"), and `e` pre-filling the edit form."""

from __future__ import annotations

from pathlib import Path


from tests.ui.triage_helpers import TriageSource, app_for, open_on, settle, sim_cluster
from tui.screens.edit_args import EditArgsScreen

# TriageSource "sized": per poll, prompts 2 in (400, 1000] + 18 in (1000, 2000]; outputs 18 in
# (100, 400] + 2 in (400, 1000]. Prometheus-style interpolation of the p95:
P95_PROMPT = 1000 + 1000 * (0.95 * 20 - 2) / 18  # 1,944.4
P95_OUTPUT = 400 + 600 * (0.95 * 20 - 18) / 2  # 700
FIT = 5691 * 16 * (1 - 0.1) / (P95_PROMPT + P95_OUTPUT)  # 30.99


def body(app) -> str:
    return app.screen._body.plain


async def test_capacity_view_shows_the_arithmetic_from_the_cache_config_labels() -> None:
    app = app_for(TriageSource({"r0": "sized"}))
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(6):
            await app.refresh_once()
            await pilot.pause()
        await open_on(pilot, "r0", "c")
        plan = app.screen.plan
        assert plan.capacity_tokens == 91_056 and plan.source == "num_gpu_blocks x block_size"
        assert plan.suggested_max_num_seqs == int(FIT) == 30
        text = body(app)
        assert "KV capacity         91,056 tokens per engine" in text
        assert "KV capacity = num_gpu_blocks 5,691 x block_size 16 = 91,056 tokens" in text
        assert (f"tokens per request at p95 = prompt {P95_PROMPT:,.0f} + generated output {P95_OUTPUT:,.0f}"
                f" = {P95_PROMPT + P95_OUTPUT:,.0f}") in text
        assert f"max-num-seqs that fits = 91,056 x (1 - headroom 0.1) / 2,644 = {FIT:.1f} -> 30" in text
        # without max-model-len (no cluster to read the args from) concurrency cannot be computed
        assert "max concurrency     unknown" in text
        assert "e edit engine args: not offered (no cluster" in text


async def test_with_the_deployment_args_concurrency_matches_the_v0_log_and_e_prefills_the_form(
        tmp_path: Path) -> None:
    f, c = sim_cluster(tmp_path)
    await c.sleep(30)
    pods = {p.name: p for p in await c.list_pods()}
    name = sorted(pods)[0]
    app = app_for(TriageSource({name: "sized"}, pods, t0=c.now()), c)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(6):
            await app.refresh_once()
            await pilot.pause()
        await open_on(pilot, name, "c")
        await settle(pilot)
        plan = app.screen.plan
        assert plan.max_model_len == 8192 and plan.current_max_num_seqs == 64  # read from the Deployment
        text = body(app)
        assert "max concurrency at max-model-len 8,192 = 91,056 / 8,192 = 11.12x" in text
        assert "current max-num-seqs 64 > 30: a batch of p95-shaped requests outgrows the pool" in text
        assert "e  edit engine args  (form pre-filled: max-num-seqs=30)" in text
        await pilot.press("e")
        for _ in range(50):
            await pilot.pause()
            form = app.screen
            if isinstance(form, EditArgsScreen) and form.cmd is not None:
                break
        assert isinstance(form, EditArgsScreen)
        assert form.value_of("max-num-seqs") == "30"
        assert form.changes == {"max-num-seqs": 30}  # validated by the form, not yet applied
        assert "+- 30" in form.diff and "-- 64" in form.diff
        assert f.engine_args(name).max_num_seqs == 64

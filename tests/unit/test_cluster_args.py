"""Engine args in container specs: every common form parsed, validated, rewritten in place."""

from __future__ import annotations

import pytest

from tui.core.cluster import args as A

MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# (id, container, expected {flag: (value, source)} for non-default values, expected form)
FORMS = [
    (
        "vllm-serve-space",
        {"command": ["vllm", "serve", MODEL, "--max-num-seqs", "128", "--gpu-memory-utilization", "0.85"]},
        {"model": (MODEL, "flag"), "max-num-seqs": (128, "flag"), "gpu-memory-utilization": (0.85, "flag")},
        "vllm serve",
    ),
    (
        "vllm-serve-equals",
        {"command": ["vllm", "serve"], "args": [MODEL, "--max-num-seqs=64", "--max-model-len=32k", "--block-size=32"]},
        {"model": (MODEL, "flag"), "max-num-seqs": (64, "flag"), "max-model-len": (32000, "flag"), "block-size": (32, "flag")},
        "vllm serve",
    ),
    (
        "python-module",
        {"command": ["python", "-m", "vllm.entrypoints.openai.api_server"], "args": ["--model", MODEL, "--tensor-parallel-size", "2", "--kv-cache-dtype", "fp8"]},
        {"model": (MODEL, "flag"), "tensor-parallel-size": (2, "flag"), "kv-cache-dtype": ("fp8", "flag")},
        "python -m",
    ),
    (
        "python3-module-underscores",
        {"command": ["python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model=m", "--max_num_seqs", "32", "--max_num_batched_tokens=4096"]},
        {"model": ("m", "flag"), "max-num-seqs": (32, "flag"), "max-num-batched-tokens": (4096, "flag")},
        "python -m",
    ),
    (
        "booleans",
        {"command": ["vllm", "serve", "m", "--no-enable-prefix-caching", "--enable-chunked-prefill", "--enforce-eager", "--max-num-seqs", "8"]},
        {"model": ("m", "flag"), "enable-prefix-caching": (False, "flag"), "enable-chunked-prefill": (True, "flag"), "max-num-seqs": (8, "flag")},
        "vllm serve",
    ),
    (
        "v0-boolean-with-value",
        {"command": ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--enable-chunked-prefill", "False", "--swap-space", "8"]},
        {"model": ("m", "flag"), "enable-chunked-prefill": (False, "flag"), "swap-space": (8.0, "flag")},
        "python -m",
    ),
    (
        "shell-script",
        {"command": ["/bin/sh", "-c", "pip install -q x && exec vllm serve m \\\n  --max-num-seqs 48 \\\n  --gpu-memory-utilization=0.8 --port 8000"]},
        {"model": ("m", "flag"), "max-num-seqs": (48, "flag"), "gpu-memory-utilization": (0.8, "flag")},
        "shell",
    ),
    (
        "shell-script-in-args",
        {"command": ["bash", "-ec"], "args": ['vllm serve "m" --max-num-seqs \'16\' --max-model-len 4096']},
        {"model": ("m", "flag"), "max-num-seqs": (16, "flag"), "max-model-len": (4096, "flag")},
        "shell",
    ),
    (
        "k8s-env-expansion",
        {"command": ["vllm", "serve", "m", "--max-num-seqs", "$(MAX_SEQS)", "--gpu-memory-utilization=$(GMU)"], "env": [{"name": "MAX_SEQS", "value": "96"}, {"name": "GMU", "value": "0.75"}]},
        {"model": ("m", "flag"), "max-num-seqs": (96, "env"), "gpu-memory-utilization": (0.75, "env")},
        "vllm serve",
    ),
    (
        "shell-env-expansion",
        {"command": ["sh", "-c", "vllm serve m --max-num-seqs ${SEQS} --max-model-len $LEN --block-size ${BS:-32}"], "env": [{"name": "SEQS", "value": "24"}, {"name": "LEN", "value": "2048"}]},
        {"model": ("m", "flag"), "max-num-seqs": (24, "env"), "max-model-len": (2048, "env"), "block-size": (32, "env")},
        "shell",
    ),
    (
        "image-entrypoint",
        {"image": "vllm/vllm-openai:v0.10.0", "args": ["--model", "m", "--max-num-seqs", "200"]},
        {"model": ("m", "flag"), "max-num-seqs": (200, "flag")},
        "image entrypoint",
    ),
    (
        "last-occurrence-wins",
        {"command": ["vllm", "serve", "m", "--max-num-seqs", "10", "--max-num-seqs", "20"]},
        {"model": ("m", "flag"), "max-num-seqs": (20, "flag")},
        "vllm serve",
    ),
    (
        "short-tp-alias",
        {"command": ["vllm", "serve", "m", "-tp", "4"]},
        {"model": ("m", "flag"), "tensor-parallel-size": (4, "flag")},
        "vllm serve",
    ),
]


@pytest.mark.parametrize("cid,container,expected,form", FORMS, ids=[f[0] for f in FORMS])
def test_parse_every_form(cid: str, container: dict, expected: dict, form: str) -> None:
    cmd = A.parse_container({"name": "vllm", **container})
    assert cmd.form == form
    got = {v.name: (v.value, v.source) for v in cmd.values.values() if not v.is_default}
    assert got == expected
    # everything absent comes back as the engine default, marked as such
    for name, v in cmd.values.items():
        if name not in expected:
            assert v.is_default and v.value == A.default_for(name), name


def test_defaults_depend_on_generation() -> None:
    c = {"name": "vllm", "command": ["vllm", "serve", "m"]}
    v1, v0 = A.parse_container(c, "v1"), A.parse_container(c, "v0")
    assert v1.value("enable-prefix-caching") is True and v0.value("enable-prefix-caching") is False
    assert v1.value("swap-space") is None and v0.value("swap-space") == 4.0
    assert v1.values["gpu-memory-utilization"].is_default
    assert "0.92" in v1.values["gpu-memory-utilization"].note


def test_unresolvable_env_reference_is_reported_not_guessed() -> None:
    c = {"name": "vllm", "command": ["vllm", "serve", "m", "--max-num-seqs", "$(SEQS)"], "env": [{"name": "SEQS", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "seqs"}}}]}
    cmd = A.parse_container(c)
    v = cmd.values["max-num-seqs"]
    assert v.value is None and v.env_var == "SEQS" and v.source == "env"
    assert any("SEQS" in w for w in cmd.warnings)


def test_single_quotes_stop_shell_expansion_but_kubernetes_escape_is_literal() -> None:
    c = {"name": "vllm", "command": ["sh", "-c", "vllm serve m --served-model-name '$NAME' --max-num-seqs 4"], "env": [{"name": "NAME", "value": "x"}]}
    assert A.parse_container(c).value("max-num-seqs") == 4
    c2 = {"name": "vllm", "command": ["vllm", "serve", "m", "--kv-cache-dtype", "$$(X)"]}
    v = A.parse_container(c2).values["kv-cache-dtype"]
    assert v.value is None and "$(X)" in v.note  # "$(X)" literal is not a dtype


def test_detection() -> None:
    assert A.is_vllm_container({"name": "a", "command": ["vllm", "serve", "m"]})
    assert A.is_vllm_container({"name": "a", "command": ["/bin/bash", "-c", "sleep 1; vllm serve m"]})
    assert A.is_vllm_container({"name": "a", "image": "vllm/vllm-openai:latest"})
    assert not A.is_vllm_container({"name": "a", "image": "nginx", "command": ["nginx", "-g", "daemon off;"]})
    assert not A.is_vllm_container({"name": "a", "image": "fluent/fluent-bit"})
    assert not A.is_vllm_container({"name": "a", "command": ["sh", "-c", "echo 'unterminated"]})


@pytest.mark.parametrize(
    "changes,field,message",
    [
        ({"gpu-memory-utilization": "1.5"}, "gpu-memory-utilization", "> 0 and <= 1"),
        ({"gpu-memory-utilization": "0"}, "gpu-memory-utilization", "> 0 and <= 1"),
        ({"gpu-memory-utilization": "lots"}, "gpu-memory-utilization", "not a number"),
        ({"max-num-seqs": "0"}, "max-num-seqs", ">= 1"),
        ({"max-num-seqs": "12.5"}, "max-num-seqs", "whole number"),
        ({"max-num-seqs": "1024"}, "max-num-seqs", "must be >= --max-num-seqs (1024)"),
        ({"max-num-batched-tokens": "100"}, "max-num-batched-tokens", "must be >= --max-num-seqs (256)"),
        ({"enable-prefix-caching": "maybe"}, "enable-prefix-caching", "not true or false"),
        ({"kv-cache-dtype": "fp7"}, "kv-cache-dtype", "not one of"),
        ({"tensor-parallel-size": "2"}, "tensor-parallel-size", "not edited"),
        ({"max-model-len": "eight"}, "max-model-len", "whole number"),
        ({"swap-space": "-1"}, "swap-space", ">= 0"),
    ],
)
def test_validation_errors(changes: dict, field: str, message: str) -> None:
    cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--max-num-batched-tokens", "512"]})
    if "max-num-batched-tokens" in changes:
        cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m"]})
    v = A.validate(cmd, changes)
    assert not v.ok
    assert field in v.errors and message in v.errors[field], v.errors


def test_validation_without_chunked_prefill_needs_batch_of_one_sequence() -> None:
    cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--no-enable-chunked-prefill", "--max-model-len", "8192", "--max-num-batched-tokens", "8192"]})
    v = A.validate(cmd, {"max-num-batched-tokens": 4096})
    assert "must be >= --max-model-len (8192)" in v.errors["max-num-batched-tokens"]


def test_validation_keeps_only_real_changes_and_warns() -> None:
    cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--max-num-seqs", "64"]})
    v = A.validate(cmd, {"max-num-seqs": "64", "gpu-memory-utilization": "0.97", "swap-space": "8"})
    assert v.ok and v.changes == {"gpu-memory-utilization": 0.97, "swap-space": 8.0}
    assert any("little room" in w for w in v.warnings)
    assert any("ignored by the V1 engine" in w for w in v.warnings)


@pytest.mark.parametrize(
    "key,expected",
    [
        ("seqs-25", {"max-num-seqs": 150}),
        ("seqs-50", {"max-num-seqs": 100}),
        ("gmu-0.7", {"gpu-memory-utilization": 0.7}),
        ("gmu-0.6", {"gpu-memory-utilization": 0.6}),
        ("batched-50", {"max-num-batched-tokens": 4096}),
    ],
)
def test_presets_from_runbook(key: str, expected: dict) -> None:
    cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--max-num-seqs", "200", "--max-num-batched-tokens", "8192"]})
    assert A.preset(cmd, key) == expected
    assert A.validate(cmd, expected).ok


def test_preset_uses_what_the_engine_reports_over_the_documented_default() -> None:
    cmd = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m"]})
    assert A.preset(cmd, "seqs-50") == {"max-num-seqs": 128}  # documented default 256
    assert A.preset(cmd, "seqs-50", {"max-num-seqs": 1024}) == {"max-num-seqs": 512}  # H100 default
    # halving the token budget never goes below the (new) sequence cap
    small = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--max-num-seqs", "256", "--max-num-batched-tokens", "300"]})
    assert A.preset(small, "batched-50") == {"max-num-batched-tokens": 256}
    with pytest.raises(A.ArgError, match="unknown preset"):
        A.preset(cmd, "seqs-90")


# (id, container, changes, expected new container fields)
REWRITES = [
    (
        "space-form",
        {"command": ["vllm", "serve", "m", "--max-num-seqs", "256", "--port", "8000"]},
        {"max-num-seqs": 128},
        {"command": ["vllm", "serve", "m", "--max-num-seqs", "128", "--port", "8000"]},
    ),
    (
        "equals-and-underscores-kept",
        {"command": ["python3", "-m", "vllm.entrypoints.openai.api_server"], "args": ["--model=m", "--max_num_seqs=64", "--gpu_memory_utilization=0.9"]},
        {"max-num-seqs": 32, "gpu-memory-utilization": 0.7},
        {"args": ["--model=m", "--max_num_seqs=32", "--gpu_memory_utilization=0.7"]},
    ),
    (
        "absent-flag-appended-in-style",
        {"command": ["vllm", "serve"], "args": ["m", "--max-num-seqs=64", "--port=8000"]},
        {"max-num-batched-tokens": 1024},
        {"args": ["m", "--max-num-seqs=64", "--port=8000", "--max-num-batched-tokens=1024"]},
    ),
    (
        "boolean-flips",
        {"command": ["vllm", "serve", "m", "--no-enable-prefix-caching", "--enable-chunked-prefill"]},
        {"enable-prefix-caching": True, "enable-chunked-prefill": False},
        {"command": ["vllm", "serve", "m", "--enable-prefix-caching", "--no-enable-chunked-prefill"]},
    ),
    (
        "boolean-value-form",
        {"command": ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--enable-chunked-prefill", "False"]},
        {"enable-chunked-prefill": True},
        {"command": ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--enable-chunked-prefill", "true"]},
    ),
    (
        "env-value-changed-not-args",
        {"command": ["vllm", "serve", "m", "--max-num-seqs", "$(MAX_SEQS)"], "env": [{"name": "HF_HOME", "value": "/cache"}, {"name": "MAX_SEQS", "value": "96"}]},
        {"max-num-seqs": 48},
        {"env": [{"name": "HF_HOME", "value": "/cache"}, {"name": "MAX_SEQS", "value": "48"}]},
    ),
    (
        "shell-one-token",
        {"command": ["/bin/sh", "-c", "exec vllm serve m \\\n  --max-num-seqs 48 \\\n  --port 8000 && echo done"]},
        {"max-num-seqs": 24, "gpu-memory-utilization": 0.6},
        {"command": ["/bin/sh", "-c", "exec vllm serve m \\\n  --max-num-seqs 24 \\\n  --port 8000 --gpu-memory-utilization 0.6 && echo done"]},
    ),
    (
        "image-entrypoint-no-args",
        {"image": "vllm/vllm-openai:v0.10.0"},
        {"max-num-seqs": 16},
        {"args": ["--max-num-seqs", "16"]},
    ),
]


@pytest.mark.parametrize("cid,container,changes,expected", REWRITES, ids=[r[0] for r in REWRITES])
def test_rewrite_preserves_form(cid: str, container: dict, changes: dict, expected: dict) -> None:
    c = {"name": "vllm", **container}
    cmd = A.parse_container(c)
    rw = A.rewrite_container(c, cmd, changes)
    assert set(rw.fields) == set(expected)
    for fld, val in expected.items():
        assert rw.container[fld] == val
    for fld in ("command", "args", "env"):
        if fld not in expected:
            assert rw.container.get(fld) == c.get(fld)
    # and the rewritten container reads back with the new values
    again = A.parse_container(rw.container)
    for k, v in changes.items():
        assert again.value(k) == v


def test_rewrite_refuses_non_vllm() -> None:
    c = {"name": "x", "image": "nginx", "command": ["nginx"]}
    with pytest.raises(A.ArgError, match="no vLLM server"):
        A.rewrite_container(c, A.parse_container(c), {"max-num-seqs": 1})


def test_diff_is_minimal_and_exact() -> None:
    c = {"name": "vllm", "command": ["vllm", "serve", "m"], "args": ["--max-num-seqs", "256", "--port", "8000"]}
    rw = A.rewrite_container(c, A.parse_container(c), {"max-num-seqs": 128})
    diff = A.args_diff(c, rw.container, "deployment/llama/vllm")
    changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-- 256", "+- 128"]
    assert diff.startswith("--- a/deployment/llama/vllm\n+++ b/deployment/llama/vllm")


def test_script_diff_shows_one_flag_per_line() -> None:
    script = "vllm serve m --max-num-seqs 48 --max-model-len 8192 --gpu-memory-utilization 0.9 --port 8000"
    c = {"name": "vllm", "command": ["sh", "-c", script]}
    rw = A.rewrite_container(c, A.parse_container(c), {"max-num-seqs": 24})
    changed = [ln for ln in A.args_diff(c, rw.container).splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-    --max-num-seqs 48", "+    --max-num-seqs 24"]


# ---- KV preflight ----

CACHE = {"num_gpu_blocks": "5691", "block_size": "16", "gpu_memory_utilization": "0.9", "cache_dtype": "auto"}
BPT = A.kv_bytes_per_token(32, 8, 128, 2)  # Llama-3-8B: 128 KiB per token (engine-args.md 3.1)
A100_40 = 40 * A.GiB


def _cmd(mml: int = 8192) -> A.VllmCommand:
    return A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "--max-model-len", str(mml), "--gpu-memory-utilization", "0.9"]})


def test_preflight_reference_numbers() -> None:
    assert BPT == 131072
    pf = A.kv_preflight(_cmd(), {"max-num-seqs": 64}, CACHE, A100_40, BPT)
    assert pf.status == "ok" and pf.capacity_tokens_now == 5691 * 16
    assert any("11.1 full-length" in m for m in pf.messages)


def test_preflight_fails_when_one_sequence_no_longer_fits() -> None:
    # 0.9 -> 0.6 takes 12 GiB out of an ~11.1 GiB pool: nothing left, vLLM would crash-loop
    pf = A.kv_preflight(_cmd(), {"gpu-memory-utilization": 0.6}, CACHE, A100_40, BPT)
    assert pf.status == "fail" and pf.blocks
    assert any("crash-loop" in m for m in pf.messages)
    # 0.9 -> 0.7 leaves ~3.1 GiB = ~25k tokens; a 32k context does not fit, 8k does
    assert A.kv_preflight(_cmd(32768), {"gpu-memory-utilization": 0.7}, CACHE, A100_40, BPT).status == "fail"
    ok = A.kv_preflight(_cmd(8192), {"gpu-memory-utilization": 0.7}, CACHE, A100_40, BPT)
    assert ok.status == "warn" and 24000 < ok.capacity_tokens_new < 26000  # fits, but a shrink warns


def test_preflight_max_model_len_and_dtype() -> None:
    pf = A.kv_preflight(_cmd(), {"max-model-len": 131072}, CACHE)
    assert pf.status == "fail" and any("KV cache needed > available" in m for m in pf.messages)
    fp8 = A.kv_preflight(_cmd(), {"kv-cache-dtype": "fp8"}, CACHE)
    assert fp8.capacity_tokens_new == 2 * 5691 * 16


def test_preflight_says_unknown_without_data() -> None:
    assert A.kv_preflight(_cmd(), {"gpu-memory-utilization": 0.7}, {}).status == "unknown"
    pf = A.kv_preflight(_cmd(), {"gpu-memory-utilization": 0.7}, CACHE, A100_40, None)
    assert pf.status == "unknown" and any("8.0 GiB" in m for m in pf.messages)
    # V1's kv_cache_size_tokens label is preferred over blocks x block size
    pf2 = A.kv_preflight(_cmd(), {"max-num-seqs": 8}, {**CACHE, "kv_cache_size_tokens": "1000"})
    assert pf2.capacity_tokens_now == 1000 and pf2.status == "fail"


def test_preflight_tensor_parallel_divides_bytes_per_token() -> None:
    # each GPU holds 1/tp of every token's KV, so the same memory is twice the tokens at tp=2
    c = A.parse_container({"name": "vllm", "command": ["vllm", "serve", "m", "-tp", "2", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9"]})
    one = A.kv_preflight(_cmd(), {"gpu-memory-utilization": 0.85}, CACHE, A100_40, BPT)
    two = A.kv_preflight(c, {"gpu-memory-utilization": 0.85}, CACHE, A100_40, BPT)
    lost_one = one.capacity_tokens_now - one.capacity_tokens_new
    lost_two = two.capacity_tokens_now - two.capacity_tokens_new
    assert lost_one == pytest.approx(0.05 * A100_40 / BPT, rel=0.001)
    assert lost_two == pytest.approx(2 * lost_one, rel=0.001)


def test_observed_from_cache_config() -> None:
    got = A.observed_from_cache_config({"gpu_memory_utilization": "0.92", "block_size": "16", "enable_prefix_caching": "False", "swap_space_bytes": "4294967296", "cache_dtype": "junk"}, max_num_seqs=1024)
    assert got == {"gpu-memory-utilization": 0.92, "block-size": 16, "enable-prefix-caching": False, "swap-space": 4.0, "max-num-seqs": 1024}


def test_rewrite_of_a_configmap_sourced_value_writes_a_literal_and_says_so() -> None:
    c = {
        "name": "vllm",
        "command": ["vllm", "serve", "m", "--max-num-seqs", "$(SEQS)"],
        "env": [{"name": "SEQS", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "seqs"}}}],
    }
    rw = A.rewrite_container(c, A.parse_container(c), {"max-num-seqs": 32})
    assert rw.fields == ("command",) and rw.container["command"][-1] == "32"
    assert rw.container["env"] == c["env"]  # the ConfigMap reference is left alone
    assert len(rw.notes) == 1 and "$SEQS" in rw.notes[0] and "literal" in rw.notes[0]


def test_preflight_warns_loudly_on_every_change_that_shrinks_the_kv_pool() -> None:
    # issue 11 item 3: "gmu 0.7" under kv-pressure passed as "OK, KV pool ..." without a word
    pf = A.kv_preflight(_cmd(8192), {"gpu-memory-utilization": 0.7}, CACHE, A100_40, BPT)
    assert pf.status == "warn"
    loud = [m for m in pf.messages if m.startswith("KV POOL SHRINKS")]
    assert loud and f"{5691 * 16:,} -> {pf.capacity_tokens_new:,} tokens" in loud[0]
    assert "full-length (8192) sequences fit: 11.1 -> 3.1" in loud[0] and "at max-num-seqs 256" in loud[0]
    fp8_back = A.kv_preflight(_cmd(), {"kv-cache-dtype": "fp8"}, {**CACHE, "cache_dtype": "fp8"})
    assert fp8_back.status == "ok"  # unchanged dtype: no shrink, no warning
    bigger = A.kv_preflight(_cmd(), {"gpu-memory-utilization": 0.92}, CACHE, A100_40, BPT)
    assert bigger.status == "ok" and not any(m.startswith("KV POOL SHRINKS") for m in bigger.messages)
    # a cut of max-num-seqs does not touch the pool
    assert A.kv_preflight(_cmd(), {"max-num-seqs": 32}, CACHE, A100_40, BPT).status == "ok"

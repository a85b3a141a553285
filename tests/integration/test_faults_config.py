"""Issue 10, the config file under faults: a broken file must fail closed (read-only), out-of-range
numbers must be refused with file, line and range, and config messages are sanitised like every
other text that reaches the terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.faultserver import run_cli
from tests.integration.kube_env import NS, Env, env  # noqa: F401 - fixture

ESC = re.compile(r"[\x1b\x07\x9b]")
TOKEN = "kube-token-5b1e"
READONLY_SAID = "--gpu-exec is off under --readonly"  # what a read-only kube run says of --gpu-exec

PROD_RO = '[contexts."prod-*"]\nreadonly = true\nproduction = true\n'


def kubeconfig(path: Path, url: str, context: str = "prod-eu") -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "emu", "cluster": {"server": url}}],
        "users": [{"name": "sre", "user": {"token": TOKEN}}],
        "contexts": [{"name": context, "context": {"cluster": "emu", "user": "sre", "namespace": NS}}],
        "current-context": context,
    }))
    return path


def write_config(tmp: Path, text: str) -> Path:
    p = tmp / "cfg" / "kvwatch" / "config.toml"  # where clean_env's KVWATCH_CONFIG points
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


async def kube_run(env: Env, tmp: Path, *extra: str):
    kc = kubeconfig(tmp / "kubeconfig", str(env.srv.url).rstrip("/"))
    return await run_cli(str(tmp), "--kubeconfig", str(kc), "--context", "prod-eu", "-n", NS, "--gpu-exec",
                         "--json", "--duration", "1", "--interval", "0.5", *extra)


@pytest.mark.parametrize("cfg", [
    'refresh_interval = 1.0\n' + PROD_RO,  # as written
    'refresh_interval = 1.0\n' + PROD_RO.replace("production = true", "production = 3"),  # a bad value in it
    'refresh_interval = 1.0\n[contexts."prod-*"]\nreadonly = "yes"\n',  # readonly itself invalid
])
async def test_a_readonly_context_profile_makes_the_run_readonly(env: Env, tmp_path: Path, cfg: str) -> None:
    """The control for the next test: [contexts."prod-*"] readonly = true is obeyed, and a context
    section with a problem is read-only."""
    write_config(tmp_path, cfg)
    run = await kube_run(env, tmp_path)
    assert run.rc in (0, 3), run.err  # 3: --json read no endpoint (the emulated pods serve no metrics)
    assert READONLY_SAID in run.err
    assert TOKEN not in run.out + run.err


@pytest.mark.parametrize("broken", [
    'refresh_interval = = 1.0\n' + PROD_RO,  # a typo before the section
    PROD_RO + '[thresholds]\nkv_high = 0.9.1\n',  # a typo after it
])
async def test_a_broken_config_starts_readonly(env: Env, tmp_path: Path, broken: str) -> None:
    write_config(tmp_path, broken)
    run = await kube_run(env, tmp_path)
    assert run.rc in (0, 3), run.err  # 3: --json read no endpoint (the emulated pods serve no metrics)
    assert READONLY_SAID in run.err  # actually read-only: no pods/exec
    assert re.search(r"read-only", run.err, re.I) and "config" in run.err  # and said why, on stderr
    assert not any(c.writes for c in env.emu.calls)
    rw = await kube_run(env, tmp_path, "--readwrite")  # the explicit way out while the file is broken
    assert READONLY_SAID not in rw.err


async def test_out_of_range_numbers_are_refused_with_file_line_and_range(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, "history_window = 1e300\n\n[thresholds]\nkv_high = 1.5\n")
    run = await run_cli(str(tmp_path), "demo", "--json", "--duration", "1.5", "--interval", "0.5")
    assert run.rc == 0, run.err
    assert all("error" not in f for f in run.json_lines())  # the bad values were not used
    said = run.err.splitlines()
    for key, line in (("history_window", 1), ("kv_high", 4)):
        msg = next((m for m in said if key in m), "")
        assert f"{cfg}:{line}" in msg, (key, run.err)
        assert re.search(r"\d\s*(\.\.|to|-|–|and)\s*\d|between|range", msg), msg  # the allowed range


async def test_a_key_remapped_onto_another_action_is_refused(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, '[keys]\npause = "q"\n')
    run = await run_cli(str(tmp_path), "config", "show")
    assert run.rc == 1, run.err  # `config show` exits 1 when the file has problems
    assert 'pause = "p"' in run.out  # the refused remap is not in effect
    msg = next((m for m in run.err.splitlines() if "pause" in m), "")
    assert f"{cfg}:2" in msg and re.search(r"quit|already|conflict", msg, re.I), run.err


async def test_escape_codes_in_config_key_names_are_sanitised(tmp_path: Path) -> None:
    write_config(tmp_path, '"\\u001b[31mevil\\u001b]0;t\\u0007" = 1\n[thresholds]\n"kv\\u001b[2J" = 3\n')
    run = await run_cli(str(tmp_path), "demo", "--json", "--duration", "1", "--interval", "0.5")
    show = await run_cli(str(tmp_path), "config", "show")
    assert run.rc == 0 and "unknown key" in run.err  # still reported
    for r in (run, show):
        assert not ESC.search(r.err) and not ESC.search(r.out), repr(r.err)

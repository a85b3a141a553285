"""The core must stay usable headless: importing every tui.core module loads no UI library."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import tui.core

ROOT = Path(__file__).resolve().parents[2]


def core_modules() -> list[str]:
    mods = ["tui.core"]
    for info in pkgutil.walk_packages(tui.core.__path__, "tui.core."):
        if info.name.endswith("__main__"):
            continue
        mods.append(info.name)
    return mods


def test_core_imports_no_textual_or_rich():
    mods = core_modules()
    assert len(mods) > 5, mods
    # httpx imports rich for its own CLI when rich is installed; that is not the core's doing,
    # so UI modules already loaded by third-party imports are the baseline.
    code = (
        "import importlib, sys\n"
        "import httpx\n"
        "base = set(sys.modules)\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(n for n in set(sys.modules) - base if n.split('.')[0] in ('textual', 'rich', 'widgets', 'themes', 'textual_plotext'))\n"
        "bad += sorted(n for n in set(sys.modules) - base if n in ('tui.app', 'tui.cli', 'tui.launch') or n.startswith('tui.screens'))\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"core pulled in UI modules:\n{r.stdout}\n{r.stderr}"


def lint_imports() -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_import_linter_contract_holds():
    r = lint_imports()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "core is UI-free KEPT" in r.stdout


def test_core_data_flows_one_way():
    """sources -> history -> diagnosis -> monitor, with the cluster beside (pyproject.toml)."""
    r = lint_imports()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "core data flows one way KEPT" in r.stdout
    assert "metrics pipeline never imports the cluster or the simulator KEPT" in r.stdout


def test_url_mode_start_loads_no_cluster_or_triage_modules():
    """First paint (issue 14): what `kvwatch --url` imports before its first frame leaves out
    the cluster package, the triage screen with its runbook, and the installed-version lookup;
    they load when a cluster, a triage key or `--version` asks for them."""
    unused = ("tui.core.cluster.base", "tui.core.cluster.args", "tui.screens.triage",
              "tui.core.diagnosis.runbook", "importlib.metadata")
    code = (
        "import sys\n"
        "from tui.cli import build_parser\n"
        "build_parser().parse_args(['--url', 'http://127.0.0.1:9/'])\n"
        "import tui.app, tui.screens.fleet\n"
        f"print('\\n'.join(m for m in {unused!r} if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [], f"imported at start although --url does not use them:\n{r.stdout}"


def test_version_flag_still_reports_the_installed_version():
    code = "import sys; from tui.cli import build_parser; build_parser().parse_args(['--version'])"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kvwatch ") and r.stdout.strip() != "kvwatch", r.stdout

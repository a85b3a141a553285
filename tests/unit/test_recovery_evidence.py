"""Recovery is confirmed only on the evidence it lists: a criterion without enough data is "not
yet" (never a tick), latency is compared with a baseline from before the incident (never one
taken during it, as a replacement pod's first minutes are), and triage steps with no data say
"no data", not "pass"."""

from __future__ import annotations

from rich.text import Text

from tui.core.diagnosis import Thresholds
from tui.core.diagnosis.runbook import runbook, verify
from tui.core.diagnosis.triage import triage
from tui.screens.diagnosis_text import runbook_text, triage_text

from .diagnosis_helpers import LAT_B, hist, history_of, scrape

T = Thresholds()


def episode(phases: list[tuple[int, str]], t0: float = 1000.0, step: float = 5.0):
    """Scrapes through phases of (count, kind): calm, pressure, overloaded or clean, each with a
    TTFT histogram (cumulative) whose new observations are fast when calm, slow in trouble."""
    out, obs, pre, i = [], [], 0.0, 0
    for n, kind in phases:
        for _ in range(n):
            trouble = kind in ("pressure", "overloaded")
            obs += [4.0 if trouble else 0.2] * 10
            if kind == "pressure":
                pre += 3.0
            out.append(scrape(t0 + step * i, kv=0.97 if kind == "pressure" else 0.5, preempt=pre,
                              waiting=30.0 if trouble else 0.0, running=20.0,
                              hists={"ttft": hist(LAT_B, obs)}))
            i += 1
    return out


def _marks(rb) -> dict[str, str]:
    text = runbook_text(rb, lambda a: ("x", None), {}, ascii=False).plain
    block = text[text.index("Verify:"):]
    return {key: next(ln.strip()[0] for ln in block.splitlines() if label in ln)
            for key, label in (("kv", "KV usage <"), ("waiting", "waiting drained"), ("ttft", "TTFT"))}


def test_a_criterion_short_of_its_window_is_not_yet_never_a_tick():
    # 49 s of clean history (a new pod): KV never high, but not for the 120 s the criterion needs
    h = history_of(episode([(10, "clean")], t0=2000.0))
    v = verify(h, h.scrapes[-1].ts, T, incident_start=1900.0)
    kv = next(c for c in v.criteria if c.key == "kv")
    assert "none in 45 s of history (needs 120 s)" in kv.text
    assert kv.status == "not-yet" and not v.confirmed
    rb = runbook(h, h.scrapes[-1].ts, T, rollouts=[], incident_start=1900.0)
    assert _marks(rb)["kv"] != "✔", runbook_text(rb, lambda a: ("x", None), {}).plain


def test_recovery_is_not_confirmed_without_the_latency_it_lists():
    # the incident from the first scrape: no calm time before it, so no latency baseline
    h = history_of(episode([(20, "pressure"), (40, "clean")]))
    now = h.scrapes[-1].ts
    rb = runbook(h, now, T, rollouts=[], applied={"edit:max_num_seqs": 1050.0})
    v = rb.verification
    ttft = next(c for c in v.criteria if c.key == "ttft")
    assert ttft.met is None and "baseline" in ttft.text
    assert not v.confirmed, v.text
    assert "TTFT" in v.text  # says what it is waiting for
    assert "RECOVERY CONFIRMED" not in runbook_text(rb, lambda a: ("x", None), {}).plain
    # with a calm stretch before it, the same recovery is confirmed on all its evidence
    h = history_of(episode([(30, "calm"), (20, "pressure"), (40, "clean")]))
    v = runbook(h, h.scrapes[-1].ts, T, rollouts=[]).verification
    assert v.confirmed, v.text
    assert next(c for c in v.criteria if c.key == "ttft").met is True


def test_a_replacement_pods_baseline_is_not_taken_during_the_incident():
    # a pod born into the incident: queued and slow from its first scrape, then overloaded
    h = history_of(episode([(12, "overloaded"), (40, "clean")], t0=5000.0))
    v = verify(h, h.scrapes[-1].ts, T, incident_start=None)
    ttft = next(c for c in v.criteria if c.key == "ttft")
    assert ttft.met is None, ttft.text  # its own first minutes are no "before the incident"
    assert not v.confirmed
    # the baseline the incident's first replica had is carried over: compared against it
    v = verify(h, h.scrapes[-1].ts, T, incident_start=4000.0, baselines={"ttft": 0.25, "itl": None})
    ttft = next(c for c in v.criteria if c.key == "ttft")
    assert ttft.met is True and "before the incident" in ttft.text, ttft.text


def test_latency_not_exposed_does_not_hold_recovery_back():
    h = history_of([scrape(1000.0 + 5 * i, kv=0.97 if 10 <= i < 20 else 0.5, preempt=3.0 * min(max(i - 9, 0), 10))
                    for i in range(60)])
    v = verify(h, h.scrapes[-1].ts, T, incident_start=1050.0)
    ttft = next(c for c in v.criteria if c.key == "ttft")
    assert "not exposed" in ttft.text and v.confirmed, (ttft.text, v.text)


def test_triage_steps_with_no_data_say_no_data():
    h = history_of(episode([(6, "calm")]))
    r = triage(h, h.scrapes[-1].ts, T, logs=[], events=[])
    assert r.item("logs").status == "missing" and r.item("events").status == "missing"
    text = triage_text(r, {}).plain
    assert "pass" not in next(ln for ln in text.splitlines() if "Allocation failures" in ln)
    assert "no data" in next(ln for ln in text.splitlines() if "Kubernetes events" in ln)
    assert isinstance(triage_text(r, {}), Text)

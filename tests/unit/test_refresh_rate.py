"""The achieved refresh rate: shown only when collection falls behind its interval."""

from __future__ import annotations

from tui.core.refresh_rate import RefreshMeter


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def run(meter: RefreshMeter, clock: Clock, every: float, seconds: float) -> None:
    end = clock.t + seconds
    while clock.t < end:
        clock.t += every
        meter.tick()


def test_keeping_the_interval_is_not_behind():
    clock = Clock()
    m = RefreshMeter(1.0, clock=clock)
    run(m, clock, 1.02, 30)  # a refresh's own cost on top of the sleep: still 0.98/s
    assert 0.97 < m.achieved() < 0.99
    assert m.behind() is None and m.status() == ""


def test_slow_refreshes_report_the_achieved_rate():
    clock = Clock()
    m = RefreshMeter(1.0, clock=clock)
    run(m, clock, 1.7, 30)
    assert abs(m.achieved() - 1 / 1.7) < 0.01
    assert m.status() == "behind: 0.59/s of 1/s"


def test_rate_follows_the_last_window_not_the_whole_run():
    clock = Clock()
    m = RefreshMeter(1.0, window=10.0, clock=clock)
    run(m, clock, 2.0, 60)  # slow for a minute
    assert m.behind() is not None
    run(m, clock, 1.0, 12)  # then keeps up again
    assert m.behind() is None


def test_no_verdict_before_half_a_window():
    clock = Clock()
    m = RefreshMeter(0.5, window=10.0, clock=clock)
    run(m, clock, 1.0, 4)  # 4 s of 1/s against 2/s: too early to say
    assert m.achieved() is None and m.status() == ""
    run(m, clock, 1.0, 2)
    assert m.status() == "behind: 1/s of 2/s"

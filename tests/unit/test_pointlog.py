"""PointLog: old derived points packed into arrays come back exactly, in value and in type."""

from __future__ import annotations

from dataclasses import fields

from tui.core.model import ReplicaMetrics
from tui.core.pointlog import PointLog


def metrics(i: int) -> ReplicaMetrics:
    vals = {f.name: (None if (i + k) % 3 == 0 else 0.1 * i + k) for k, f in enumerate(fields(ReplicaMetrics))}
    vals["gpu_count"] = i % 4 if i % 5 else None  # an int field stays an int
    vals["kv_usage"] = -0.0 if i == 7 else vals["kv_usage"]
    return ReplicaMetrics(**vals)


def test_packed_points_come_back_equal_in_value_and_type():
    log, ref = PointLog(maxlen=50, keep=8), []
    for i in range(120):
        pt = (float(i), metrics(i))
        log.append(pt)
        ref.append(pt)
    ref = ref[-50:]
    assert len(log) == 50 and list(log) == ref and list(reversed(log)) == ref[::-1]
    assert [log[i] for i in range(-50, 50)] == ref + ref and log[3:40:7] == ref[3:40:7]
    for (_, a), (_, b) in zip(log, ref, strict=False):
        assert [type(getattr(a, f.name)) for f in fields(a)] == [type(getattr(b, f.name)) for f in fields(b)]
    assert log[-1] is ref[-1]  # the newest stay the very objects (the diagnosis tracks them so)


def test_a_value_that_is_no_number_is_kept_whole():
    log = PointLog(maxlen=10, keep=2)
    odd = (0.0, ReplicaMetrics(max_num_seqs="256"))  # type: ignore[arg-type]
    log.append(odd)
    for i in range(1, 5):
        log.append((float(i), ReplicaMetrics()))
    assert log[0] == odd


def test_frozen_copy_does_not_follow_later_points():
    log = PointLog(maxlen=20, keep=4)
    for i in range(10):
        log.append((float(i), metrics(i)))
    snap = log.frozen()
    for i in range(10, 40):
        log.append((float(i), metrics(i)))
    assert [ts for ts, _ in snap] == [float(i) for i in range(10)]


def test_a_quantile_in_the_inf_bucket_stays_an_atleast_without_keeping_the_point_whole():
    from tui.core.model import AtLeast

    log = PointLog(maxlen=10, keep=2)
    pts = [(float(i), ReplicaMetrics(ttft_p95_s=AtLeast(640.0), gpu_count=2, kv_usage=0.5)) for i in range(6)]
    for p in pts:
        log.append(p)
    assert list(log) == pts and not log._odd
    assert type(log[0][1].ttft_p95_s) is AtLeast and type(log[0][1].gpu_count) is int

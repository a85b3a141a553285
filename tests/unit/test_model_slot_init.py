"""model.slot_init: the objects made several times per replica per refresh get an __init__ that
sets their slots through the slots' descriptors; each must take the same arguments (positional,
by keyword, left out for the default or a fresh default_factory value) into the same fields as
the dataclass' own, and stay frozen, equal, hashable, replaceable and picklable."""

from __future__ import annotations

import dataclasses
import pickle
import random

import pytest

from tui.core import model
from tui.core.model import Evidence, Finding, ReplicaMetrics, ReplicaView


@pytest.mark.parametrize("cls", [Evidence, Finding, ReplicaMetrics, ReplicaView])
def test_slot_init_takes_every_argument_into_its_own_field(cls):
    fs = dataclasses.fields(cls)
    rng = random.Random(len(fs))
    for _ in range(200):
        given = {f.name: object() for f in fs
                 if (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
                 or rng.random() < 0.5}
        names = [f.name for f in fs]
        k = 0  # a prefix of the given fields positionally, the rest by keyword
        while k < len(names) and names[k] in given and rng.random() < 0.7:
            k += 1
        obj = cls(*[given[n] for n in names[:k]], **{n: given[n] for n in names[k:] if n in given})
        other = cls(**given)
        for f in fs:
            got = getattr(obj, f.name)
            if f.name in given:
                assert got is given[f.name], f.name
            elif f.default is not dataclasses.MISSING:
                assert got is f.default, f.name
            else:  # a fresh value of the factory for each object
                assert got == f.default_factory() and got is not getattr(other, f.name), f.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, fs[0].name, 1)


def test_slot_init_objects_compare_hash_replace_and_pickle_as_before():
    ev = Evidence("kv_usage", 0.97, 0.9, ">=", True, "KV usage 0.97 >= 0.90")
    f = Finding("kv-pressure", (ev,), 12.0, ("gpu",), "summary")
    m = ReplicaMetrics(0.97, 3.0)
    v = ReplicaView("r", "ok", f, m, {"kv_usage": (0.5,)})
    for obj in (ev, f, m):
        assert pickle.loads(pickle.dumps(obj)) == obj and hash(pickle.loads(pickle.dumps(obj))) == hash(obj)
        assert dataclasses.replace(obj) == obj
    assert dataclasses.replace(v, name="s").name == "s" and dataclasses.replace(v, name="s").finding is f
    assert m.kv_usage == 0.97 and m.waiting == 3.0 and m.running is None
    assert repr(ev) == ("Evidence(signal='kv_usage', value=0.97, threshold=0.9, op='>=', crossed=True, "
                        "text='KV usage 0.97 >= 0.90')")


def test_slot_init_refuses_a_class_it_cannot_copy_the_init_of():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(AssertionError):
        model.slot_init(Checked)

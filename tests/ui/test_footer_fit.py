"""The footer's keys fit the width they are drawn at: a screen with many keys at 120 columns
drops the docked "^p palette" and closes up, as at 80, instead of cutting its last key under it
("p Paus▏^p palette" on triage at 120x30 before); at 80 a key that does not fit is left out whole
(`?` lists it), never cut ("z Roll" on triage at 80x24 before)."""

from __future__ import annotations

import pytest
from widgets.footer import footer_keys

from tests.ui.conftest import prime
from tests.ui.kube_app import until
from tests.ui.test_80x24 import HOT, demo_like_app
from tui.screens.triage import TriageScreen


@pytest.mark.parametrize("size", [(120, 30), (160, 45), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_footer_key_is_whole_on_triage(tmp_path, size):
    app = demo_like_app(tmp_path, HOT)
    async with app.run_test(size=size) as pilot:
        await prime(pilot, 3)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TriageScreen) and footer_keys(app.screen))
        await pilot.pause()
        keys = list(footer_keys(app.screen))
        assert any(k.key == "p" for k in keys) or size[0] < 100, [k.key for k in keys]
        assert keys[0].key == "question_mark" and keys[1].key == "q", [k.key for k in keys]
        for k in keys:
            r = k.region
            assert r.width > 0 and r.right <= size[0], (k.key, r)
            hidden = [o.key for o in keys if o is not k and o.region.overlaps(r)]
            assert hidden == [], (k.key, hidden)

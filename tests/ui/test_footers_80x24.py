"""At 80x24 every screen's footer keeps `? Help` and `q Quit` on screen and uncovered."""

from __future__ import annotations

import pytest
from widgets.footer import footer_keys

from tests.ui.conftest import prime
from tests.ui.test_80x24 import demo_like_app

SIZE = (80, 24)


def _visible(app, key: str) -> bool:
    shown = footer_keys(app.screen)
    keys = [k for k in shown if k.key == key]
    if not keys:
        return False
    region = keys[0].region
    others = [k for k in shown if k is not keys[0] and k.region.overlaps(region)]
    return region.width > 0 and region.right <= SIZE[0] and not others


@pytest.mark.parametrize("keys", [("t",), ("g",), ("c",), ("enter",)])
async def test_help_and_quit_stay_in_the_footer(tmp_path, keys):
    app = demo_like_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await prime(pilot, 3)
        for k in keys:
            await pilot.press(k)
        await pilot.pause()
        await pilot.pause()
        shown = sorted(k.key for k in footer_keys(app.screen))
        assert _visible(app, "q") and _visible(app, "question_mark"), (type(app.screen).__name__, shown)

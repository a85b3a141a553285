"""The events screen at 80 columns keeps MESSAGE on screen, with room to read it."""

from __future__ import annotations

from textual.widgets import DataTable

from tests.ui.conftest import make_app
from tests.ui.test_mitigation_snapshots import wait
from tui.core.cluster.values import EventInfo
from tui.screens.events import EventsScreen

EVENTS = [EventInfo(100.0, "Warning", "BackOff", "Pod/llama-8b-7d9f-abcde", "Back-off restarting failed container vllm", 3),
          EventInfo(50.0, "Normal", "Scheduled", "Pod/llama-8b-7d9f-abcde", "assigned to gpu-node-1")]


class _Events:
    async def events(self, namespace: str):
        return list(EVENTS)


async def test_message_column_is_readable_at_80_columns():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = EventsScreen(_Events(), "inference", clock=lambda: 110.0)
        await app.push_screen(screen)
        table = screen.query_one(DataTable)
        await wait(pilot, lambda: table.row_count == 2)
        keys = [str(k.value) for k in table.columns]
        assert "message" in keys
        start = sum(c.get_render_width(table) for k, c in table.columns.items() if str(k.value) != "message"
                    and keys.index(str(k.value)) < keys.index("message"))
        assert start <= 80 - 30, (start, keys)  # at least 30 columns of message on screen
        row = [str(c) for c in table.get_row_at(0)]
        assert any("Back-off" in c for c in row) and any("BackOff" in c for c in row), row

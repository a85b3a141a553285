"""Keys typed after `/`, `:` or `s` (scale) belong to the prompt, however fast they come.

Textual runs a key's binding only when the key has bubbled from the focused widget back up to
the app, and gives an input focus a message later still; the `:` prompt is a screen pushed by a
worker. So a pasted or fast-typed "/r2-1" used to reach the fleet screen as hotkeys (`r`:
restart). The opening action calls `hold()`; from then on the app keeps every key it sees (new
ones and ones already on their way back up) instead of acting on it, and a `PromptInput` that
gains focus posts `KeysReady`, on which the app dispatches fresh copies of the kept keys, in the
order they were typed, to it. Keys kept longer than HOLD_S (the prompt never opened) are dropped,
never delivered as hotkeys; so are they at once when the opener knows the prompt will not open
(`drop()`: the scale prompt's read of the Deployment failed).
"""

from __future__ import annotations

from typing import Awaitable, Callable

from textual import events
from textual.message import Message
from textual.widgets import Input

HOLD_S = 5.0


class KeysReady(Message):
    """A prompt's input has focus: the held keys may go to it."""


class PromptInput(Input):
    """An Input that takes the keys held for it when it gains focus."""

    def on_focus(self) -> None:
        self.app.post_message(KeysReady())


class KeyHold:
    def __init__(self, set_timer: Callable, dropped: Callable[[int], None]) -> None:
        self._set_timer = set_timer
        self._dropped = dropped
        self._held: list[events.Key | events.Paste] | None = None
        self._timer = None

    @property
    def holding(self) -> bool:
        return self._held is not None

    @property
    def held(self) -> int:
        """How many keys are kept now."""
        return len(self._held or ())

    def hold(self) -> None:
        """Keep every key from now until a PromptInput has focus."""
        if self._held is None:
            self._held = []
        if self._timer is not None:
            self._timer.stop()
        self._timer = self._set_timer(HOLD_S, self._expire)

    def take(self, event: events.Event) -> bool:
        """Keep `event` if holding (True: the caller must not dispatch it)."""
        if self._held is None or not isinstance(event, (events.Key, events.Paste)):
            return False
        self._held.append(event)
        return True

    async def release(self, dispatch: Callable[[events.Event], Awaitable[None]]) -> None:
        held, self._held = self._held or [], None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        for event in sorted(held, key=lambda e: e.time):  # typing order (bubbled keys come back late)
            fresh = events.Paste(event.text) if isinstance(event, events.Paste) else events.Key(event.key, event.character)
            await dispatch(fresh)

    def drop(self) -> None:
        """The prompt will not open: the keys kept for it are dropped now (and said), not in HOLD_S."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._expire()

    def _expire(self) -> None:
        held, self._held, self._timer = self._held or [], None, None
        if held:
            self._dropped(len(held))

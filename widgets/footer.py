"""The footer with the keys a user needs on every screen first: `?` (help) and `q` (quit) lead,
so a narrow terminal (80x24) cuts a screen's own keys, never the way out or to the help.

Textual's footer is one widget per key, rebuilt (removed, mounted, styled) each time the screen
says its bindings may have changed: on opening a screen that is said several times (mount,
focus, resume, the mitigation keys' permission check), at ~40 ms a rebuild on a loaded 2-core
machine. This one draws its keys in its first layout and rebuilds only when what it shows (keys,
labels, enabled, the palette key) did change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FIRST = ("question_mark", "q")  # Textual key names, in the order shown


class KvFooter(Footer):
    _shown: tuple | None = None  # what the keys on show were built from (_keys_shown)

    def _keys_shown(self) -> tuple:
        """Everything the footer's keys are built from (Footer.compose reads the same)."""
        app = self.app
        palette = app.COMMAND_PALETTE_BINDING if self.show_command_palette and app.ENABLE_COMMAND_PALETTE else None
        return (self.show_command_palette, tuple(
            (key, b.key, b.action, b.description, app.get_key_display(b), b.group, b.tooltip, enabled, tooltip)
            for key, (_ns, b, enabled, tooltip) in self.screen.active_bindings.items() if b.show or key == palette))

    def compose(self) -> ComposeResult:
        # the keys in the first frame, not an empty bar until the screen's first bindings signal
        self.set_reactive(Footer._bindings_ready, True)
        # the width's settings (on_resize) from the start: a change after mount restyles every key
        # (and, for the palette key, rebuilds the footer)
        narrow = self._narrow(self.size.width or self.app.size.width)
        if self.compact != narrow:
            self.set_reactive(Footer.compact, narrow)
            self.set_class(narrow, "-compact")
        self.set_reactive(Footer.show_command_palette, not narrow)
        self._shown = self._keys_shown()
        widgets = list(super().compose())
        for w in widgets:
            if isinstance(w, FooterKey):  # its first value, set without the watcher's restyle
                # the keys follow the footer's compact; the palette key is not bound to it
                compact = True if w.has_class("-command-palette") else narrow
                w.set_reactive(FooterKey.compact, compact)
                w.set_class(compact, "-compact", update=False)
        lead = sorted((w for w in widgets if isinstance(w, FooterKey) and w.key in FIRST),
                      key=lambda w: FIRST.index(w.key))
        yield from lead
        yield from (w for w in widgets if not any(w is x for x in lead))

    async def recompose(self) -> None:
        if self.is_attached and self._shown is not None and self._shown == self._keys_shown():
            return  # the same keys: a rebuild would only cost the time of one
        await super().recompose()

    PALETTE_W = 13  # "^p palette", its padding and the border before it

    def _narrow(self, width: int) -> bool:
        """Close up the keys and leave out the docked palette key below 100 columns, or when
        the keys at their full spacing would run under it (many keys at 120 cut the last one)."""
        if width < 100:
            return True
        app = self.app
        need = sum(len(app.get_key_display(b)) + len(b.description) + 3  # "k desc" + padding 1 + 1
                   for _key, (_ns, b, _enabled, _tip) in self.screen.active_bindings.items() if b.show)
        return need + self.PALETTE_W > width

    def on_resize(self) -> None:
        narrow = self._narrow(self.size.width)
        self.compact = narrow  # one space between keys, not two
        if self.show_command_palette == narrow:  # "^p palette" is docked over the last keys
            self.show_command_palette = not narrow
            self.refresh(recompose=True)

"""The footer with the keys a user needs on every screen first: `?` (help) and `q` (quit) lead,
so a narrow terminal (80x24) cuts a screen's own keys, never the way out or to the help."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

FIRST = ("question_mark", "q")  # Textual key names, in the order shown


class KvFooter(Footer):
    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        lead = sorted((w for w in widgets if isinstance(w, FooterKey) and w.key in FIRST),
                      key=lambda w: FIRST.index(w.key))
        yield from lead
        yield from (w for w in widgets if not any(w is x for x in lead))

    def on_resize(self) -> None:
        narrow = self.size.width < 100
        self.compact = narrow  # one space between keys, not two
        if self.show_command_palette == narrow:  # "^p palette" is docked over the last keys
            self.show_command_palette = not narrow
            self.refresh(recompose=True)

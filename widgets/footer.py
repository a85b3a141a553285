"""The footer with the keys a user needs on every screen first: `?` (help) and `q` (quit) lead,
so a narrow terminal (80x24) cuts a screen's own keys, never the way out or to the help.

One widget draws every key, as Textual's footer draws them (the same styles, spacing and docked
"^p palette"); a click on a key presses it. Textual's footer is one widget per key (six to
fifteen a screen), each composed, styled, laid out and painted on every screen's opening: a
third of opening the diagnosis screens on a loaded 2-core machine. Here the keys are a line of
text, read from the screen's bindings when drawn, and repainted only when they change."""

from __future__ import annotations

from dataclasses import dataclass, replace
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

FIRST = ("question_mark", "q")  # Textual key names, in the order shown
# the blanks between and after the keys: Textual's footer drew them as its own background, with
# no colour (what makes a blank a segment of its own, or not, where it meets a key); marked
# here, and bared as drawn (render_lines)
_GAP = Style(meta={"kv-footer-gap": True})


@dataclass(frozen=True)
class ShownKey:
    """A key as drawn: `x`, `width` in the footer's columns (unclipped: a key running off the
    right edge is wider than what is seen of it); `palette`: the docked "^p palette"."""

    key: str
    key_display: str
    description: str
    action: str
    disabled: bool
    tooltip: str
    palette: bool
    compact: bool
    x: int
    width: int
    region: Region = Region(0, 0, 0, 0)  # on the screen (KvFooter.regions)


class KvFooter(Widget, can_focus=False):
    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"kv-footer--item", "kv-footer--key", "kv-footer--description", "kv-footer--hover",
                         "kv-footer--palette-border"}
    # Textual's Footer and FooterKey CSS (textual/widgets/_footer.py), as component styles
    DEFAULT_CSS = """
    KvFooter {
        color: $footer-foreground;
        background: $footer-background;
        dock: bottom;
        height: 1;
        text-wrap: nowrap;
        .kv-footer--item { background: $footer-item-background; }
        .kv-footer--key { color: $footer-key-foreground; background: $footer-key-background; text-style: bold; }
        .kv-footer--description { color: $footer-description-foreground; background: $footer-description-background; }
        .kv-footer--hover { color: $footer-key-foreground; background: $block-hover-background; }
        .kv-footer--palette-border { color: $foreground 20%; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._shown: tuple | None = None  # the bindings the keys on show were drawn from
        self._hover: int | None = None  # index in keys() of the key under the mouse

    # -- which keys, where ----------------------------------------------------------------------
    def _keys_bound(self) -> tuple:
        """(key, binding, enabled, tooltip) of the keys to show, in order, and the palette's."""
        app = self.app
        active = self.screen.active_bindings
        by_action: dict[str, tuple] = {}  # one key an action, the first bound (as Textual's)
        for key, (_ns, b, enabled, tooltip) in active.items():
            if b.show:
                by_action.setdefault(b.action, (key, b, enabled, tooltip))
        keys = list(by_action.values())
        lead = sorted((k for k in keys if k[0] in FIRST), key=lambda k: FIRST.index(k[0]))
        rest = [k for k in keys if k[0] not in FIRST]
        palette = None
        if app.ENABLE_COMMAND_PALETTE and app.COMMAND_PALETTE_BINDING in active:
            _ns, b, enabled, tooltip = active[app.COMMAND_PALETTE_BINDING]
            palette = (b.key, b, enabled, tooltip)
        # the width every shown binding would take at full spacing, " k desc " each (_narrow)
        need = sum(len(app.get_key_display(b)) + len(b.description) + 3 for _ns, b, _e, _t in active.values() if b.show)
        return tuple(lead + rest), palette, need

    PALETTE_W = 13  # "^p palette", its padding and the border before it

    def _narrow(self, width: int, need: int) -> bool:
        """Close up the keys and leave out the docked palette key below 100 columns, or when
        the keys at their full spacing would run under it (many keys at 120 cut the last one)."""
        return width < 100 or need + self.PALETTE_W > width

    def keys(self, bound: tuple | None = None) -> list[ShownKey]:
        """The keys as drawn at the footer's width, in order; the palette key last (`bound`:
        _keys_bound(), where already read)."""
        app = self.app
        width = self.size.width or app.size.width
        keys, palette, need = bound or self._keys_bound()
        narrow = self._narrow(width, need)
        dock: ShownKey | None = None
        if palette is not None and not narrow:
            key, b, enabled, _tip = palette
            shown = app.get_key_display(b)
            w = (0 if getattr(app, "ascii", False) else 1) + len(shown) + 1 + len(b.description) + 1  # border, "^p palette", padding
            dock = ShownKey(key, shown, b.description, b.action, not enabled, b.tooltip or b.description,
                            True, True, max(0, width - w), w)
        room = dock.x if dock is not None else width
        out: list[ShownKey] = []
        x = 0
        for i, (key, b, enabled, tooltip) in enumerate(keys):
            shown = app.get_key_display(b)
            w = len(shown) + (len(b.description) + 1 if b.description else 0) + (0 if narrow else 2)
            if x + w > room and i >= len(FIRST):
                break  # left out whole, and the keys after it (`?` lists them): never "z Roll"
            out.append(ShownKey(key, shown, b.description, b.action, not enabled, tooltip, False, narrow, x, w))
            x += w + (1 if narrow else 0)  # a narrow footer: one blank after each key
        if dock is not None:
            out.append(dock)
        return out

    # -- drawing ----------------------------------------------------------------------------------
    def render(self) -> Text:
        self._shown = self._keys_bound()
        keys = self.keys(self._shown)
        style = self.get_component_rich_style
        item, hover = style("kv-footer--item"), style("kv-footer--hover")
        key_style, desc_style = style("kv-footer--key"), style("kv-footer--description")
        t = Text(no_wrap=True, end="")
        palette = next((k for k in keys if k.palette), None)
        for i, k in enumerate(keys):
            if k.palette:
                break
            ks, ds = self._key_styles(i, k.disabled, item, hover, key_style, desc_style)
            kp = "" if k.compact else " "
            t.append(kp + k.key_display + kp, style=ks)
            if k.description:
                desc = " " + k.description if k.compact else k.description + " "
                t.append(desc, style=ds)
            if k.compact and i + 1 < len(keys):  # the blank between keys (after the last: the line's)
                t.append(" ", style=_GAP)
        if palette is not None:
            start = palette.x
            if t.cell_len > start:  # docked over the keys it covers
                t.truncate(start)
            elif t.cell_len < start:
                t.append(" " * (start - t.cell_len), style=_GAP)
            i = len(keys) - 1
            base = (hover if i == self._hover else item) + (Style(dim=True) if palette.disabled else Style())
            ks, ds = self._key_styles(i, palette.disabled, item, hover, key_style, desc_style)
            if not getattr(self.app, "ascii", False):
                t.append("▏", style=base + style("kv-footer--palette-border"))
            t.append(palette.key_display, style=ks)
            t.append(" " + palette.description, style=ds)
            t.append(" ", style=base + _GAP)  # its padding, drawn bare as Textual's was
        width = self.size.width
        if t.cell_len < width:
            t.append(" " * (width - t.cell_len), style=_GAP)
        return t

    def render_lines(self, crop: Region) -> list[Strip]:
        return [_bare_gaps(strip) for strip in super().render_lines(crop)]

    def _key_styles(self, i: int, disabled: bool, item: Style, hover: Style, key: Style,
                    desc: Style) -> tuple[Style, Style]:
        """The styles of key `i`'s key and description: under the mouse, on the hover background
        (the parts' own backgrounds are transparent over their key's, as in Textual's footer)."""
        dim = Style(dim=True) if disabled else Style()
        if i != self._hover:
            return item + dim + key, item + dim + desc
        return (hover + dim + Style(color=key.color, bold=key.bold, italic=key.italic, underline=key.underline),
                hover + dim + Style(color=desc.color, bold=desc.bold, italic=desc.italic, underline=desc.underline))

    def regions(self) -> list[ShownKey]:
        """The keys with their regions on the screen, as widgets of their own would have them
        (help and quit, which always lead, may run off a footer narrower than they are)."""
        fx, fy, fw, _fh = self.region
        return [replace(k, region=Region(fx + k.x, fy, k.width, 1)) if k.x < fw else k for k in self.keys()]

    # -- keeping up with the bindings, and the mouse ------------------------------------------
    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen) -> None:
        if self.is_attached and screen is self.screen and self._shown != self._keys_bound():
            self.refresh()  # only when what it shows changed

    def _key_at(self, x: int) -> int | None:
        keys = self.keys()
        palette = keys[-1] if keys and keys[-1].palette else None
        if palette is not None and x >= palette.x:
            return len(keys) - 1
        for i, k in enumerate(keys):
            if k.x <= x < k.x + k.width and not k.palette:
                return i
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        i = self._key_at(event.x)
        if i != self._hover:
            self._hover = i
            keys = self.keys()
            self.tooltip = keys[i].tooltip or None if i is not None and i < len(keys) else None
            self.refresh()

    def on_leave(self, _event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        i = self._key_at(event.x)
        keys = self.keys()
        if i is None or i >= len(keys):
            return
        if keys[i].disabled:
            self.app.bell()
        else:
            self.app.simulate_key(keys[i].key)


def _is_gap(style: Style | None) -> bool:
    return style is not None and style._meta is not None and bool(style.meta.get("kv-footer-gap"))


def _bare_gaps(strip: Strip) -> Strip:
    segments = list(strip)
    if not any(_is_gap(seg.style) for seg in segments):
        return strip
    return Strip([Segment(text, Style(bgcolor=style.bgcolor) if style is not None and _is_gap(style) else style, control)
                  for text, style, control in segments], strip.cell_length)


def footer_keys(screen) -> list[ShownKey]:
    """The keys of the screen's footer, with their regions on the screen (none without one)."""
    found = screen.query(KvFooter)
    return found.first().regions() if found else []

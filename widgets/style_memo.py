"""The stylesheet's answer for a widget, remembered by where the widget stands.

Textual styles each widget it mounts by matching every rule that may apply against the
widget's path from the app down (`Stylesheet.apply`): a quarter of opening a screen, and each
opening builds its screen anew, the same widgets at the same places. What a rule matches
depends only on each node of that path: its type, id, classes and the pseudo-classes the rules
name (hover, focus, disabled, first-child...), evaluated now. Keyed by those, a widget styled
before at the same place gets the same rules without matching them again; a new stylesheet
(a theme, a new widget's DEFAULT_CSS) starts afresh.

What is applied is what Textual's own apply would set: the same rules map, the same flags it
keeps on the node, the component classes styled the same way (they go through here too).
"""

from __future__ import annotations

from typing import Any

from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode

MAX_ENTRIES = 20_000  # paths remembered before starting again (a long session's worth)
ORDER = frozenset({"first-of-type", "last-of-type", "first-child", "last-child", "empty"})


class StyleMemo:
    """Installed on one Stylesheet instance (`install`): its `apply` looks up the memo first."""

    def __init__(self, sheet: Stylesheet) -> None:
        self.sheet = sheet
        self._apply = type(sheet).apply.__get__(sheet)  # Textual's
        self._replace = sheet.replace_rules
        self._rules: object = None  # the parsed rules the memo is for
        self._names: dict[frozenset[str], tuple[tuple[str, ...], tuple[bool, bool, bool, bool]]] = {}
        self._by_path: dict[tuple, Any] = {}
        self._seen: list[Any] = []  # the rules map Textual set while styling (captured)
        self.hits = self.misses = 0

    def install(self) -> None:
        self.sheet.apply = self.apply  # type: ignore[method-assign]
        self.sheet.replace_rules = self._capturing  # type: ignore[method-assign]

    def _capturing(self, node: DOMNode, rules: Any, animate: bool = False) -> None:
        self._seen.append((node, rules))
        self._replace(node, rules, animate=animate)

    def _candidates(self, names: frozenset[str]) -> tuple[tuple[str, ...], tuple[bool, bool, bool, bool]]:
        """The pseudo-classes named by the rules that may match a node with these selector names,
        and the flags Textual's apply keeps on the node for them."""
        found = self._names.get(names)
        if found is None:
            rules_map = self.sheet.rules_map
            pseudo: set[str] = set()
            for name in rules_map.keys() & names:
                for rule in rules_map[name]:
                    pseudo |= rule.pseudo_classes
            flags = ("hover" in pseudo, "focus-within" in pseudo, not pseudo.isdisjoint(ORDER),
                     "odd" in pseudo or "even" in pseudo)
            found = self._names[names] = (tuple(sorted(pseudo)), flags)
        return found

    def apply(self, node: DOMNode, *, animate: bool = False, cache: dict | None = None) -> None:
        rules = self.sheet.rules  # parses new sources first
        if rules is not self._rules or len(self._by_path) > MAX_ENTRIES:
            self._rules = rules
            self._names.clear()
            self._by_path.clear()
        pseudo, flags = self._candidates(frozenset(node._selector_names))
        key = tuple((type(n), n._id, frozenset(n._classes), tuple([n.has_pseudo_class(p) for p in pseudo]))
                    for n in node.css_path_nodes)
        hit = self._by_path.get(key, self)
        if hit is self:  # styled here for the first time: Textual matches the rules
            self.misses += 1
            seen = len(self._seen)
            self._apply(node, animate=animate, cache=cache)
            mine = [r for n, r in self._seen[seen:] if n is node]
            del self._seen[seen:]
            self._by_path[key] = mine[0] if mine else None  # None: no rule set anything
            return
        self.hits += 1
        node._has_hover_style, node._has_focus_within, node._has_order_style, node._has_odd_or_even = flags
        if hit is not None:
            self._replace(node, hit, animate=animate)
        self.sheet._process_component_classes(node)


NEEDS = ("apply", "replace_rules", "_process_component_classes", "rules", "rules_map")  # Textual's, used here


def install(sheet: Stylesheet) -> StyleMemo | None:
    """The memo on `sheet`; none (Textual's apply as it is) where Textual lacks what it uses."""
    if not all(hasattr(sheet, n) for n in NEEDS) or not all(
            hasattr(DOMNode, n) for n in ("css_path_nodes", "_selector_names", "has_pseudo_class")):
        return None
    memo = StyleMemo(sheet)
    memo.install()
    return memo

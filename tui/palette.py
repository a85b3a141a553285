"""The command palette (ctrl+p) offers kvwatch's own actions: those of the screen it was opened on
and the app's, from the action registry, only where they may be used now (the same
`check_action` that keeps the footer and the help honest: read-only, RBAC, replay)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

from textual.actions import parse
from textual.command import DiscoveryHit, Hit, Hits, Provider

from .actions import APP, Action, actions_for, keys_text, scope_of


def offered(app: App[Any], screen: Screen[Any]) -> Iterator[tuple[Action, App[Any] | Screen[Any]]]:
    """(action, the node that runs it) for each registry action usable now on `screen`."""
    for scope, node in ((scope_of(screen), screen), (APP, app)):
        for a in actions_for(scope):
            if not a.palette:
                continue
            _ns, name, params = parse(a.action)
            if node.check_action(name, params) is False:
                continue
            yield a, node


def _help(a: Action) -> str:
    """The palette's second line: where the action works, in words (never its binding id)."""
    where = "every screen" if APP in a.scopes else f"the {a.scopes[0]} screen" if len(a.scopes) == 1 else "this screen"
    return f"{a.description} on {where}" + (" (changes the cluster)" if a.mutates else "")


def _label(app, a: Action) -> str:
    keys = (getattr(app, "_keymap", {}) or {}).get(a.id, a.key)
    return f"{a.description} ({keys_text(keys)})"


class KvwatchCommands(Provider):
    """kvwatch's actions in the palette: type "drain" on the fleet screen to find Drain."""

    def _hits(self) -> list[tuple[str, Action, App[Any] | Screen[Any]]]:
        return [(_label(self.app, a), a, node) for a, node in offered(self.app, self.screen)]

    async def discover(self) -> Hits:
        for text, a, node in self._hits():
            yield DiscoveryHit(text, partial(node.run_action, a.action), help=_help(a))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, a, node in self._hits():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(node.run_action, a.action), text=text, help=_help(a))

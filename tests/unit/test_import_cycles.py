"""No import cycles in kvwatch's own packages (tui/, widgets/, themes/).

The graph is grimp's (what import-linter uses): every import statement counts, at module level
or inside a function, since a function-local import that closes a cycle is still a two-way
dependency, only hidden. `if TYPE_CHECKING:` imports are left out: they never run.
"""

from __future__ import annotations

import grimp

PACKAGES = ("tui", "widgets", "themes")

# Cycles that exist today and are being removed on other branches; each entry is the one import
# left out of the graph (importer, imported). Remove an entry once its cycle is gone: the test
# below fails when an entry no longer matches an import.
KNOWN: set[tuple[str, str]] = set()


def own_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)


def cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One shortest cycle through each import that lies on a cycle, as module names."""
    own = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    found: set[tuple[str, ...]] = set()
    for a in own:
        for b in graph.find_modules_directly_imported_by(a) & own:
            back = graph.find_shortest_chain(importer=b, imported=a)
            if back is not None:
                loop = (a, *back)  # a -> b -> ... -> a
                i = loop.index(min(loop[:-1]))  # the same cycle found from each edge: one name
                found.add(loop[i:-1] + loop[:i] + (loop[i],))
    return sorted(found)


def test_known_exceptions_still_match_an_import():
    graph = own_graph()
    stale = [pair for pair in KNOWN if not graph.direct_import_exists(importer=pair[0], imported=pair[1])]
    assert not stale, f"these cycles are gone: remove them from KNOWN: {stale}"


def test_no_import_cycles():
    graph = own_graph()
    for importer, imported in KNOWN:
        graph.remove_import(importer=importer, imported=imported)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_cycle_finder_sees_a_cycle_through_a_package():
    # guards the finder itself: a three-module loop, one leg through a package's __init__
    graph = grimp.ImportGraph()
    for m in ("tui", "tui.a", "tui.b", "tui.c", "widgets", "widgets.x"):
        graph.add_module(m)
    graph.add_import(importer="tui.a", imported="tui.b")
    graph.add_import(importer="tui.b", imported="tui")
    graph.add_import(importer="tui", imported="tui.a")
    graph.add_import(importer="widgets.x", imported="tui.c")
    assert cycles(graph) == [("tui", "tui.a", "tui.b", "tui")]

"""Load YAML from a file the user points kvwatch at (`audit -f`), with bounded work.

YAML aliases share one node, so a 600-byte file of nested aliases is cheap to parse and huge
once anything walks it (9**8 strings: 52 s and 720 MB in the audit). Each document's node graph
is measured as it would be expanded, before it is constructed; past `MAX_NODES` the document is
refused. Its text is capped too, so the parser's own work is bounded.
"""

from __future__ import annotations

from typing import Any, Iterator

import yaml

MAX_NODES = 200_000  # expanded nodes per document: a large real manifest has a few thousand
MAX_BYTES = 16 * 1024 * 1024


class YamlLimitError(ValueError):
    """A document that would expand (or already is) beyond the bounds."""


def _expanded(node: yaml.Node, memo: dict[int, int], active: set[int]) -> int:
    """How many nodes `node` becomes once every alias is expanded (memoised per shared node)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise YamlLimitError("a YAML alias refers to itself (a recursive structure)")
    active.add(key)
    n = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            n += _expanded(child, memo, active)
            if n > MAX_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            n += _expanded(k, memo, active) + _expanded(v, memo, active)
            if n > MAX_NODES:
                break
    active.discard(key)
    memo[key] = n
    return n


def safe_load_all_bounded(text: str) -> Iterator[Any]:
    """As `yaml.safe_load_all`, raising YamlLimitError (with the document's number) for a
    document whose aliases expand beyond `MAX_NODES`, or a text beyond `MAX_BYTES`."""
    if len(text) > MAX_BYTES:
        raise YamlLimitError(f"more than {MAX_BYTES >> 20} MiB of YAML: refused")
    loader = yaml.SafeLoader(text)
    try:
        doc = 0
        while loader.check_node():
            doc += 1
            node = loader.get_node()
            if node is None:
                continue
            size = _expanded(node, {}, set())
            if size > MAX_NODES:
                raise YamlLimitError(f"document {doc}: YAML aliases expand it beyond {MAX_NODES} nodes "
                                     "(an alias bomb?): refused")
            yield loader.construct_document(node)
    finally:
        loader.dispose()

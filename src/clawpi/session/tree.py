"""The session as a tree of nodes, for navigators and `/tree`-style views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from clawpi.session.context import iso_to_ms
from clawpi.session.entries import Entry


@dataclass(slots=True)
class TreeNode:
    entry: Entry
    children: list[TreeNode] = field(default_factory=list)
    label: str | None = None


def build_tree(entries: Sequence[Entry], labels: Mapping[str, str]) -> list[TreeNode]:
    """Roots in file order; an entry whose parent is missing becomes a root too. Children are
    ordered oldest first. Iterative, so a very deep session cannot overflow the stack."""
    nodes: dict[object, TreeNode] = {}
    for entry in entries:
        entry_id = entry.get("id")
        nodes[entry_id] = TreeNode(
            entry, [], labels.get(entry_id) if isinstance(entry_id, str) else None
        )
    roots: list[TreeNode] = []
    for entry in entries:
        node = nodes[entry.get("id")]
        parent_id = entry.get("parentId")
        parent = nodes.get(parent_id) if parent_id is not None else None
        if parent is None or parent_id == entry.get("id") or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
    stack = list(roots)
    while stack:
        node = stack.pop()
        if len(node.children) > 1:
            node.children.sort(key=lambda child: iso_to_ms(child.entry.get("timestamp")) or 0)
        stack.extend(node.children)
    return roots

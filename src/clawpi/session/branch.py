"""The current branch, remembered and kept current as entries are appended under its leaf.

A turn asks several questions of the branch (its entries, the latest compaction on it, whether
it ever set a thinking level, the context the model sees); each is a walk from the leaf to the
root, so on a long session every turn would cost O(history) several times over. `Branch`
answers them from one walk, and an append under its leaf extends it in O(1).
"""

from __future__ import annotations

from collections.abc import Mapping

from clawpi.session.context import SessionContext, extend_context, get_path, resolve_path
from clawpi.session.entries import Entry


class Branch:
    """The root-first path to `leaf`, with the latest entry of each type on it and, once
    asked for, the resolved context."""

    __slots__ = ("_context", "ids", "latest", "leaf", "path")

    def __init__(self, by_id: Mapping[str, Entry], leaf: Entry) -> None:
        self.leaf = leaf
        self.path = get_path(by_id, leaf)
        self.ids: set[object] = set()
        self.latest: dict[object, Entry] = {}
        ids, latest = self.ids, self.latest
        for entry in self.path:
            ids.add(entry.get("id"))
            latest[entry.get("type")] = entry
        self._context: SessionContext | None = None

    def follows(self, entry: Entry) -> bool:
        """Whether `entry` is a new child of the leaf (so `extend` applies)."""
        parent_id = entry.get("parentId")
        return (
            parent_id is not None
            and parent_id == self.leaf.get("id")
            and entry.get("id") not in self.ids
        )

    def extend(self, entry: Entry) -> None:
        self.path.append(entry)
        self.ids.add(entry.get("id"))
        self.latest[entry.get("type")] = entry
        self.leaf = entry
        if self._context is not None and not extend_context(self._context, entry):
            self._context = None

    def context(self) -> SessionContext:
        """The context at the leaf: a copy the caller may change."""
        context = self._context
        if context is None:
            context = self._context = resolve_path(self.path)
        return SessionContext(
            messages=list(context.messages),
            agent_messages=list(context.agent_messages),
            thinking_level=context.thinking_level,
            model=dict(context.model) if context.model is not None else None,
        )

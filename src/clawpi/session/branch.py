"""The current branch, remembered and kept current as entries are appended under its leaf.

A turn asks several questions of the branch (its entries, the latest compaction on it, whether
it ever set a thinking level, the context the model sees); each is a walk from the leaf to the
root, so on a long session every turn would cost O(history) several times over. `Branch`
answers them from one walk, and an append under its leaf extends it in O(1).
"""

from __future__ import annotations

from collections.abc import Mapping

from clawpi.session.context import (
    SessionContext,
    extend_context,
    get_path,
    resolve_path,
    resolve_with_path,
)
from clawpi.session.entries import Entry


class Branch:
    """The root-first path to `leaf`; the latest entry of each type on it and the resolved
    context are worked out when first asked for, then kept current."""

    __slots__ = ("_context", "_latest", "leaf", "path")

    def __init__(self, by_id: Mapping[str, Entry], leaf: Entry, *, resolve: bool = False) -> None:
        """With `resolve`, the context is worked out in the same walk as the path."""
        self.leaf = leaf
        self._latest: dict[object, Entry] | None = None
        self._context: SessionContext | None
        if resolve:
            self._context, self.path = resolve_with_path(by_id, leaf)
        else:
            self._context, self.path = None, get_path(by_id, leaf)

    def follows(self, entry: Entry) -> bool:
        """Whether `entry` is a new child of the leaf (so `extend` applies). Appended entries
        get ids no other entry has, so a child of the leaf cannot already be on the path."""
        parent_id = entry.get("parentId")
        return parent_id is not None and parent_id == self.leaf.get("id") and entry is not self.leaf

    def extend(self, entry: Entry) -> None:
        self.path.append(entry)
        self.leaf = entry
        if self._latest is not None:
            self._latest[entry.get("type")] = entry
        if self._context is not None and not extend_context(self._context, entry):
            self._context = None

    def latest(self, kind: str) -> Entry | None:
        """The latest entry of type `kind` on the path."""
        latest = self._latest
        if latest is None:
            latest = self._latest = {}
            for entry in self.path:
                latest[entry.get("type")] = entry
        return latest.get(kind)

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

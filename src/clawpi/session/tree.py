"""The session tree in memory: entries indexed by id, labels, the leaf, and navigation.

`SessionTree` knows nothing of files; `SessionManager` (store.py) adds persistence on top.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import methodcaller

from clawpi.errors import ClawpiError
from clawpi.session.branch import Branch
from clawpi.session.context import SessionContext, build_session_context, get_path, iso_to_ms
from clawpi.session.entries import Entry

_GET_ID = methodcaller("get", "id")


class SessionError(ClawpiError):
    """A session operation was given something that does not exist or cannot be used."""


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


class SessionTree:
    """Entries in file order, indexed by id; the leaf is where the next entry attaches."""

    def __init__(self) -> None:
        self._header: Entry = {}
        self._entries: list[Entry] = []
        self._by_id: dict[str, Entry] = {}
        self._labels: dict[str, str] = {}
        self._leaf_id: str | None = None
        self._has_assistant = False
        self._branch: Branch | None = None
        """The last leaf's branch, extended by appends under it."""
        self._custom: dict[object, Entry] | None = None
        """The latest `custom` entry of each custom type, in file order (built when asked)."""

    def _reset(self, header: Entry, entries: list[Entry]) -> bool:
        """Index `entries` in one pass (on a large session each pass costs a cache miss per
        entry); extra header lines (pi's duplicate-header bug) and lines holding JSON that is
        not an object are set aside."""
        self._header = header
        by_id: dict[str, Entry] = {}
        labels: list[Entry] = []
        odd = False
        clean = True
        try:
            for entry in entries:
                by_id[entry.get("id")] = entry  # type: ignore[index]
                kind = entry.get("type")
                if kind == "label":
                    labels.append(entry)
                elif kind == "session":
                    odd = True
        except AttributeError:
            clean = False
        if odd or not clean:
            entries = [e for e in entries if type(e) is dict and e.get("type") != "session"]
            by_id = dict(zip(map(_GET_ID, entries), entries, strict=True))
            labels = [e for e in entries if e.get("type") == "label"]
        self._entries = entries
        self._by_id = by_id
        self._forget_indexes()
        self._labels = {}
        for entry in labels:
            self._apply_label(entry)
        self._leaf_id = entries[-1].get("id") if entries else None
        self._has_assistant = False
        return clean

    def _forget_indexes(self) -> None:
        """Entries changed other than by an append at the leaf: answer from the entries anew."""
        self._branch = None
        self._custom = None

    def _add(self, entry: Entry) -> None:
        """Append `entry` (a child of the leaf) and make it the leaf."""
        entry_id: str = entry["id"]
        self._entries.append(entry)
        self._by_id[entry_id] = entry
        self._leaf_id = entry_id
        branch = self._branch
        if branch is not None and branch.follows(entry):
            branch.extend(entry)
        if self._custom is not None and entry.get("type") == "custom":
            self._custom[entry.get("customType")] = entry

    def _apply_label(self, entry: Entry) -> None:
        target, label = entry.get("targetId"), entry.get("label")
        if not isinstance(target, str):
            return
        if label:
            self._labels[target] = label
        else:
            self._labels.pop(target, None)

    # -- navigation ---------------------------------------------------------------------------

    def get_leaf_id(self) -> str | None:
        return self._leaf_id

    def get_leaf_entry(self) -> Entry | None:
        return self._by_id.get(self._leaf_id) if self._leaf_id is not None else None

    def get_entry(self, entry_id: str) -> Entry | None:
        return self._by_id.get(entry_id)

    def get_children(self, parent_id: str | None) -> list[Entry]:
        return [e for e in self._by_id.values() if e.get("parentId") == parent_id]

    def get_label(self, entry_id: str) -> str | None:
        return self._labels.get(entry_id)

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Root-first path to `from_id` (default: the leaf), all entry types."""
        start = from_id if from_id is not None else self._leaf_id
        if start is None or (entry := self._by_id.get(start)) is None:
            return []
        branch = self._branch
        if start != self._leaf_id and (branch is None or branch.leaf is not entry):
            return get_path(self._by_id, entry)  # not the leaf: not worth remembering
        return list(self._leaf_branch(entry).path)

    def _leaf_branch(self, leaf: Entry, *, resolve: bool = False) -> Branch:
        branch = self._branch
        if branch is None or branch.leaf is not leaf:
            branch = self._branch = Branch(self._by_id, leaf, resolve=resolve)
        return branch

    def latest_on_branch(self, kind: str) -> Entry | None:
        """The latest entry of type `kind` on the leaf's branch (e.g. the last compaction)."""
        leaf = self.get_leaf_entry()
        return self._leaf_branch(leaf).latest(kind) if leaf is not None else None

    def last_custom_entry(self, custom_type: str) -> Entry | None:
        """The latest `custom` entry of `custom_type` in file order, on any branch."""
        index = self._custom
        if index is None:
            index = self._custom = {}
            for entry in self._entries:
                if entry.get("type") == "custom":
                    index[entry.get("customType")] = entry
        return index.get(custom_type)

    def get_tree(self) -> list[TreeNode]:
        return build_tree(self._entries, self._labels)

    def get_entries(self) -> list[Entry]:
        """All entries in file order (a new list; the dicts are the live entries)."""
        return list(self._entries)

    def get_header(self) -> Entry | None:
        return self._header or None

    def get_session_name(self) -> str | None:
        for entry in reversed(self._entries):
            if entry.get("type") == "session_info" and entry.get("name"):
                return str(entry["name"])
        return None

    def build_session_context(self) -> SessionContext:
        """The context at the leaf (a new object each time: the caller may change it)."""
        leaf = self.get_leaf_entry()
        if leaf is None:
            return build_session_context(self._entries, self._leaf_id, self._by_id)
        return self._leaf_branch(leaf, resolve=True).context()

    def branch(self, branch_from_id: str) -> None:
        """Move the leaf to an earlier entry; the next append starts a new branch there."""
        if branch_from_id not in self._by_id:
            raise SessionError(f"Entry {branch_from_id} not found")
        self._leaf_id = branch_from_id

    def reset_leaf(self) -> None:
        """Move before the first entry; the next append becomes a new root."""
        self._leaf_id = None

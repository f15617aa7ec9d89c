"""Bringing v1 and v2 session files up to the current format (v3), as pi does.

v1 files have no ids: entries become a linear chain in file order and a compaction's
`firstKeptEntryIndex` (an index into the file's lines, header included) becomes
`firstKeptEntryId`. v2 files call custom messages `hookMessage`; v3 calls them `custom`.
New keys are appended after the existing ones, so migrated lines read like pi's.
"""

from __future__ import annotations

from clawpi.session.entries import CURRENT_SESSION_VERSION, Entry, generate_id


def file_version(entries: list[Entry]) -> int:
    """The header's version; a file without one is v1.

    v1 entries carry no ids, so a file whose entries do was written by v2 or later, whatever
    its header says: a header damaged in its `version` (one flipped bit turns `"version":3`
    into `"versiom":3` or `"version":1`) must not send it through the v1 migration, which
    would give every entry a new id and flatten its tree into one chain.
    """
    version = 1
    for entry in entries:
        if entry.get("type") == "session":
            value = entry.get("version")
            if isinstance(value, int) and not isinstance(value, bool):
                version = value
            break
    if version < 2 and any(
        isinstance(entry.get("id"), str) for entry in entries if entry.get("type") != "session"
    ):
        return 2
    return version


def needs_migration(entries: list[Entry]) -> bool:
    return file_version(entries) < CURRENT_SESSION_VERSION


def migrate_entries(entries: list[Entry]) -> bool:
    """Migrate the parsed lines of a file (header included) in place; True if anything changed."""
    version = file_version(entries)
    if version >= CURRENT_SESSION_VERSION:
        return False
    if version < 2:
        _v1_to_v2(entries)
    _v2_to_v3(entries)
    return True


def _v1_to_v2(entries: list[Entry]) -> None:
    taken: set[str] = set()
    previous: str | None = None
    for entry in entries:
        if entry.get("type") == "session":
            entry["version"] = 2
            continue
        entry_id = generate_id(taken)
        taken.add(entry_id)
        entry["id"] = entry_id
        entry["parentId"] = previous
        previous = entry_id
        if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
            index = entry["firstKeptEntryIndex"]
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(entries):
                target = entries[index]
                if target.get("type") != "session" and isinstance(target.get("id"), str):
                    entry["firstKeptEntryId"] = target["id"]
            del entry["firstKeptEntryIndex"]


def _v2_to_v3(entries: list[Entry]) -> None:
    for entry in entries:
        if entry.get("type") == "session":
            entry["version"] = CURRENT_SESSION_VERSION
            continue
        if entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"

"""Session file entry types with the exact keys pi writes.

Entries are plain dicts: a key or an entry type clawpi does not know is carried along untouched,
so a file written by a newer pi (or an extension) round-trips without loss. The TypedDicts only
document the shapes; nothing is validated per entry on the hot path.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Container
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

CURRENT_SESSION_VERSION = 3
"""The pi session format version clawpi writes; older files are migrated on open."""

_ID_ATTEMPTS = 100
"""Short ids are redrawn this many times on collision before falling back to a full UUID."""


class SessionHeader(TypedDict):
    type: Literal["session"]
    version: NotRequired[int]
    id: str
    timestamp: str
    cwd: str
    parentSession: NotRequired[str]


class _EntryBase(TypedDict):
    id: str
    parentId: str | None
    timestamp: str


class SessionMessageEntry(_EntryBase):
    type: Literal["message"]
    message: dict[str, Any]


class ThinkingLevelChangeEntry(_EntryBase):
    type: Literal["thinking_level_change"]
    thinkingLevel: str


class ModelChangeEntry(_EntryBase):
    type: Literal["model_change"]
    provider: str
    modelId: str


class CompactionEntry(_EntryBase):
    type: Literal["compaction"]
    summary: str
    firstKeptEntryId: str
    tokensBefore: int
    details: NotRequired[Any]
    fromHook: NotRequired[bool]


class BranchSummaryEntry(_EntryBase):
    type: Literal["branch_summary"]
    fromId: str
    summary: str
    details: NotRequired[Any]
    fromHook: NotRequired[bool]


class CustomEntry(_EntryBase):
    type: Literal["custom"]
    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(_EntryBase):
    type: Literal["custom_message"]
    customType: str
    content: str | list[dict[str, Any]]
    display: bool
    details: NotRequired[Any]


class LabelEntry(_EntryBase):
    type: Literal["label"]
    targetId: str
    label: NotRequired[str]


class SessionInfoEntry(_EntryBase):
    type: Literal["session_info"]
    name: NotRequired[str]


KnownEntry: TypeAlias = (
    SessionMessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
)

Entry: TypeAlias = dict[str, Any]
"""Any line of a session file as parsed: a known entry, an unknown one, or the header."""

ENTRY_TYPES: frozenset[str] = frozenset(
    {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)


_ids = random.Random()
"""The source of entry and session ids: they need to be unlikely to collide, not unguessable,
and a system call for each (`os.urandom`) costs more than the rest of an append's Python. A
generator of our own, seeded by the OS, so an application seeding `random` for its own ends
cannot make two processes draw the same ids; reseeded in a forked child for the same reason."""
os.register_at_fork(after_in_child=_ids.seed)


def generate_id(taken: Container[str]) -> str:
    """8 random hex chars, redrawn on collision (pi's id scheme)."""
    for _ in range(_ID_ATTEMPTS):
        candidate = f"{_ids.getrandbits(32):08x}"
        if candidate not in taken:
            return candidate
    return random_uuid()


def random_uuid() -> str:
    """A version 4 UUID string (what pi's `randomUUID()` gives) from `_ids`."""
    return str(uuid.UUID(int=_ids.getrandbits(128), version=4))


def now_iso() -> str:
    """The current time as JavaScript's `Date.toISOString()` prints it (UTC, milliseconds)."""
    return iso_from_ms(int(time.time() * 1000))


_last_second: tuple[int, str] = (-1, "")
"""The formatted form of the last second seen; swapped as one tuple, so threads are safe."""


def iso_from_ms(ms: int) -> str:
    """Epoch milliseconds to `YYYY-MM-DDTHH:MM:SS.mmmZ`."""
    global _last_second
    seconds, millis = divmod(ms, 1000)
    cached_second, text = _last_second
    if cached_second != seconds:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, text)
    return f"{text}.{millis:03d}Z"


def is_header(entry: object) -> bool:
    """Whether a parsed line is a usable session header (`type: "session"` with a string id)."""
    return (
        isinstance(entry, dict)
        and entry.get("type") == "session"
        and isinstance(entry.get("id"), str)
    )


def is_assistant_entry(entry: Entry) -> bool:
    if entry.get("type") != "message":
        return False
    message = entry.get("message")
    return isinstance(message, dict) and message.get("role") == "assistant"

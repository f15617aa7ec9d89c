"""Where to cut a branch for compaction: keep the newest `keep_recent_tokens`, never orphan a
tool result from its call, and know when the cut falls inside a turn."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from clawpi.sdk.compaction.tokens import estimate_tokens

_CUTTABLE_ROLES = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
_TURN_START_ROLES = frozenset({"user", "bashExecution"})


@dataclasses.dataclass(frozen=True, slots=True)
class CutPoint:
    first_kept_entry_index: int
    turn_start_index: int
    """The entry that starts the turn the cut falls in, or -1."""
    is_split_turn: bool


def _is_cuttable(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("type")
    if kind == "message":
        return (entry.get("message") or {}).get("role") in _CUTTABLE_ROLES
    return kind in ("branch_summary", "custom_message")


def _is_turn_start(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("type")
    if kind == "message":
        return (entry.get("message") or {}).get("role") in _TURN_START_ROLES
    return kind in ("branch_summary", "custom_message")


def find_cut_point(
    entries: Sequence[Mapping[str, Any]], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """Cut inside `entries[start:end]` so that about `keep_recent_tokens` stay verbatim."""
    cut_points = [i for i in range(start, end) if _is_cuttable(entries[i])]
    if not cut_points:
        return CutPoint(start, -1, False)
    cut = cut_points[0]
    accumulated = 0
    for index in range(end - 1, start - 1, -1):
        entry = entries[index]
        if entry.get("type") != "message":
            continue
        accumulated += estimate_tokens(entry.get("message") or {})
        if accumulated >= keep_recent_tokens:
            # the nearest valid cut at or after here; when only tool results follow, keep the
            # assistant call before them rather than everything
            cut = next((c for c in cut_points if c >= index), cut_points[-1])
            break
    # take along metadata entries (model/thinking changes, labels, ...) just before the cut
    while cut > start:
        previous = entries[cut - 1]
        if previous.get("type") in ("message", "compaction"):
            break
        cut -= 1
    cut_entry = entries[cut]
    is_user = (
        cut_entry.get("type") == "message"
        and (cut_entry.get("message") or {}).get("role") == "user"
    )
    if is_user:
        return CutPoint(cut, -1, False)
    turn_start = next((i for i in range(cut, start - 1, -1) if _is_turn_start(entries[i])), -1)
    return CutPoint(cut, turn_start, turn_start != -1)

"""What a compaction of a branch would summarise and keep, computed without calling a model."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from clawpi.sdk.compaction.cut_point import find_cut_point
from clawpi.sdk.compaction.file_ops import FileOperations
from clawpi.sdk.compaction.tokens import estimate_context_tokens
from clawpi.session.context import custom_message_from_entry, iso_to_ms


@dataclasses.dataclass(slots=True)
class CompactionPreparation:
    first_kept_entry_id: str
    messages_to_summarize: list[dict[str, Any]]
    turn_prefix_messages: list[dict[str, Any]]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOperations
    reserve_tokens: int
    keep_recent_tokens: int

    @property
    def is_empty(self) -> bool:
        return not self.messages_to_summarize and not self.turn_prefix_messages


def entry_to_message(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The agent message an entry stands for in a compaction (summaries included)."""
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    if kind == "custom_message":
        return custom_message_from_entry(entry)  # type: ignore[arg-type]
    if kind == "branch_summary":
        return {
            "role": "branchSummary",
            "summary": entry.get("summary", ""),
            "fromId": entry.get("fromId"),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    if kind == "compaction":
        return {
            "role": "compactionSummary",
            "summary": entry.get("summary", ""),
            "tokensBefore": entry.get("tokensBefore", 0),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    return None


def _messages(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for entry in entries:
        message = entry_to_message(entry)
        if message is not None:
            out.append(message)
    return out


def prepare_compaction(
    path_entries: Sequence[Mapping[str, Any]], *, reserve_tokens: int, keep_recent_tokens: int
) -> CompactionPreparation | None:
    """None when the branch already ends in a compaction (or the cut has no entry id)."""
    if not path_entries or path_entries[-1].get("type") == "compaction":
        return None
    previous_index = -1
    for index in range(len(path_entries) - 1, -1, -1):
        if path_entries[index].get("type") == "compaction":
            previous_index = index
            break
    boundary_start = previous_index + 1
    boundary_end = len(path_entries)
    usage_start = max(previous_index, 0)
    tokens_before = estimate_context_tokens(_messages(path_entries[usage_start:boundary_end]))
    cut = find_cut_point(path_entries, boundary_start, boundary_end, keep_recent_tokens)
    first_kept = path_entries[cut.first_kept_entry_index]
    first_kept_id = first_kept.get("id")
    if not isinstance(first_kept_id, str):
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    to_summarize = _messages(path_entries[boundary_start:history_end])
    prefix = (
        _messages(path_entries[cut.turn_start_index : cut.first_kept_entry_index])
        if cut.is_split_turn
        else []
    )
    previous_summary: str | None = None
    file_ops = FileOperations()
    if previous_index >= 0:
        previous = path_entries[previous_index]
        previous_summary = previous.get("summary")
        if not previous.get("fromHook"):
            file_ops.add_from_details(previous.get("details"))
    file_ops.add_from_messages(to_summarize)
    file_ops.add_from_messages(prefix)
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        reserve_tokens=reserve_tokens,
        keep_recent_tokens=keep_recent_tokens,
    )

"""Compaction: summarise old context so a conversation never dies of context overflow."""

from clawpi.sdk.compaction.branch import prepare_branch_entries, summarize_branch
from clawpi.sdk.compaction.cut_point import CutPoint, find_cut_point
from clawpi.sdk.compaction.file_ops import FileOperations, format_file_tags
from clawpi.sdk.compaction.prepare import (
    CompactionPreparation,
    entry_to_message,
    prepare_compaction,
)
from clawpi.sdk.compaction.serialize import serialize_conversation
from clawpi.sdk.compaction.summarize import (
    CompactionError,
    CompactionResult,
    compact,
    generate_summary,
)
from clawpi.sdk.compaction.tokens import (
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    should_compact,
)

__all__ = [
    "CompactionError",
    "CompactionPreparation",
    "CompactionResult",
    "CutPoint",
    "FileOperations",
    "calculate_context_tokens",
    "compact",
    "entry_to_message",
    "estimate_context_tokens",
    "estimate_tokens",
    "find_cut_point",
    "format_file_tags",
    "generate_summary",
    "prepare_branch_entries",
    "prepare_compaction",
    "serialize_conversation",
    "should_compact",
    "summarize_branch",
]

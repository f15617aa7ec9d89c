"""Summarising an abandoned branch when the user navigates elsewhere in the session tree."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model
from clawpi.sdk.compaction.file_ops import FileOperations, format_file_tags
from clawpi.sdk.compaction.prepare import entry_to_message
from clawpi.sdk.compaction.prompts import BRANCH_SUMMARY_PREAMBLE, BRANCH_SUMMARY_PROMPT
from clawpi.sdk.compaction.summarize import generate_summary
from clawpi.sdk.compaction.tokens import estimate_tokens

DEFAULT_CONTEXT_WINDOW = 128_000
BRANCH_SUMMARY_MAX_TOKENS = 2048
_SUMMARY_SQUEEZE = 0.9
NOTHING_TO_SUMMARIZE = "No content to summarize"


@dataclasses.dataclass(slots=True)
class BranchPreparation:
    messages: list[dict[str, Any]]
    file_ops: FileOperations
    total_tokens: int


def prepare_branch_entries(
    entries: Sequence[Mapping[str, Any]], token_budget: int
) -> BranchPreparation:
    """Newest messages first until the budget is used (tool results skipped, summaries kept)."""
    file_ops = FileOperations()
    for entry in entries:
        if entry.get("type") == "branch_summary" and not entry.get("fromHook"):
            file_ops.add_from_details(entry.get("details"))
    picked: list[dict[str, Any]] = []
    total = 0
    for entry in reversed(entries):
        message = entry_to_message(entry)
        if message is None or message.get("role") == "toolResult":
            continue
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            is_summary = message.get("role") in ("compactionSummary", "branchSummary")
            if is_summary and total < token_budget * _SUMMARY_SQUEEZE:
                picked.append(message)
                total += tokens
            break
        picked.append(message)
        total += tokens
    picked.reverse()
    file_ops.add_from_messages(picked)
    return BranchPreparation(picked, file_ops, total)


async def summarize_branch(
    entries: Sequence[Mapping[str, Any]],
    model: Model,
    *,
    reserve_tokens: int,
    api_key: str | None = None,
    signal: AbortSignal | None = None,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
) -> tuple[str, dict[str, Any]]:
    """(summary text ready for a branch_summary entry, details with the file lists)."""
    window = model.context_window or DEFAULT_CONTEXT_WINDOW
    prepared = prepare_branch_entries(entries, window - reserve_tokens)
    if not prepared.messages:
        return NOTHING_TO_SUMMARIZE, {"readFiles": [], "modifiedFiles": []}
    prompt = BRANCH_SUMMARY_PROMPT
    extra = custom_instructions
    if custom_instructions and replace_instructions:
        prompt, extra = custom_instructions, None
    text = await generate_summary(
        prepared.messages,
        model,
        prompt=prompt,
        max_tokens=BRANCH_SUMMARY_MAX_TOKENS,
        api_key=api_key,
        signal=signal,
        custom_instructions=extra,
    )
    read_files, modified_files = prepared.file_ops.file_lists()
    summary = BRANCH_SUMMARY_PREAMBLE + text + format_file_tags(read_files, modified_files)
    return summary, {"readFiles": read_files, "modifiedFiles": modified_files}

"""Turning a prepared compaction into a summary with one (or, for split turns, two) model calls."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from clawpi.ai.abort import AbortSignal
from clawpi.ai.models import Model
from clawpi.ai.stream import complete
from clawpi.errors import ClawpiError
from clawpi.sdk.compaction.file_ops import format_file_tags
from clawpi.sdk.compaction.prepare import CompactionPreparation
from clawpi.sdk.compaction.prompts import (
    INITIAL_SUMMARY_PROMPT,
    NO_PRIOR_HISTORY,
    SPLIT_TURN_SEPARATOR,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_PROMPT,
    UPDATE_SUMMARY_PROMPT,
)
from clawpi.sdk.compaction.serialize import serialize_conversation
from clawpi.session.context import convert_to_llm

HISTORY_SHARE = 0.8
"""Share of `reserve_tokens` the main summary may use."""
TURN_PREFIX_SHARE = 0.5


class CompactionError(ClawpiError):
    """The summary could not be produced (model error, abort, cancelled by an extension)."""


@dataclasses.dataclass(slots=True)
class CompactionResult:
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: dict[str, Any] | None = None


async def generate_summary(
    messages: Sequence[Mapping[str, Any]],
    model: Model,
    *,
    prompt: str,
    max_tokens: int,
    api_key: str | None = None,
    signal: AbortSignal | None = None,
    previous_summary: str | None = None,
    custom_instructions: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    """Ask `model` for a summary of `messages`; raises CompactionError when the call fails."""
    conversation = serialize_conversation(convert_to_llm(messages))
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    text += prompt
    if custom_instructions:
        text += f"\n\nAdditional focus: {custom_instructions}"
    response = await complete(
        model,
        {
            "systemPrompt": SUMMARIZATION_SYSTEM_PROMPT,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}
            ],
        },
        api_key=api_key,
        max_tokens=max_tokens,
        signal=signal,
        headers=headers,
        reasoning="high" if model.reasoning else None,
    )
    if response["stopReason"] == "aborted":
        raise CompactionError("Summarization aborted")
    if response["stopReason"] == "error":
        raise CompactionError(
            f"Summarization failed: {response.get('errorMessage', 'unknown error')}"
        )
    return "\n".join(
        block["text"]  # type: ignore[typeddict-item]
        for block in response["content"]
        if block.get("type") == "text"
    )


async def compact(
    preparation: CompactionPreparation,
    model: Model,
    *,
    api_key: str | None = None,
    custom_instructions: str | None = None,
    signal: AbortSignal | None = None,
    headers: Mapping[str, str] | None = None,
) -> CompactionResult:
    """Summarise what the preparation drops; the result is ready for `append_compaction`."""
    reserve = preparation.reserve_tokens
    update = bool(preparation.previous_summary)
    history_prompt = UPDATE_SUMMARY_PROMPT if update else INITIAL_SUMMARY_PROMPT

    async def history() -> str:
        if not preparation.messages_to_summarize and preparation.is_split_turn:
            return preparation.previous_summary or NO_PRIOR_HISTORY
        return await generate_summary(
            preparation.messages_to_summarize,
            model,
            prompt=history_prompt,
            max_tokens=math.floor(HISTORY_SHARE * reserve),
            api_key=api_key,
            signal=signal,
            previous_summary=preparation.previous_summary,
            custom_instructions=custom_instructions,
            headers=headers,
        )

    if preparation.is_split_turn and preparation.turn_prefix_messages:
        prefix_call = generate_summary(
            preparation.turn_prefix_messages,
            model,
            prompt=TURN_PREFIX_PROMPT,
            max_tokens=math.floor(TURN_PREFIX_SHARE * reserve),
            api_key=api_key,
            signal=signal,
            headers=headers,
        )
        history_text, prefix_text = await asyncio.gather(history(), prefix_call)
        summary = history_text + SPLIT_TURN_SEPARATOR + prefix_text
    else:
        summary = await history()
    read_files, modified_files = preparation.file_ops.file_lists()
    summary += format_file_tags(read_files, modified_files)
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        details={"readFiles": read_files, "modifiedFiles": modified_files},
    )

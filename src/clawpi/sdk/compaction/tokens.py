"""Token estimates for compaction decisions: pi's chars/4 rule, usage when the model reported it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

CHARS_PER_TOKEN = 4
IMAGE_CHARS = 4800
"""A tool-result or custom-message image counts as this many characters (1,200 tokens)."""


def _text_of(parts: Any, *, images: bool) -> int:
    if isinstance(parts, str):
        return len(parts)
    chars = 0
    for part in parts or ():
        kind = part.get("type")
        if kind == "text":
            chars += len(part.get("text", ""))
        elif kind == "image" and images:
            chars += IMAGE_CHARS
    return chars


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """Estimated tokens of one agent message (pi's rules; user images are not counted)."""
    role = message.get("role")
    chars = 0
    if role == "user":
        chars = _text_of(message.get("content"), images=False)
    elif role == "assistant":
        for block in message.get("content") or ():
            kind = block.get("type")
            if kind == "text":
                chars += len(block.get("text", ""))
            elif kind == "thinking":
                chars += len(block.get("thinking", ""))
            elif kind == "toolCall":
                arguments = orjson.dumps(block.get("arguments") or {})
                chars += len(block.get("name", "")) + len(arguments)
    elif role in ("toolResult", "custom"):
        chars = _text_of(message.get("content"), images=True)
    elif role == "bashExecution":
        chars = len(message.get("command", "")) + len(message.get("output", ""))
    elif role in ("branchSummary", "compactionSummary"):
        chars = len(message.get("summary", ""))
    return math.ceil(chars / CHARS_PER_TOKEN)


def calculate_context_tokens(usage: Mapping[str, Any]) -> int:
    total = usage.get("totalTokens") or 0
    if total:
        return int(total)
    return int(
        (usage.get("input") or 0)
        + (usage.get("output") or 0)
        + (usage.get("cacheRead") or 0)
        + (usage.get("cacheWrite") or 0)
    )


def estimate_context_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """The last successful assistant usage plus estimates of what came after it."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if (
            message.get("role") == "assistant"
            and message.get("usage")
            and message.get("stopReason") not in ("aborted", "error")
        ):
            base = calculate_context_tokens(message["usage"])
            return base + sum(estimate_tokens(m) for m in messages[index + 1 :])
    return sum(estimate_tokens(m) for m in messages)


def should_compact(
    context_tokens: int, context_window: int, reserve_tokens: int, *, enabled: bool = True
) -> bool:
    return enabled and context_tokens > context_window - reserve_tokens

"""Recognising a context-window overflow in a provider's error, or in silently truncated usage."""

from __future__ import annotations

import re

from clawpi.ai.types import AssistantMessage

# One pattern per provider's wording (pi's list); 429 is never an overflow.
OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",  # Anthropic
        r"input is too long for requested model",  # Bedrock
        r"exceeds the context window",  # OpenAI
        r"input token count.*exceeds the maximum",  # Gemini
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"maximum context length is \d+ tokens",  # OpenRouter
        r"exceeds the limit of \d+",  # GitHub Copilot
        r"exceeds the available context size",  # llama.cpp
        r"greater than the context length",  # LM Studio
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Kimi
        r"too large for model with \d+ maximum context length",  # Mistral
        r"model_context_window_exceeded",  # z.ai
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
    )
)
_NO_BODY = re.compile(r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)", re.IGNORECASE)


def is_overflow_error_text(text: str) -> bool:
    """Whether an error string is a provider's way of saying the prompt did not fit."""
    return bool(_NO_BODY.search(text)) or any(p.search(text) for p in OVERFLOW_PATTERNS)


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """True for an overflow error, or a "successful" answer whose input exceeded the window."""
    stop = message.get("stopReason")
    if stop == "error":
        return is_overflow_error_text(message.get("errorMessage") or "")
    if context_window and stop == "stop":
        usage = message.get("usage")
        if usage:
            return usage["input"] + usage["cacheRead"] > context_window
    return False

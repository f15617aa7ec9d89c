"""What a chat user reads when the model failed: one clear sentence per kind of failure.

A provider's raw error (`529 {"type":"error",...}`) means nothing to someone in a Telegram chat.
Each failure category gets fixed copy that says what happened and what to do. Normal replies are
never rewritten for merely mentioning an error: only text known to be an error (the message
ended with `stopReason: "error"`) or structurally a provider's JSON error body is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clawpi.ai.errors import (
    format_raw_assistant_error_for_ui,
    is_auth_error_message,
    is_auth_permanent_error_message,
    is_billing_error_message,
    is_context_overflow_error,
    is_missing_tool_call_input_error,
    is_overloaded_error_message,
    is_rate_limit_error_message,
    is_raw_api_error_payload,
    is_raw_error_dump,
    is_role_ordering_error,
    is_timeout_error_message,
    parse_image_dimension_error,
    parse_image_size_error,
)
from clawpi.reply.tags import strip_final_tags

UNKNOWN_ERROR_TEXT = "LLM request failed with an unknown error."
CONTEXT_OVERFLOW_TEXT = (
    "Context overflow: prompt too large for the model. Try /reset (or /new) to start a fresh "
    "session, or use a larger-context model."
)
ROLE_ORDERING_TEXT = (
    "Message ordering conflict - please try again. If this persists, use /new to start a fresh "
    "session."
)
CORRUPTED_SESSION_TEXT = (
    "Session history looks corrupted (tool call input missing). Use /new to start a fresh session."
)
OVERLOADED_TEXT = "The AI service is temporarily overloaded. Please try again in a moment."
RATE_LIMIT_TEXT = "⚠️ API rate limit reached. Please try again later."
BILLING_ERROR_TEXT = (
    "⚠️ API provider returned a billing error — your API key has run out of credits or has an "
    "insufficient balance. Check your provider's billing dashboard and top up or switch to a "
    "different API key."
)
TIMEOUT_TEXT = "LLM request timed out."
NETWORK_ERROR_TEXT = (
    "Couldn't reach the AI service (network error). Check the connection and try again."
)
AUTH_ERROR_TEXT = (
    "Authentication with the AI provider failed (invalid or expired credentials). "
    "Re-authenticate or update the API key, then try again."
)
MISSING_API_KEY_TEXT = (
    "No API key is configured for this model's provider. Add one (environment variable or "
    "auth profile) and try again."
)
REASONING_REQUIRED_TEXT = (
    "This model only works with reasoning enabled. Turn thinking on (for example /think low) "
    "and try again."
)
MAX_ERROR_TEXT_CHARS = 600

_NETWORK = re.compile(
    r"econnrefused|econnreset|enotfound|eai_again|ehostunreach|enetunreach|socket hang up|"
    r"fetch failed|network error|connection error|connection refused|connection reset|"
    r"getaddrinfo|name or service not known",
    re.I,
)
_MISSING_KEY = re.compile(
    r"no api key (?:found )?for provider|missing api key|no api key found", re.I
)
_REASONING_REQUIRED = re.compile(r"reasoning is (?:required|mandatory)|requires? reasoning", re.I)
_INVALID_REQUEST = re.compile(
    r'"type"\s*:\s*"invalid_request_error".*?"message"\s*:\s*"([^"]+)"', re.S
)
_PARAGRAPH_SPLIT = re.compile(r"\n{2,}")


def _truncate(text: str, limit: int = MAX_ERROR_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _billing_text(provider: str | None) -> str:
    if not provider:
        return BILLING_ERROR_TEXT
    name = provider.strip()
    return (
        f"⚠️ {name} returned a billing error — your API key has run out of credits or has an "
        f"insufficient balance. Check your {name} billing dashboard and top up or switch to a "
        "different API key."
    )


def _image_text(raw: str) -> str | None:
    dimension = parse_image_dimension_error(raw)
    if dimension is not None:
        limit = f" (max {dimension.max_dimension_px}px)" if dimension.max_dimension_px else ""
        return f"Image too large for the model{limit}. Please compress or resize the image and try again."
    size = parse_image_size_error(raw)
    if size is not None:
        limit = f" (max {size:g} MB)" if size else ""
        return f"Image too large for the model{limit}. Please compress or resize the image and try again."
    return None


def _rewrite_error(raw: str, provider: str | None, full: bool) -> str | None:
    """The fixed copy for a known failure category, first match wins; None when unknown."""
    if is_context_overflow_error(raw):
        return CONTEXT_OVERFLOW_TEXT
    if is_role_ordering_error(raw):
        return ROLE_ORDERING_TEXT
    if is_missing_tool_call_input_error(raw):
        return CORRUPTED_SESSION_TEXT
    image = _image_text(raw)
    if image is not None:
        return image
    if is_overloaded_error_message(raw):
        return OVERLOADED_TEXT
    if is_rate_limit_error_message(raw):
        return RATE_LIMIT_TEXT
    if is_billing_error_message(raw):
        return _billing_text(provider)
    if full:
        rejected = _INVALID_REQUEST.search(raw)
        if rejected:
            return f"LLM request rejected: {rejected.group(1)}"
        if _REASONING_REQUIRED.search(raw):
            return REASONING_REQUIRED_TEXT
        if _MISSING_KEY.search(raw):
            return MISSING_API_KEY_TEXT
        if is_auth_permanent_error_message(raw) or is_auth_error_message(raw):
            return AUTH_ERROR_TEXT
    if is_raw_error_dump(raw):
        return format_raw_assistant_error_for_ui(raw)
    if _NETWORK.search(raw):
        return NETWORK_ERROR_TEXT
    if is_timeout_error_message(raw):
        return TIMEOUT_TEXT
    return None


def collapse_consecutive_duplicate_blocks(text: str) -> str:
    """Drop a paragraph that repeats the one before it (some models stutter)."""
    trimmed = text.strip()
    blocks = _PARAGRAPH_SPLIT.split(trimmed)
    if len(blocks) < 2:
        return text
    kept: list[str] = []
    last = None
    for block in blocks:
        normalized = " ".join(block.split())
        if normalized == last:
            continue
        kept.append(block.strip())
        last = normalized
    return text if len(kept) == len(blocks) else "\n\n".join(kept)


def sanitize_user_facing_text(text: str, error_context: bool = False) -> str:
    """Reply text fit for a user: `<final>` tags gone, stutters collapsed, errors explained.

    Error rewrites apply only with `error_context` (the text is an error) or when the text is
    structurally a provider's JSON error body; prose that mentions errors stays as it is.
    """
    if not text:
        return text
    stripped = strip_final_tags(text)
    trimmed = stripped.strip()
    if not trimmed:
        return ""
    if error_context:
        rewritten = _rewrite_error(trimmed, None, full=False)
        return _truncate(rewritten if rewritten is not None else trimmed)
    if is_raw_api_error_payload(trimmed):
        rewritten = _rewrite_error(trimmed, None, full=False)
        return rewritten if rewritten is not None else format_raw_assistant_error_for_ui(trimmed)
    return collapse_consecutive_duplicate_blocks(trimmed)


def format_assistant_error_text(
    message: Mapping[str, Any], provider: str | None = None
) -> str | None:
    """The copy to show for an assistant message that failed; None when it did not fail.

    `provider` (a display name) is named in the billing copy when given.
    """
    raw = str(message.get("errorMessage") or "").strip()
    if message.get("stopReason") != "error" and not raw:
        return None
    if not raw:
        return UNKNOWN_ERROR_TEXT
    rewritten = _rewrite_error(raw, provider, full=True)
    if rewritten is not None:
        return rewritten
    return _truncate(raw)

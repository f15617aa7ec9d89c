"""Automatic retry of transient provider failures (pi's rules: which errors, how long to wait)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from clawpi.ai.overflow import is_context_overflow

_RETRYABLE = re.compile(
    r"overloaded|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|"
    r"server.?error|internal.?error|connection.?error|connection.?refused|other side closed|"
    r"fetch failed|upstream.?connect|reset before headers|terminated|retry delay|"
    r"peer closed connection|connection reset|incomplete chunked read|server disconnected",
    re.IGNORECASE,
)
RETRY_CANCELLED = "Retry cancelled"


def is_retryable_error(
    message: Mapping[str, Any] | None, context_window: int | None = None
) -> bool:
    """A failed reply worth retrying: an error (not an overflow) with transient wording."""
    if not message or message.get("role") != "assistant" or message.get("stopReason") != "error":
        return False
    text = message.get("errorMessage")
    if not text:
        return False
    if is_context_overflow(message, context_window):  # type: ignore[arg-type]
        return False
    return bool(_RETRYABLE.search(text))


def retry_delay_ms(attempt: int, base_delay_ms: int, max_delay_ms: int) -> int:
    """Attempt n (1-based) waits base * 2^(n-1), capped at max_delay_ms (0 = no cap)."""
    delay: int = base_delay_ms * (1 << max(attempt - 1, 0))
    return min(delay, max_delay_ms) if max_delay_ms > 0 else delay

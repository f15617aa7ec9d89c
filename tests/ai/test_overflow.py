from __future__ import annotations

import pytest

from clawpi.ai.overflow import is_context_overflow, is_overflow_error_text
from clawpi.ai.types import AssistantMessage, empty_usage


def _error(text: str) -> AssistantMessage:
    return {
        "role": "assistant",
        "content": [],
        "api": "x",
        "provider": "x",
        "model": "m",
        "usage": empty_usage(),
        "stopReason": "error",
        "errorMessage": text,
        "timestamp": 0,
    }


@pytest.mark.parametrize(
    "text",
    [
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}',
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
        "Please reduce the length of the messages or completion.",
        "This endpoint's maximum context length is 163840 tokens. However, you requested about 200000 tokens",
        "prompt token count of 130000 exceeds the limit of 128000",
        "the request exceeds the available context size, try increasing it",
        "The number of tokens to keep from the initial prompt is greater than the context length",
        "invalid params, context window exceeds limit (2013)",
        "Your request exceeded model token limit: 262144 (requested: 291351)",
        "Prompt contains 150000 tokens, too large for model with 131072 maximum context length",
        "model_context_window_exceeded",
        "context_length_exceeded",
        "Too many tokens in request",
        "400 status code (no body)",
        "413 (no body)",
    ],
)
def test_provider_overflow_wordings_are_detected(text: str) -> None:
    assert is_overflow_error_text(text)
    assert is_context_overflow(_error(text))


@pytest.mark.parametrize(
    "text",
    [
        '429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}',
        "500 Internal server error",
        "invalid api key",
    ],
)
def test_other_errors_are_not_overflow(text: str) -> None:
    assert not is_context_overflow(_error(text))


def test_silent_overflow_detected_from_usage() -> None:
    message = _error("")
    message["stopReason"] = "stop"
    del message["errorMessage"]
    message["usage"]["input"] = 90_000
    message["usage"]["cacheRead"] = 20_000
    assert is_context_overflow(message, context_window=100_000)
    assert not is_context_overflow(message, context_window=200_000)
    assert not is_context_overflow(message)

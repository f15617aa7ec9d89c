"""Error classification against the provider error strings the reference pins down (§4.5)."""

from __future__ import annotations

from typing import Any

import pytest

from clawpi.ai.errors import (
    FailoverError,
    classify_failover_reason,
    classify_failover_signal,
    coerce_to_failover_error,
    format_raw_assistant_error_for_ui,
    get_api_error_payload_fingerprint,
    is_auth_assistant_error,
    is_billing_error_message,
    is_compaction_failure_error,
    is_context_overflow_error,
    is_image_dimension_error_message,
    is_image_size_error,
    is_likely_context_overflow_error,
    is_rate_limit_assistant_error,
    is_raw_api_error_payload,
    is_role_ordering_error,
    is_timeout_error,
    parse_api_error_info,
    parse_image_dimension_error,
    parse_image_size_error,
    resolve_failover_status,
)
from clawpi.ai.types import AssistantMessage, empty_usage

ANTHROPIC_OVERLOADED = (
    '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
    '"request_id":"req_011"}'
)
ANTHROPIC_RATE_LIMIT = (
    '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would '
    'exceed the rate limit for your organization of 50,000 input tokens per minute."}}'
)
ANTHROPIC_BILLING = (
    '400 {"type":"error","error":{"type":"invalid_request_error","message":"Your credit '
    "balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade "
    'or purchase credits."}}'
)
ANTHROPIC_SIZE_OVERFLOW = (
    '{"type":"error","error":{"type":"invalid_request_error",'
    '"message":"Request size exceeds model context window"}}'
)
OPENAI_QUOTA = "429 You exceeded your current quota, please check your plan and billing details."
OPENAI_INVALID_KEY = (
    '401 {"error":{"message":"Incorrect API key provided: sk-abc. You can find your API key '
    'at https://platform.openai.com/account/api-keys.","type":"invalid_request_error",'
    '"param":null,"code":"invalid_api_key"}}'
)
GEMINI_EXHAUSTED = (
    '429 {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).",'
    '"status":"RESOURCE_EXHAUSTED"}}'
)


@pytest.mark.parametrize(
    "text",
    [
        "request_too_large",
        "Request exceeds the maximum size",
        "context length exceeded",
        "Maximum context length",
        "prompt is too long: 208423 tokens > 200000 maximum",
        "Context overflow: Summarization failed",
        "413 Request Entity Too Large",
        ANTHROPIC_SIZE_OVERFLOW,
        "input length and max_tokens exceed context limit: 156321 + 48384 > 200000",
        "400 This model's maximum context length is 128000 tokens.",
        "Your input exceeds the context window of this model",
        "上下文过长，请压缩上下文",
    ],
)
def test_context_overflow_samples_are_recognised(text: str) -> None:
    assert is_context_overflow_error(text)
    assert is_likely_context_overflow_error(text)
    assert classify_failover_reason(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "rate limit exceeded",
        "request size exceeds upload limit",
        "model not found",
        "authentication failed",
        "Let's investigate the context overflow bug",
        "Rate limit reached on tokens per min (TPM): Limit 30000, too many tokens requested",
        "",
    ],
)
def test_non_overflow_errors_are_not_context_overflow(text: str) -> None:
    assert not is_context_overflow_error(text)


def test_likely_overflow_excludes_billing_rate_limit_and_small_window() -> None:
    assert is_likely_context_overflow_error("the prompt exceeds the context window limit")
    assert not is_likely_context_overflow_error("429 rate limit: input token limit exceeded")
    assert not is_likely_context_overflow_error("context window too small: minimum is 16000")
    assert not is_likely_context_overflow_error("402 payment required: request over plan limit")


def test_compaction_failure_needs_both_compaction_and_overflow() -> None:
    assert is_compaction_failure_error("Context overflow: Summarization failed")
    assert is_compaction_failure_error("auto-compaction failed: prompt is too long")
    assert not is_compaction_failure_error("compaction failed: network error")
    assert not is_compaction_failure_error("prompt is too long")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("invalid api key", "auth"),
        ("no credentials found", "auth"),
        ("no api key found", "auth"),
        ("401 Unauthorized", "auth"),
        (OPENAI_INVALID_KEY, "auth_permanent"),
        ("API key revoked", "auth_permanent"),
        ("429 too many requests", "rate_limit"),
        ("resource has been exhausted", "rate_limit"),
        (GEMINI_EXHAUSTED, "rate_limit"),
        ("You have hit your ChatGPT usage limit (plus plan)", "rate_limit"),
        (ANTHROPIC_RATE_LIMIT, "rate_limit"),
        (OPENAI_QUOTA, "rate_limit"),
        (ANTHROPIC_OVERLOADED, "overloaded"),
        (
            '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            "overloaded",
        ),
        ("invalid request format", "format"),
        ("string should match pattern '^[a-zA-Z0-9_-]+$'", "format"),
        ("messages.1.content.1.tool_use.id: String should match pattern", "format"),
        ("credit balance too low", "billing"),
        (ANTHROPIC_BILLING, "billing"),
        ("402 Payment Required", "billing"),
        ("insufficient_quota", "billing"),
        ("deadline exceeded", "timeout"),
        ("Request timed out.", "timeout"),
        ("fetch failed", "timeout"),
        ("connect ECONNREFUSED 127.0.0.1:443", "timeout"),
        ("503 Service Unavailable", "timeout"),
        ("An unknown error occurred", "timeout"),
        ("unknown error (no error details in response)", "no_error_details"),
        ('500 {"type":"error","error":{"type":"server_error","message":"boom"}}', "server_error"),
        (
            "404 The model `gpt-9` does not exist or you do not have access to it.",
            "model_not_found",
        ),
        ("model_not_found", "model_not_found"),
        ("Session not found or expired", "session_expired"),
        ("daily usage limit exceeded", "rate_limit"),
        ("OpenRouter: key limit exceeded", "billing"),
    ],
)
def test_classify_failover_reason_real_provider_strings(text: str, reason: str) -> None:
    assert classify_failover_reason(text) == reason


@pytest.mark.parametrize(
    "text",
    [
        "file does not exist",
        "bad request",
        "image dimensions exceed max allowed size for many-image requests: 2000 pixels",
        "image exceeds 5 MB maximum",
        "",
    ],
)
def test_non_failover_errors_classify_to_none(text: str) -> None:
    assert classify_failover_reason(text) is None


def test_retryable_402_usage_limit_is_a_rate_limit() -> None:
    text = "402 usage limit reached, please try again in 20 minutes"
    assert classify_failover_reason(text) == "rate_limit"


def test_long_texts_only_count_as_billing_with_a_hard_402_marker() -> None:
    prose = "credits " + "x" * 600 + " insufficient credits"
    assert not is_billing_error_message(prose)
    assert is_billing_error_message("HTTP 402 " + "x" * 600)


def test_status_signal_overrides_text() -> None:
    assert classify_failover_signal(429, "anything") == "rate_limit"
    assert classify_failover_signal(401, "key revoked: api key revoked") == "auth_permanent"
    assert classify_failover_signal(403, "Forbidden") == "auth"
    assert classify_failover_signal(408, "") == "timeout"
    assert classify_failover_signal(503, "The model is overloaded") == "overloaded"
    assert classify_failover_signal(503, "upstream down") == "timeout"
    assert classify_failover_signal(500, "Internal Server Error") == "server_error"
    assert classify_failover_signal(529, "") == "overloaded"
    assert classify_failover_signal(404, "no such thing") == "model_not_found"
    assert classify_failover_signal(400, "400 status code (no body)") is None
    assert classify_failover_signal(400, "prompt is too long") is None
    assert classify_failover_signal(400, "weird request") == "format"
    assert classify_failover_signal(None, "429 slow down") == "rate_limit"
    assert classify_failover_signal(None, "", code="RESOURCE_EXHAUSTED") == "rate_limit"
    assert classify_failover_signal(None, "", code="ETIMEDOUT") == "timeout"
    assert classify_failover_signal(502, "<!DOCTYPE html><html>bad gateway</html>") == "timeout"


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        ("billing", 402),
        ("server_error", 500),
        ("rate_limit", 429),
        ("overloaded", 503),
        ("auth", 401),
        ("auth_permanent", 403),
        ("timeout", 408),
        ("format", 400),
        ("model_not_found", 404),
        ("session_expired", 410),
        ("unknown", None),
        ("no_error_details", None),
    ],
)
def test_failover_error_status_mapping(reason: Any, status: int | None) -> None:
    assert resolve_failover_status(reason) == status
    err = FailoverError("boom", reason=reason, provider="anthropic", model="claude")
    assert err.status == status
    assert err.provider == "anthropic"
    assert str(err) == "boom"


def test_parse_api_error_payload_into_clean_message() -> None:
    info = parse_api_error_info(ANTHROPIC_OVERLOADED)
    assert info is not None
    assert (info.http_code, info.type, info.message, info.request_id) == (
        "529",
        "overloaded_error",
        "Overloaded",
        "req_011",
    )
    assert format_raw_assistant_error_for_ui(ANTHROPIC_OVERLOADED) == (
        "HTTP 529 overloaded_error: Overloaded (request_id: req_011)"
    )
    assert format_raw_assistant_error_for_ui('{"error":{"type":"x","message":"m"}}') == (
        "LLM error x: m"
    )
    assert format_raw_assistant_error_for_ui("500 Internal Server Error") == (
        "HTTP 500: Internal Server Error"
    )
    assert format_raw_assistant_error_for_ui("") == "LLM request failed with an unknown error."
    assert format_raw_assistant_error_for_ui("x" * 700) == "x" * 600 + "…"


def test_error_payload_detection_is_structural() -> None:
    assert is_raw_api_error_payload(ANTHROPIC_OVERLOADED)
    assert is_raw_api_error_payload('Error: {"error":{"message":"bad"}}')
    assert not is_raw_api_error_payload('{"name": "not an error"}')
    assert not is_raw_api_error_payload("the API error was annoying")
    a = get_api_error_payload_fingerprint('{"b":1,"type":"error","a":2}')
    b = get_api_error_payload_fingerprint('{"a":2,"type":"error","b":1}')
    assert a is not None
    assert a == b


def test_image_errors_are_parsed_with_their_limits() -> None:
    dim = parse_image_dimension_error(
        "messages.3.content.1.image.source: image dimensions exceed max allowed size for "
        "many-image requests: 2000 pixels"
    )
    assert dim is not None
    assert (dim.max_dimension_px, dim.message_index, dim.content_index) == (2000, 3, 1)
    assert is_image_dimension_error_message(dim.raw)
    assert parse_image_size_error("image exceeds 5 MB maximum") == 5.0
    assert is_image_size_error("Image exceeds 3.75 MB")
    assert not is_image_size_error("image is fine")


def test_role_ordering_errors() -> None:
    assert is_role_ordering_error("400 Incorrect role information")
    assert is_role_ordering_error("messages: roles must alternate between user and assistant")
    assert not is_role_ordering_error("the role of the assistant is to help")


def _assistant(stop: Any, error: str | None) -> AssistantMessage:
    msg: AssistantMessage = {
        "role": "assistant",
        "content": [],
        "api": "x",
        "provider": "p",
        "model": "m",
        "usage": empty_usage(),
        "stopReason": stop,
        "timestamp": 0,
    }
    if error is not None:
        msg["errorMessage"] = error
    return msg


def test_assistant_predicates_require_error_stop_reason() -> None:
    assert is_rate_limit_assistant_error(_assistant("error", "429 too many requests"))
    assert not is_rate_limit_assistant_error(_assistant("stop", "429 too many requests"))
    assert is_auth_assistant_error(_assistant("error", "invalid api key"))
    assert not is_auth_assistant_error(None)


class _StatusError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status_code = status


def test_coerce_walks_the_cause_chain() -> None:
    try:
        try:
            raise _StatusError("slow down", 429)
        except _StatusError as inner:
            raise RuntimeError("request failed") from inner
    except RuntimeError as outer:
        failover = coerce_to_failover_error(outer, provider="openai", model="gpt")
    assert failover is not None
    assert failover.reason == "rate_limit"
    assert failover.status == 429
    assert failover.provider == "openai"


def test_coerce_ignores_session_lock_errors_and_plain_bugs() -> None:
    class SessionWriteLockError(Exception):
        pass

    assert coerce_to_failover_error(SessionWriteLockError("timeout 10000ms")) is None
    assert coerce_to_failover_error(ValueError("list index out of range")) is None
    timeout = coerce_to_failover_error(TimeoutError())
    assert timeout is not None
    assert timeout.reason == "timeout"
    assert is_timeout_error(TimeoutError())
    assert not is_timeout_error(ValueError("x"))

"""extract_assistant_text and friends (§4.23); user-facing error copy (§4.24)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawpi.reply import (
    extract_assistant_text,
    extract_assistant_thinking,
    format_assistant_error_text,
    format_reasoning_message,
    infer_tool_meta_from_args,
    promote_thinking_tags_to_blocks,
    sanitize_user_facing_text,
    strip_downgraded_tool_call_text,
)
from clawpi.reply import user_text as copy
from clawpi.reply.text import (
    StreamedReasoningFormat,
    extract_thinking_from_tagged_stream,
    strip_model_special_tokens,
)


def message(*blocks: Any, stop: str = "stop", error: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": list(blocks),
        "api": "faux",
        "provider": "anthropic",
        "model": "m",
        "usage": {},
        "stopReason": stop,
        "timestamp": 0,
    }
    if error is not None:
        msg["errorMessage"] = error
    return msg


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def test_minimax_tool_call_xml_is_stripped() -> None:
    raw = 'Checking.<minimax:tool_call><invoke name="read"><parameter name="path">a</parameter></invoke></minimax:tool_call> Done.'
    assert extract_assistant_text(message(text(raw))) == "Checking. Done."


def test_special_tokens_stripped() -> None:
    assert strip_model_special_tokens("Hi<|im_end|> there") == "Hi there"
    assert extract_assistant_text(message(text("Answer<|endoftext|>"))) == "Answer"


def test_downgraded_tool_call_text_is_stripped_and_surroundings_kept() -> None:
    raw = (
        'Before.\n[Tool Call: exec (ID: call_1)]\nArguments: {"command": "ls -la", '
        '"nested": {"a": [1, 2]}}\nAfter.'
    )
    assert strip_downgraded_tool_call_text(raw) == "Before.\nAfter."
    assert strip_downgraded_tool_call_text("[Historical context: earlier turn]\nHello") == "Hello"
    assert strip_downgraded_tool_call_text("[Tool Result for ID call_1]\nfile list") == ""


def test_think_tags_removed_and_blocks_joined() -> None:
    msg = message(
        text("<think>plan</think>First"), {"type": "thinking", "thinking": "x"}, text("Second")
    )
    assert extract_assistant_text(msg) == "First\nSecond"
    assert extract_assistant_text(message(text("Visible <think>never closed"))) == "Visible"


def test_error_context_rewrites_raw_errors() -> None:
    msg = message(
        text('529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'),
        stop="error",
    )
    assert extract_assistant_text(msg) == copy.OVERLOADED_TEXT


def test_thinking_extraction_and_reasoning_format() -> None:
    msg = message(
        {"type": "thinking", "thinking": " step 1 "}, {"type": "thinking", "thinking": "step 2"}
    )
    assert extract_assistant_thinking(msg) == "step 1\nstep 2"
    assert (
        format_reasoning_message("line one\n\nline two") == "Reasoning:\n_line one_\n\n_line two_"
    )
    assert format_reasoning_message("   ") == ""
    assert extract_thinking_from_tagged_stream("x<think>partial") == "partial"


def test_promote_thinking_tags_to_blocks() -> None:
    msg = message(text("<think>reason</think> answer"))
    promote_thinking_tags_to_blocks(msg)  # type: ignore[arg-type]
    assert msg["content"] == [
        {"type": "thinking", "thinking": "reason"},
        {"type": "text", "text": "answer"},
    ]
    already = message({"type": "thinking", "thinking": "t"}, text("<think>x</think>y"))
    before = list(already["content"])
    promote_thinking_tags_to_blocks(already)  # type: ignore[arg-type]
    assert already["content"] == before


def test_infer_tool_meta() -> None:
    assert infer_tool_meta_from_args("exec", {"command": "ls   -la"}) == "ls -la"
    assert infer_tool_meta_from_args("read", {"path": "src/a.py"}) == "src/a.py"
    assert (
        infer_tool_meta_from_args("web_fetch", {"url": "https://x.example"}) == "https://x.example"
    )
    assert infer_tool_meta_from_args("read", "nope") is None
    assert len(infer_tool_meta_from_args("exec", {"command": "x" * 500}) or "") == 120


# -- §4.24 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("prompt is too long: 208423 tokens > 200000 maximum", copy.CONTEXT_OVERFLOW_TEXT),
        ("400 Incorrect role information", copy.ROLE_ORDERING_TEXT),
        ("messages.3.content.1.tool_use.input: Field required", copy.CORRUPTED_SESSION_TEXT),
        (
            '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            copy.OVERLOADED_TEXT,
        ),
        ("429 Too Many Requests: rate limit exceeded", copy.RATE_LIMIT_TEXT),
        (
            '400 {"type":"error","error":{"type":"invalid_request_error","message":"Your credit '
            'balance is too low to access the Anthropic API."}}',
            copy.BILLING_ERROR_TEXT,
        ),
        ("Request timed out.", copy.TIMEOUT_TEXT),
        ("connect ECONNREFUSED 10.0.0.1:443", copy.NETWORK_ERROR_TEXT),
        (
            '400 {"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}',
            "LLM request rejected: max_tokens: too big",
        ),
        ("reasoning is required for this model", copy.REASONING_REQUIRED_TEXT),
        ("No API key found for provider anthropic", copy.MISSING_API_KEY_TEXT),
        ("401 invalid x-api-key", copy.AUTH_ERROR_TEXT),
        ("500 Internal Server Error", "HTTP 500: Internal Server Error"),
        (
            '{"error":{"type":"weird_error","message":"odd"},"request_id":"r1"}',
            "LLM error weird_error: odd (request_id: r1)",
        ),
        (
            "image exceeds 5 MB maximum",
            "Image too large for the model (max 5 MB). Please compress or resize the image and try again.",
        ),
    ],
)
def test_format_assistant_error_text_copy_per_category(raw: str, expected: str) -> None:
    assert format_assistant_error_text(message(stop="error", error=raw)) == expected


def test_format_assistant_error_text_edges() -> None:
    assert format_assistant_error_text(message(text("fine"))) is None
    assert format_assistant_error_text(message(stop="error")) == copy.UNKNOWN_ERROR_TEXT
    long = "something odd happened " * 50
    out = format_assistant_error_text(message(stop="error", error=long))
    assert out is not None
    assert out.endswith("…")
    assert len(out) == 601
    named = format_assistant_error_text(
        message(stop="error", error="insufficient credits"), provider="OpenRouter"
    )
    assert named is not None
    assert named.startswith("⚠️ OpenRouter returned a billing error")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '400 {"error": {"code": 400, "message": "", "status": "INVALID_ARGUMENT"}}',
            "LLM request failed (HTTP 400 INVALID_ARGUMENT) and the provider gave no error "
            "message.",
        ),
        (
            '503 {"detail": null, "retry": [1, 2]}',
            "LLM request failed (HTTP 503) and the provider gave no error message.",
        ),
        ('{"unexpected": true}', copy.UNKNOWN_ERROR_TEXT),
        (
            '529 {"type": "error", "error": {"type": "api_error"}, "request_id": "req_9"}',
            "LLM request failed (HTTP 529 api_error) and the provider gave no error message. "
            "(request_id: req_9)",
        ),
        ("[1, 2, 3]", copy.UNKNOWN_ERROR_TEXT),
    ],
)
def test_a_json_body_with_no_message_is_never_shown_raw(raw: str, expected: str) -> None:
    assert format_assistant_error_text(message(stop="error", error=raw)) == expected


def test_sanitize_leaves_prose_alone() -> None:
    prose = "The rate limit error and the 401 you saw mean the token expired."
    assert sanitize_user_facing_text(prose) == prose


def test_sanitize_collapses_duplicate_paragraphs_and_strips_final() -> None:
    assert sanitize_user_facing_text("<final>Hello\n\nHello\n\nBye</final>") == "Hello\n\nBye"


def test_sanitize_rewrites_raw_error_payload_and_error_context() -> None:
    payload = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    assert sanitize_user_facing_text(payload) == copy.OVERLOADED_TEXT
    assert sanitize_user_facing_text("Request timed out.", error_context=True) == copy.TIMEOUT_TEXT
    assert sanitize_user_facing_text("x" * 700, error_context=True) == "x" * 600 + "…"


def _reasoning_by_rule(text: str) -> str:
    trimmed = text.strip()
    if not trimmed:
        return ""
    return "Reasoning:\n" + "\n".join(f"_{line}_" if line else "" for line in trimmed.split("\n"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab \n\t_", max_size=12), max_size=25), st.booleans())
def test_streamed_reasoning_formats_only_new_lines_and_matches_the_rule(
    pieces: list[str], restart: bool
) -> None:
    formatter = StreamedReasoningFormat()
    text = ""
    for index, piece in enumerate(pieces):
        text = piece if restart and index == len(pieces) // 2 else text + piece
        assert formatter(text) == _reasoning_by_rule(text) == format_reasoning_message(text)

"""Gemini and Anthropic turn validation (reference §4.12 steps 10-11)."""

from __future__ import annotations

from typing import Any

from clawpi.runner.transcript_policy import resolve_transcript_policy
from clawpi.runner.turn_validation import (
    TOOL_CALLS_OMITTED_TEXT,
    validate_anthropic_turns,
    validate_gemini_turns,
    validate_replay_turns,
)


def user(content: Any, ts: int | None = 1) -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": ts}


def assistant(*blocks: Any, stop: str = "stop", usage: int = 1) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks),
        "stopReason": stop,
        "usage": {"totalTokens": usage},
        "timestamp": 2,
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}


def result(call_id: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [text("ok")],
        "isError": False,
        "timestamp": 3,
    }


def test_gemini_merges_consecutive_assistant_turns() -> None:
    first = assistant(text("a"), usage=1)
    second = assistant(text("b"), stop="toolUse", usage=9)
    out = validate_gemini_turns([user("q"), first, second, user("n")])
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[1]["content"] == [text("a"), text("b")]
    assert out[1]["usage"] == {"totalTokens": 9} and out[1]["stopReason"] == "toolUse"
    assert first["content"] == [text("a")]  # input untouched


def test_gemini_leaves_alternating_history_alone() -> None:
    history = [user("q"), assistant(text("a")), user("n"), assistant(text("b"))]
    assert validate_gemini_turns(history) is history


def test_anthropic_merges_consecutive_user_strings_with_a_blank_line() -> None:
    out = validate_anthropic_turns([user("first", ts=1), user("second", ts=5)])
    assert out == [{"role": "user", "content": "first\n\nsecond", "timestamp": 5}]


def test_anthropic_merges_user_blocks_and_strings_as_blocks() -> None:
    out = validate_anthropic_turns([user("first"), user([text("second")])])
    assert out[0]["content"] == [text("first"), text("second")]


def test_anthropic_merged_turn_keeps_the_earlier_timestamp_when_the_later_has_none() -> None:
    out = validate_anthropic_turns([user("a", ts=4), user("b", ts=None)])
    assert out[0]["timestamp"] == 4


def test_anthropic_does_not_merge_across_tool_results() -> None:
    history = [user("q"), assistant(call("c1")), result("c1"), user("n")]
    assert validate_anthropic_turns(history) is history


def test_anthropic_strips_tool_calls_without_results() -> None:
    history = [user("q"), assistant(text("let me look"), call("c1"), call("c2")), result("c2")]
    out = validate_anthropic_turns(history)
    assert out[1]["content"] == [text("let me look"), call("c2")]


def test_anthropic_turn_with_only_unanswered_calls_keeps_a_placeholder() -> None:
    out = validate_anthropic_turns([user("q"), assistant(call("c1")), user("n")])
    assert out[1]["content"] == [text(TOOL_CALLS_OMITTED_TEXT)]


def test_anthropic_aborted_turn_gets_no_placeholder() -> None:
    out = validate_anthropic_turns([user("q"), assistant(call("c1"), stop="aborted"), user("n")])
    assert out[1]["content"] == []


def test_validation_is_idempotent() -> None:
    history = [user("a"), user("b"), assistant(call("c1")), assistant(text("x")), user("c")]
    for validate in (validate_gemini_turns, validate_anthropic_turns):
        once = validate(history)
        assert validate(once) == once


def test_replay_validation_follows_the_policy() -> None:
    history = [user("a"), user("b"), assistant(text("x")), assistant(text("y"))]
    anthropic = resolve_transcript_policy("anthropic-messages", "anthropic", "claude")
    google = resolve_transcript_policy("google-generative-ai", "google", "gemini")
    openai = resolve_transcript_policy("openai-responses", "openai", "gpt-5")
    assert [m["role"] for m in validate_replay_turns(history, anthropic)] == [
        "user",
        "assistant",
        "assistant",
    ]
    assert [m["role"] for m in validate_replay_turns(history, google)] == [
        "user",
        "user",
        "assistant",
    ]
    assert validate_replay_turns(history, openai) is history

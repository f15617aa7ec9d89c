from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from clawpi.ai.models import Model
from clawpi.ai.transform import IMAGE_OMITTED_TEXT, NO_RESULT_TEXT, transform_messages
from clawpi.ai.types import AssistantMessage, Message, empty_usage

TARGET = Model(
    id="claude-x", api="anthropic-messages", provider="anthropic", input=("text", "image")
)
TEXT_ONLY = Model(id="small", api="openai-completions", provider="local")


def assistant(
    content: list[Any], *, model: Model = TARGET, stop: str = "toolUse"
) -> AssistantMessage:
    return {
        "role": "assistant",
        "content": content,
        "api": model.api,
        "provider": model.provider,
        "model": model.id,
        "usage": empty_usage(),
        "stopReason": stop,  # type: ignore[typeddict-item]
        "timestamp": 5,
    }


def user(text: str) -> Message:
    return {"role": "user", "content": text, "timestamp": 1}


def result(call_id: str, text: str = "ok") -> Message:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 6,
    }


OTHER = Model(id="gpt-x", api="openai-responses", provider="openai")


def test_same_model_keeps_signed_thinking_and_signatures() -> None:
    blocks = [
        {"type": "thinking", "thinking": "plan", "thinkingSignature": "sig"},
        {"type": "text", "text": "hi", "textSignature": "ts"},
    ]
    messages = [user("q"), assistant(blocks, stop="stop")]
    out = transform_messages(messages, TARGET)
    assert out[1]["content"] == blocks  # type: ignore[typeddict-item]


def test_foreign_thinking_becomes_plain_text_and_signatures_go() -> None:
    blocks = [
        {"type": "thinking", "thinking": "plan", "thinkingSignature": "sig"},
        {"type": "thinking", "thinking": "   "},
        {
            "type": "thinking",
            "thinking": "[Reasoning redacted]",
            "redacted": True,
            "thinkingSignature": "x",
        },
        {"type": "text", "text": "hi", "textSignature": "ts"},
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}, "thoughtSignature": "t"},
    ]
    messages = [user("q"), assistant(blocks, model=OTHER), result("c1")]
    original = copy.deepcopy(messages)
    out = transform_messages(messages, TARGET)
    assert out[1]["content"] == [  # type: ignore[typeddict-item]
        {"type": "text", "text": "plan"},
        {"type": "text", "text": "hi"},
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {}},
    ]
    assert messages == original  # the caller's history is never mutated


def test_tool_call_ids_are_normalised_and_results_follow() -> None:
    messages = [
        user("q"),
        assistant(
            [{"type": "toolCall", "id": "call_1|fc_abc", "name": "read", "arguments": {}}],
            model=OTHER,
        ),
        result("call_1|fc_abc"),
    ]
    out = transform_messages(messages, TARGET, lambda i, m, s: i.replace("|", "_"))
    assert out[1]["content"][0]["id"] == "call_1_fc_abc"  # type: ignore[typeddict-item]
    assert out[2]["toolCallId"] == "call_1_fc_abc"  # type: ignore[typeddict-item]


def test_errored_and_aborted_turns_are_dropped() -> None:
    messages = [
        user("q"),
        assistant([{"type": "text", "text": "partial"}], stop="error"),
        assistant([{"type": "text", "text": "cut"}], stop="aborted"),
        user("again"),
    ]
    out = transform_messages(messages, TARGET)
    assert [m["role"] for m in out] == ["user", "user"]


def test_orphan_tool_calls_get_synthetic_results_before_the_next_user_turn() -> None:
    call = {"type": "toolCall", "id": "c9", "name": "exec", "arguments": {"command": "ls"}}
    messages = [user("q"), assistant([call]), user("next")]
    out = transform_messages(messages, TARGET)
    assert [m["role"] for m in out] == ["user", "assistant", "toolResult", "user"]
    synthetic: Any = out[2]
    assert synthetic["toolCallId"] == "c9"
    assert synthetic["isError"] is True
    assert synthetic["content"] == [{"type": "text", "text": NO_RESULT_TEXT}]
    # deterministic: no clock in synthetic parts, so prompt caches survive
    assert transform_messages(messages, TARGET) == out


def test_trailing_orphans_are_left_for_the_running_tools() -> None:
    call = {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {}}
    out = transform_messages([user("q"), assistant([call])], TARGET)
    assert [m["role"] for m in out] == ["user", "assistant"]


def test_images_are_dropped_for_text_only_models() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    messages: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "see"}, image], "timestamp": 1},
        {"role": "user", "content": [image], "timestamp": 2},
        assistant(
            [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}], model=TEXT_ONLY
        ),
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [image],
            "isError": False,
            "timestamp": 3,
        },
    ]
    out: Any = transform_messages(messages, TEXT_ONLY)
    assert out[0]["content"] == [{"type": "text", "text": "see"}]
    assert len(out) == 3  # the image-only user message is skipped
    assert out[2]["content"] == [{"type": "text", "text": IMAGE_OMITTED_TEXT}]
    kept: Any = transform_messages(messages, TARGET)
    assert kept[0]["content"][1] == image


def test_lone_surrogates_are_removed_and_emoji_kept() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "bad \ud83d here 😀", "timestamp": 1},
        assistant([{"type": "text", "text": "x\udc00y"}], stop="stop"),
    ]
    out: Any = transform_messages(messages, TARGET)
    assert out[0]["content"] == "bad  here 😀"
    assert out[1]["content"][0]["text"] == "xy"


def _piece(rng: random.Random, call: int) -> list[Message]:
    """One step of a conversation, from any of the models a session may have used."""
    writer = rng.choice([TARGET, OTHER])
    call_id = f"call_{call % 4}|fc_{call % 4}"  # ids recur, so results can answer old calls
    kind = rng.randrange(8)
    if kind == 0:
        return [user(f"q{call}")]
    if kind == 1:
        image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        return [{"role": "user", "content": [image], "timestamp": 1}]
    if kind == 2:
        blocks = [
            {"type": "thinking", "thinking": "plan", "thinkingSignature": "sig"},
            {"type": "toolCall", "id": call_id, "name": "read", "arguments": {}},
        ]
        return [assistant(blocks, model=writer)]
    if kind == 3:
        return [result(call_id)]
    if kind == 4:
        return [assistant([{"type": "text", "text": "done \ud800"}], model=writer, stop="stop")]
    if kind == 5:
        calls = [{"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}]
        return [assistant(calls, model=writer, stop=rng.choice(["error", "aborted"]))]
    if kind == 6:
        blocks = [{"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}]
        return [assistant(blocks, model=writer), result(call_id)]
    return [{"role": "custom", "content": "note", "timestamp": 2}]  # type: ignore[list-item]


def _normalize(call_id: str, model: Model, source: AssistantMessage) -> str:
    return call_id.split("|", 1)[0] + "_n"


@pytest.mark.parametrize("seed", range(4))
def test_a_conversation_transformed_request_by_request_matches_a_whole_transform(
    seed: int,
) -> None:
    """With an owner, each request transforms only what the history gained; whatever the
    history does between requests (grows, is cut back to a turn or below, is copied, or is
    sent to another model), the result is the whole transform's."""
    rng = random.Random(seed)

    class Conversation:
        pass

    owner = Conversation()
    history: list[Message] = []
    for step in range(300):
        op = rng.random()
        if op < 0.75:
            history = history + _piece(rng, step)
        elif op < 0.9:
            history = history[: rng.randrange(len(history) + 1)]
        else:
            history = copy.deepcopy(history)
        model = rng.choice([TARGET, TARGET, TEXT_ONLY])
        normalize = rng.choice([_normalize, _normalize, None])
        expected = transform_messages(history, model, normalize)
        assert transform_messages(history, model, normalize, owner=owner) == expected


def test_a_history_cut_back_to_the_turn_that_answered_earlier_calls_is_repaired_again() -> None:
    """An open call gets its synthetic result when the next turn starts. Cut the history back
    to before that turn, and the call is trailing again: no synthetic result (its tool may
    still run); then its real result arrives and must be the one sent."""

    class Conversation:
        pass

    owner = Conversation()
    calls = [{"type": "toolCall", "id": "call_1|fc_1", "name": "read", "arguments": {}}]
    ask, call = user("go"), assistant(calls, model=OTHER)
    later = assistant([{"type": "toolCall", "id": "c2", "name": "read", "arguments": {}}])
    steps = [[ask, call, later], [ask, call], [ask, call, result("call_1|fc_1")]]
    for history in steps:
        expected = transform_messages(history, TARGET, _normalize)
        assert transform_messages(history, TARGET, _normalize, owner=owner) == expected
    assert expected[-1]["toolCallId"] == "call_1_n"  # type: ignore[typeddict-item]
    assert expected[-1]["content"] == result("x")["content"]  # type: ignore[typeddict-item]

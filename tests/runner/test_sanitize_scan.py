"""The pipeline skips steps a history gives nothing to do, with the same result as running all."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import random
from collections.abc import Iterator
from typing import Any

import pytest

from clawpi.runner.sanitize import (
    annotate_inter_session_user_messages,
    drop_delivery_mirror_messages,
    drop_thinking_blocks,
    normalize_assistant_usage,
    sanitize_antigravity_thinking_blocks,
    sanitize_session_history,
    sanitize_session_messages_images,
    sanitize_tool_call_inputs,
    sanitize_tool_use_result_pairing,
    scan_history,
    scan_session_history,
    strip_tool_result_details,
)
from clawpi.runner.transcript_policy import TranscriptPolicy, resolve_transcript_policy
from clawpi.runner.turn_validation import validate_replay_turns
from clawpi.session import SessionManager
from clawpi.session.context import COMPACTION_SUMMARY_PREFIX

Msg = dict[str, Any]
USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _assistant(*blocks: Any, **extra: Any) -> Msg:
    return {
        "role": "assistant",
        "content": list(blocks),
        "usage": dict(USAGE),
        "stopReason": "stop",
        "timestamp": 2,
        **extra,
    }


TRAITS: dict[str, list[Msg]] = {
    "plain": [
        {"role": "user", "content": "hello", "timestamp": 1},
        _assistant({"type": "text", "text": "hi"}),
    ],
    "inter_session": [
        {
            "role": "user",
            "content": "relayed",
            "timestamp": 1,
            "provenance": {"kind": "inter_session", "sourceSessionKey": "agent:main:other"},
        },
    ],
    "delivery_mirror": [
        _assistant({"type": "text", "text": "sent"}, provider="openclaw", model="delivery-mirror")
    ],
    "tool_turn": [
        _assistant({"type": "toolCall", "id": "call|1", "name": "read", "arguments": {}}),
        {
            "role": "toolResult",
            "toolCallId": "call|1",
            "toolName": "read",
            "details": {"a": 1},
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
            "timestamp": 3,
        },
    ],
    "orphan_result": [
        {
            "role": "toolResult",
            "toolCallId": "x",
            "toolName": "read",
            "content": [{"type": "text", "text": "?"}],
            "isError": False,
            "timestamp": 3,
        },
    ],
    "unknown_tool": [
        _assistant({"type": "toolCall", "id": "c2", "name": "bad name!", "arguments": {}})
    ],
    "image": [
        {
            "role": "user",
            "timestamp": 1,
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
        },
    ],
    "unreadable_image": [
        {"role": "user", "timestamp": 1, "content": [{"type": "image", "data": "@@@"}]},
    ],
    "signature": [
        _assistant({"type": "text", "text": "x", "thought_signature": "msg_abc"}),
    ],
    "thinking": [
        _assistant(
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
            {"type": "text", "text": "done"},
        ),
    ],
    "blank_and_empty": [
        _assistant({"type": "text", "text": "  "}, {"type": "text", "text": "kept"}),
        _assistant(),
    ],
    "missing_usage": [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "u"}],
            "stopReason": "stop",
            "timestamp": 2,
        }
    ],
    "compaction": [
        {"role": "user", "content": f"{COMPACTION_SUMMARY_PREFIX}\\nearlier", "timestamp": 5},
    ],
}

POLICIES = [
    ("anthropic-messages", "anthropic", "claude-sonnet-4-5"),
    ("openai-completions", "openai", "gpt-4o"),
    ("openai-responses", "openai", "gpt-5"),
    ("google-generative-ai", "google", "gemini-2.5-pro"),
    ("openai-completions", "mistral", "mistral-large-latest"),
    ("openai-completions", "moonshot", "kimi-k2"),
    ("openai-completions", "github-copilot", "claude-sonnet-4"),  # drops thinking
    ("google-gemini-cli", "google-antigravity", "claude-sonnet-4-5"),  # keeps valid thinking
]


def _every_step(history: list[Msg], policy: TranscriptPolicy, provider: str, api: str) -> list[Msg]:
    """Steps 1-6 run unconditionally, as the pipeline did before it learned to skip."""
    history = annotate_inter_session_user_messages(list(history))
    if provider == "anthropic" or api == "anthropic-messages":
        history = drop_delivery_mirror_messages(history)
    history = sanitize_session_messages_images(history, policy)
    if policy.drop_thinking_blocks:
        history = drop_thinking_blocks(history)
    if policy.normalize_antigravity_thinking_blocks:
        history = sanitize_antigravity_thinking_blocks(history)
    history = sanitize_tool_call_inputs(history, allowed_tool_names=["read"])
    if policy.repair_tool_use_result_pairing:
        history = sanitize_tool_use_result_pairing(history)
    return normalize_assistant_usage(strip_tool_result_details(history))


@pytest.mark.parametrize(("api", "provider", "model_id"), POLICIES)
def test_skipping_steps_changes_nothing(api: str, provider: str, model_id: str) -> None:
    policy = resolve_transcript_policy(api, provider, model_id)
    names = list(TRAITS)
    histories = [TRAITS[n] for n in names]
    histories += [TRAITS["plain"] + TRAITS[n] + TRAITS["plain"] for n in names]
    histories += [a + b for a, b in itertools.combinations([TRAITS[n] for n in names], 2)]
    for history in histories:
        expected = _every_step(history, policy, provider, api)
        result = sanitize_session_history(
            history,
            policy,
            model_api=api,
            provider=provider,
            model_id=model_id,
            allowed_tool_names=["read"],
        )
        if policy.apply_google_turn_ordering and len(result) == len(expected) + 1:
            result = result[1:]  # step 8 put a bootstrap user turn in front
        assert result == expected


def _histories(seed: int, turns: int, pieces: list[list[Msg]]) -> Iterator[list[Msg]]:
    """A session's history from one turn to the next: mostly grown by a piece, sometimes a
    compacted prefix put before its tail, cut back to a shorter branch, or an equal copy."""
    rng = random.Random(seed)
    history: list[Msg] = []
    for _ in range(turns):
        op = rng.random()
        if op < 0.75:
            history = history + copy.deepcopy(rng.choice(pieces))
        elif op < 0.85:
            cut = rng.randrange(len(history) + 1)
            history = copy.deepcopy(rng.choice(pieces)) + history[cut:]
        elif op < 0.95:
            history = history[: rng.randrange(len(history) + 1)]
        else:
            history = copy.deepcopy(history)
        yield history


@pytest.mark.parametrize("seed", range(4))
def test_a_session_scanned_turn_by_turn_needs_what_a_full_scan_finds(seed: int) -> None:
    """Only the messages after the last history scanned are scanned; whatever happens to the
    history between turns (growth, a compacted prefix, a shorter branch, equal copies), the
    needs are those of a full scan."""
    manager = SessionManager.in_memory()
    for history in _histories(seed, 300, list(TRAITS.values())):
        assert scan_session_history(history, manager) == scan_history(history)


SPLIT_TURNS: dict[str, list[Msg]] = {
    # A turn whose results arrive in a later growth of the history, moved or missing.
    "call_only": [
        _assistant(
            {"type": "toolCall", "id": "call|1", "name": "read", "arguments": {}},
            {"type": "toolCall", "id": "call|2", "name": "read", "arguments": {}},
        )
    ],
    "late_result": [TRAITS["tool_turn"][1]],
    "user_then_result": [
        {"role": "user", "content": "wait", "timestamp": 4},
        {**TRAITS["tool_turn"][1], "toolCallId": "call|2"},
    ],
    "errored_call": [
        _assistant(
            {"type": "toolCall", "id": "call|3", "name": "read", "arguments": {}},
            stopReason="error",
        )
    ],
    "after_compaction": [_assistant({"type": "text", "text": "new"}, timestamp=9)],
}


@pytest.mark.parametrize(("api", "provider", "model_id"), POLICIES)
@pytest.mark.parametrize("seed", range(3))
def test_a_session_sanitized_and_validated_turn_by_turn_gets_what_a_whole_pass_gives(
    api: str, provider: str, model_id: str, seed: int
) -> None:
    """Steps 2 and 4-6 and the turn validation go on from where their last output could still
    change; whatever happens to the history between turns (growth that completes the last turn, a new compaction summary, a
    compacted prefix, a shorter branch, equal copies, another tool list), each turn's result is
    the one the whole pipeline gives without a session."""
    rng = random.Random(seed)
    policy = resolve_transcript_policy(api, provider, model_id)
    manager = SessionManager.in_memory()
    # about half the pieces are parts of a turn split across growths
    pieces = [*TRAITS.values(), *list(SPLIT_TURNS.values()) * 3]
    for history in _histories(seed, 200, pieces):
        tools = ["read"] if rng.random() < 0.9 else ["write"]

        def sanitize(
            session: SessionManager | None, history: list[Msg] = history, tools: list[str] = tools
        ) -> list[Msg]:
            return sanitize_session_history(
                history,
                policy,
                model_api=api,
                provider=provider,
                model_id=model_id,
                allowed_tool_names=tools,
                session_manager=session,
            )

        expected = validate_replay_turns(sanitize(None), policy)
        result = validate_replay_turns(sanitize(manager), policy, manager)
        if policy.apply_google_turn_ordering and len(result) == len(expected) + 1:
            result = result[1:]  # with a session, step 8 puts its bootstrap turn in front
        assert result == expected


@pytest.mark.parametrize("seed", range(3))
def test_turns_validated_turn_by_turn_match_a_whole_pass_even_unsanitized(seed: int) -> None:
    """The validation on its own: calls whose results come in a later growth, and user
    messages that keep arriving after each other."""
    session = SessionManager.in_memory()
    both = dataclasses.replace(
        resolve_transcript_policy("anthropic-messages", "anthropic", "claude-sonnet-4-5"),
        validate_gemini_turns=True,
    )
    for history in _histories(seed, 300, [*TRAITS.values(), *list(SPLIT_TURNS.values()) * 3]):
        assert validate_replay_turns(history, both, session) == validate_replay_turns(history, both)


def test_a_history_cut_back_to_a_turn_that_closed_earlier_ones_reads_that_turn_again() -> None:
    """A turn's pairing is final once the next turn starts. Cut the history back so that the
    next turn is gone, then let the missing result arrive: the turn must be paired again."""
    policy = resolve_transcript_policy("anthropic-messages", "anthropic", "claude-sonnet-4-5")
    session = SessionManager.in_memory()
    ask = {"role": "user", "content": "go", "timestamp": 1}
    call = _assistant({"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {}})
    later = _assistant({"type": "text", "text": "next"}, timestamp=5)
    answer = {**TRAITS["tool_turn"][1], "toolCallId": "toolu_1", "timestamp": 6}

    def prepared(history: list[Msg], owner: SessionManager | None) -> list[Msg]:
        out = sanitize_session_history(
            history, policy, allowed_tool_names=["read"], session_manager=owner
        )
        return validate_replay_turns(out, policy, owner)

    for history in ([ask, call, later], [ask, call], [ask, call, answer]):
        assert prepared(history, session) == prepared(history, None)
    assert prepared([ask, call, answer], session)[2]["content"] == answer["content"]
    # the turn validation alone, on a history no pairing repaired first
    for history in ([ask, call, later], [ask, call], [ask, call, answer]):
        assert validate_replay_turns(history, policy, session) == validate_replay_turns(
            history, policy
        )


def test_a_session_that_goes_away_takes_its_kept_work_with_it() -> None:
    """The memos hold sessions weakly and nothing they keep points back at the session, so a
    gateway that lets a session go frees what every step kept for it."""
    import gc
    import weakref

    from clawpi.ai import transform
    from clawpi.ai.models import get_model
    from clawpi.runner import sanitize, turn_validation
    from clawpi.sdk import agent_session

    memos = [
        sanitize._tool_call_ids,
        sanitize._content,
        sanitize._tool_call_inputs,
        sanitize._pairing,
        sanitize._details,
        sanitize._usage,
        turn_validation._undangled,
        turn_validation._users_merged,
        agent_session._llm_conversions,
        transform._adapted,
        transform._repaired,
    ]
    policy = resolve_transcript_policy("anthropic-messages", "anthropic", "claude-sonnet-4-5")
    session = SessionManager.in_memory()
    history = copy.deepcopy(TRAITS["tool_turn"] + TRAITS["compaction"] + TRAITS["plain"])
    out = sanitize_session_history(
        history, policy, allowed_tool_names=["read"], session_manager=session
    )
    validate_replay_turns(out, policy, session)
    agent_session._llm_conversions(session, [{"role": "custom", "content": "c", "timestamp": 1}])
    transform.transform_messages(out, get_model("anthropic", "claude-sonnet-4-5"), owner=session)
    assert all(session in memo._seen for memo in memos)
    held = [len(memo._seen) for memo in memos]
    gone = weakref.ref(session)
    del session
    gc.collect()
    assert gone() is None
    assert [len(memo._seen) for memo in memos] == [count - 1 for count in held]

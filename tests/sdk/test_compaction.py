"""Compaction algorithm: token estimates, cut points, preparation and the summary calls."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawpi.sdk.compaction import (
    compact,
    estimate_context_tokens,
    estimate_tokens,
    find_cut_point,
    prepare_compaction,
    serialize_conversation,
    should_compact,
)
from clawpi.testing import FauxProvider, FunctionProvider

_ids = iter(range(10**9))


def entry(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"e{next(_ids):07x}",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": message,
    }


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(
    text: str = "", calls: list[dict[str, Any]] | None = None, *, usage: int = 0, stop: str = "stop"
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += calls or []
    return {
        "role": "assistant",
        "content": content,
        "api": "faux",
        "provider": "faux",
        "model": "faux-1",
        "usage": {
            "input": usage,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": usage,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": stop,
        "timestamp": 2,
    }


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": f"c{next(_ids)}", "name": name, "arguments": arguments}


def result(text: str, call_id: str = "c", name: str = "read") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 3,
    }


def meta(kind: str) -> dict[str, Any]:
    return {
        "type": kind,
        "id": f"m{next(_ids):07x}",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }


def test_token_estimates_follow_pi_rules() -> None:
    assert estimate_tokens(user("x" * 13)) == 4
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    assert (
        estimate_tokens({"role": "user", "content": [{"type": "text", "text": "abcd"}, image]}) == 1
    )
    tool_result = {"role": "toolResult", "content": [{"type": "text", "text": "abcd"}, image]}
    assert estimate_tokens(tool_result) == (4 + 4800) // 4
    with_call = assistant(
        "ab", [{"type": "toolCall", "id": "1", "name": "ls", "arguments": {"path": "."}}]
    )
    assert estimate_tokens(with_call) == -(-(2 + 2 + len('{"path":"."}')) // 4)
    assert estimate_tokens({"role": "bashExecution", "command": "ls", "output": "a\nb"}) == 2


def test_context_tokens_use_last_successful_usage_plus_later_estimates() -> None:
    messages = [
        user("q"),
        assistant("a", usage=1000),
        user("x" * 40),
        assistant("", usage=5000, stop="error"),
    ]
    assert estimate_context_tokens(messages) == 1000 + 10 + 0
    assert should_compact(1000, 10_000, 8_000) is False
    assert should_compact(2001, 10_000, 8_000) is True
    assert should_compact(9999, 10_000, 8_000, enabled=False) is False


def test_verified_cut_point_example_from_pi() -> None:
    # pi 0.58.3: estimates [user 4, assistant 9, toolResult 3, assistant 8, user 7, assistant 10],
    # keepRecentTokens 10 -> first kept 7, turn start 6, split turn
    branch = [
        meta("model_change"),
        meta("thinking_level_change"),
        entry(user("x" * 16)),
        entry(assistant("y" * 36)),
        entry(result("z" * 12)),
        entry(assistant("w" * 32)),
        entry(user("v" * 28)),
        entry(assistant("u" * 40)),
    ]
    tokens = [estimate_tokens(e["message"]) for e in branch[2:]]
    assert tokens == [4, 9, 3, 8, 7, 10]
    cut = find_cut_point(branch, 0, len(branch), 10)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (7, 6, True)


def test_cut_takes_along_preceding_metadata_and_keeps_all_when_small() -> None:
    branch = [
        entry(user("a" * 400)),
        entry(assistant("b" * 400)),
        meta("model_change"),
        meta("label"),
        entry(user("c" * 400)),
        entry(assistant("d")),
    ]
    cut = find_cut_point(branch, 0, len(branch), 100)
    assert cut.first_kept_entry_index == 2  # the model_change before the kept user message
    everything = find_cut_point(branch, 0, len(branch), 10**6)
    assert everything.first_kept_entry_index == 0


def test_no_valid_cut_points() -> None:
    branch = [meta("model_change"), entry(result("x"))]
    cut = find_cut_point(branch, 0, 2, 1)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)


@st.composite
def branches(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 6))):
        out.append(entry(user("u" * draw(st.integers(0, 300)))))
        for _ in range(draw(st.integers(0, 3))):
            n = draw(st.integers(0, 3))
            calls = [call("read", path=f"f{i}") for i in range(n)]
            out.append(entry(assistant("a" * draw(st.integers(0, 300)), calls)))
            out.extend(entry(result("r" * draw(st.integers(0, 900)), c["id"])) for c in calls)
            if draw(st.booleans()):
                out.append(meta(draw(st.sampled_from(["model_change", "label", "custom"]))))
        out.append(entry(assistant("done" * draw(st.integers(0, 50)))))
    return out


@settings(max_examples=200, deadline=None)
@given(branches(), st.integers(1, 2000))
def test_property_cut_never_separates_a_tool_call_from_its_result(
    branch: list[dict[str, Any]], keep: int
) -> None:
    cut = find_cut_point(branch, 0, len(branch), keep)
    first = branch[cut.first_kept_entry_index]
    if first["type"] == "message":
        assert first["message"]["role"] != "toolResult"
    kept_ids = {
        e["message"]["toolCallId"]
        for e in branch[cut.first_kept_entry_index :]
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }
    called_in_kept = {
        b["id"]
        for e in branch[cut.first_kept_entry_index :]
        if e["type"] == "message" and e["message"]["role"] == "assistant"
        for b in e["message"]["content"]
        if b["type"] == "toolCall"
    }
    assert kept_ids <= called_in_kept


def test_prepare_splits_history_and_turn_prefix_and_tracks_files() -> None:
    read_call = call("read", path="src/a.py")
    edit_call = call("edit", path="src/b.py", oldText="x", newText="y")
    branch = [
        entry(user("fix the bug " * 50)),
        entry(assistant("looking", [read_call])),
        entry(result("code " * 200, read_call["id"])),
        entry(user("now the other file " * 20)),
        entry(assistant("editing", [edit_call])),
        entry(result("ok", edit_call["id"], "edit")),
        entry(assistant("final words " * 40)),
    ]
    prep = prepare_compaction(branch, reserve_tokens=1000, keep_recent_tokens=100)
    assert prep is not None
    assert prep.is_split_turn
    assert prep.first_kept_entry_id == branch[6]["id"]
    assert [m["role"] for m in prep.messages_to_summarize] == ["user", "assistant", "toolResult"]
    assert [m["role"] for m in prep.turn_prefix_messages] == ["user", "assistant", "toolResult"]
    assert prep.file_ops.file_lists() == (["src/a.py"], ["src/b.py"])


def test_prepare_returns_none_right_after_a_compaction() -> None:
    compaction = {**meta("compaction"), "summary": "s", "firstKeptEntryId": "x", "tokensBefore": 1}
    assert (
        prepare_compaction([entry(user("a")), compaction], reserve_tokens=1, keep_recent_tokens=1)
        is None
    )


def test_serialize_conversation_format() -> None:
    messages = [
        user("hello"),
        {
            **assistant(
                "answer",
                [
                    {
                        "type": "toolCall",
                        "id": "1",
                        "name": "read",
                        "arguments": {"path": "a", "limit": 5},
                    }
                ],
            ),
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "answer"},
                {
                    "type": "toolCall",
                    "id": "1",
                    "name": "read",
                    "arguments": {"path": "a", "limit": 5},
                },
            ],
        },
        result("r" * 2100),
    ]
    text = serialize_conversation(messages)
    assert text.startswith("[User]: hello\n\n[Assistant thinking]: hmm\n\n[Assistant]: answer\n\n")
    assert '[Assistant tool calls]: read(path="a", limit=5)' in text
    assert text.endswith("r" * 2000 + "\n\n[... 100 more characters truncated]")


async def test_compact_calls_the_model_and_appends_file_lists() -> None:
    seen: list[Any] = []

    def summariser(context: Any, options: Any) -> str:
        seen.append((context, options))
        return "## Goal\nFix the bug."

    provider = FunctionProvider(summariser)
    read_call = call("read", path="README.md")
    branch = [
        entry(user("please read " * 100)),
        entry(assistant("", [read_call])),
        entry(result("contents " * 300, read_call["id"])),
        entry(user("thanks")),
        entry(assistant("you're welcome " * 30)),
    ]
    prep = prepare_compaction(branch, reserve_tokens=2000, keep_recent_tokens=200)
    assert prep is not None and not prep.is_split_turn
    result_ = await compact(prep, provider.model, api_key="k", custom_instructions="focus on docs")
    assert result_.summary == "## Goal\nFix the bug.\n\n<read-files>\nREADME.md\n</read-files>"
    assert result_.details == {"readFiles": ["README.md"], "modifiedFiles": []}
    assert result_.first_kept_entry_id == branch[3]["id"]
    context, options = seen[0]
    prompt = context["messages"][0]["content"][0]["text"]
    assert prompt.startswith("<conversation>\n[User]: please read")
    assert "## Constraints & Preferences" in prompt
    assert prompt.endswith("Additional focus: focus on docs")
    assert options.max_tokens == 1600
    assert "summarise" in context["systemPrompt"]


async def test_split_turn_makes_two_calls_and_merges_them() -> None:
    faux = FauxProvider(["HISTORY", "PREFIX"])
    branch = [
        entry(user("old question " * 100)),
        entry(assistant("old answer " * 100)),
        entry(user("big task " * 20)),
        entry(assistant("step one " * 100)),
        entry(assistant("step two " * 100)),
    ]
    prep = prepare_compaction(branch, reserve_tokens=1000, keep_recent_tokens=200)
    assert prep is not None and prep.is_split_turn
    result_ = await compact(prep, faux.model)
    assert result_.summary == "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
    assert len(faux.requests) == 2


async def test_summary_failure_raises_with_the_provider_message() -> None:
    from clawpi.sdk.compaction import CompactionError
    from clawpi.testing import FauxResponse

    faux = FauxProvider([FauxResponse(error="503 overloaded")])
    branch = [
        entry(user("q " * 500)),
        entry(assistant("a " * 500)),
        entry(user("x")),
        entry(assistant("y")),
    ]
    prep = prepare_compaction(branch, reserve_tokens=1000, keep_recent_tokens=1)
    assert prep is not None
    with pytest.raises(CompactionError, match="Summarization failed: 503 overloaded"):
        await compact(prep, faux.model)

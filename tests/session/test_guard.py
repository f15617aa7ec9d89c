"""The tool-result guard keeps calls and results paired on disk and results bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from clawpi.session import SessionManager, install_tool_result_guard
from clawpi.session.guard import (
    HARD_MAX_TOOL_RESULT_CHARS,
    MISSING_TOOL_RESULT_TEXT,
    cap_tool_result_size,
)


def _call_message(*calls: tuple[str, str], stop: str = "toolUse") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "toolCall", "id": cid, "name": name, "arguments": {}} for cid, name in calls
        ],
        "provider": "p",
        "model": "m",
        "stopReason": stop,
        "timestamp": 42,
    }


def _result(call_id: str, text: str = "ok", name: str = "bash") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 43,
    }


def _messages(sm: SessionManager) -> list[dict[str, Any]]:
    assert sm.session_file is not None
    lines = [orjson.loads(line) for line in sm.session_file.read_bytes().splitlines()]
    return [line["message"] for line in lines if line["type"] == "message"]


def test_missing_result_is_synthesized_before_the_next_user_message(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    install_tool_result_guard(sm)
    sm.append_message(_call_message(("c1", "bash"), ("c2", "read")))
    sm.append_message(_result("c1"))
    sm.append_message({"role": "user", "content": "next", "timestamp": 50})
    roles = [(m["role"], m.get("toolCallId")) for m in _messages(sm)]
    assert roles == [
        ("assistant", None),
        ("toolResult", "c1"),
        ("toolResult", "c2"),
        ("user", None),
    ]
    synthetic = _messages(sm)[2]
    assert synthetic == {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "read",
        "content": [{"type": "text", "text": MISSING_TOOL_RESULT_TEXT}],
        "isError": True,
        "timestamp": 42,
    }


def test_synthetic_results_are_flushed_before_other_entries_and_on_flush(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm)
    sm.append_message(_call_message(("c1", "bash")))
    sm.append_custom_entry("ext", {"x": 1})
    assert [m["role"] for m in _messages(sm)] == ["assistant", "toolResult"]
    sm.append_message(_call_message(("c3", "bash")))
    assert guard.pending_ids() == ["c3"]
    guard.flush_pending_tool_results()
    guard.flush_pending_tool_results()
    assert [m.get("toolCallId") for m in _messages(sm)] == [None, "c1", None, "c3"]
    context = sm.build_session_context()
    assert [m["role"] for m in context.messages][-1] == "toolResult"


def test_no_synthetics_when_disallowed_or_after_errored_assistant(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm, allow_synthetic_tool_results=False)
    sm.append_message(_call_message(("c1", "bash")))
    sm.append_message({"role": "user", "content": "x", "timestamp": 1})
    assert [m["role"] for m in _messages(sm)] == ["assistant", "user"]
    guard.uninstall()
    guard2 = install_tool_result_guard(sm)
    sm.append_message(_call_message(("c2", "bash"), stop="aborted"))
    assert guard2.pending_ids() == []
    guard2.clear_pending_tool_results()


def test_oversized_result_is_capped_in_proportion_keeping_a_minimum(tmp_path: Path) -> None:
    big = "a" * 500_000
    small = "b" * 4_000
    message = _result("c1")
    message["content"] = [
        {"type": "text", "text": big},
        {"type": "image", "data": "x", "mimeType": "image/png"},
        {"type": "text", "text": small},
    ]
    capped = cap_tool_result_size(message)
    texts = [b["text"] for b in capped["content"] if b["type"] == "text"]
    assert sum(map(len, texts)) <= HARD_MAX_TOOL_RESULT_CHARS + 2_000
    assert len(texts[0]) < len(big) and texts[0].startswith("aaa")
    assert len(texts[1]) >= 2_000 and "truncated" in texts[1]
    assert capped["content"][1] == message["content"][1]
    assert message["content"][0]["text"] == big  # the caller's message is not mutated
    sm = SessionManager.create("/p", tmp_path)
    install_tool_result_guard(sm)
    sm.append_message(_call_message(("c1", "bash")))
    sm.append_message(message)
    stored = _messages(sm)[1]["content"]
    assert len(stored[0]["text"]) == len(texts[0])


def test_hook_transforms_results_and_provenance_marks_user_messages(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)

    def redact(message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "content": [{"type": "text", "text": "[redacted]"}]}

    provenance = {"kind": "inter_session", "sourceSessionKey": "agent:main:x"}
    install_tool_result_guard(sm, tool_result_persist=redact, input_provenance=provenance)
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(_call_message(("c1", "bash")))
    sm.append_message(_result("c1", "secret"))
    user, _, result = _messages(sm)
    assert user["provenance"] == provenance
    assert result["content"] == [{"type": "text", "text": "[redacted]"}]


def test_blank_tool_name_is_backfilled_and_tool_use_id_accepted(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm)
    sm.append_message(_call_message(("c1", "bash")))
    result = _result("c1", name=" ")
    del result["toolCallId"]
    result["toolUseId"] = "c1"
    sm.append_message(result)
    assert guard.pending_ids() == []
    assert _messages(sm)[1]["toolName"] == "bash"


def test_unknown_tool_calls_are_dropped_and_empty_assistants_not_written(tmp_path: Path) -> None:
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm, allowed_tool_names={"bash"})
    first = sm.append_message({"role": "user", "content": "x", "timestamp": 1})
    same = sm.append_message(_call_message(("c1", "rm_rf")))
    assert same == first and guard.pending_ids() == []
    sm.append_message(_call_message(("c2", "bash"), ("c3", "nope")))
    assert guard.pending_ids() == ["c2"]
    assert sm.get_entries()[-1]["message"]["content"][0]["id"] == "c2"


def test_a_call_sent_without_an_id_leaves_the_file_with_its_answer(tmp_path: Path) -> None:
    """A stream's tool call with no id (a malformed `tool_use`) cannot be named by a result:
    the call is not written, and neither is the loop's answer to it, which names no call."""
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm, allowed_tool_names={"read"})
    sm.append_message({"role": "user", "content": "x", "timestamp": 1})
    message = _call_message(("c1", "read"))
    message["content"].insert(0, {"type": "toolCall", "id": None, "name": "read", "arguments": {}})
    sm.append_message(message)
    sm.append_message({**_result("c1"), "toolCallId": None, "toolName": "read"})
    sm.append_message(_result("c1", "done", name="read"))
    assert [(m["role"], m.get("toolCallId")) for m in _messages(sm)] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "c1"),
    ]
    assert [b["id"] for b in _messages(sm)[1]["content"]] == ["c1"]
    assert guard.pending_ids() == []


def test_a_call_whose_name_is_not_a_string_is_an_unknown_call(tmp_path: Path) -> None:
    """A stream may name a tool with a list: it is dropped like any unknown call (it used to
    break the write, and with it the whole turn)."""
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm, allowed_tool_names={"read"})
    sm.append_message({"role": "user", "content": "x", "timestamp": 1})
    message = _call_message(("c1", "read"), ("c2", "read"))
    message["content"][1]["name"] = ["read"]
    sm.append_message(message)
    sm.append_message(_result("c2", "Tool not found", name="read"))
    sm.append_message(_result("c1", "done", name="read"))
    assert [(m["role"], m.get("toolCallId")) for m in _messages(sm)] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "c1"),
    ]
    assert guard.pending_ids() == []


def test_the_results_of_dropped_unknown_calls_are_dropped_too(tmp_path: Path) -> None:
    """The loop still answers a hallucinated call ("Tool nope not found"); with the call gone
    from the file, that answer would be a result without a call."""
    sm = SessionManager.create("/p", tmp_path)
    guard = install_tool_result_guard(sm, allowed_tool_names={"bash"})
    sm.append_message({"role": "user", "content": "x", "timestamp": 1})
    sm.append_message(_call_message(("c1", "nope")))  # dropped whole: no call is left
    sm.append_message(_result("c1", "Tool nope not found", name="nope"))
    sm.append_message(_call_message(("c2", "bash"), ("c3", "nope")))
    sm.append_message(_result("c3", "Tool nope not found", name="nope"))
    sm.append_message(_result("c2", "done"))
    assert [(m["role"], m.get("toolCallId")) for m in _messages(sm)] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "c2"),
    ]
    assert guard.pending_ids() == []

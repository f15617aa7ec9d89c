"""Tool-result truncation (reference §4.15), in memory and in the session file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clawpi.runner.truncation import (
    HARD_MAX_TOOL_RESULT_CHARS,
    MIDDLE_OMISSION_MARKER,
    MIN_KEEP_CHARS,
    TRUNCATION_SUFFIX,
    calculate_max_tool_result_chars,
    is_oversized_tool_result,
    resolve_tool_result_hard_max,
    session_likely_has_oversized_tool_results,
    tool_result_text_length,
    truncate_oversized_tool_results_in_messages,
    truncate_oversized_tool_results_in_session,
    truncate_tool_result_message,
    truncate_tool_result_text,
)
from clawpi.session import SessionManager, install_tool_result_guard


def result(call_id: str, *texts: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": t} for t in texts],
        "isError": False,
        "timestamp": 3,
    }


def lines(count: int, width: int = 79) -> str:
    return "".join(f"{i:06d} " + "x" * (width - 7) + "\n" for i in range(count))


def test_max_chars_is_thirty_percent_of_the_window_at_four_chars_per_token() -> None:
    assert calculate_max_tool_result_chars(100_000) == 120_000
    assert calculate_max_tool_result_chars(10_000) == 12_000


def test_the_hard_cap_holds_even_for_huge_windows() -> None:
    assert calculate_max_tool_result_chars(2_000_000) == HARD_MAX_TOOL_RESULT_CHARS
    assert calculate_max_tool_result_chars(2_000_000, 16_000) == 16_000


def test_hard_cap_comes_from_config_when_set() -> None:
    config = {"agents": {"defaults": {"toolResultMaxChars": 16_000}}}
    assert resolve_tool_result_hard_max(config) == 16_000
    assert resolve_tool_result_hard_max({}) == HARD_MAX_TOOL_RESULT_CHARS


def test_small_text_is_unchanged() -> None:
    assert truncate_tool_result_text("short", 10_000) == "short"


def test_large_text_is_truncated_under_the_max_with_the_notice() -> None:
    text = "a" * 50_000
    out = truncate_tool_result_text(text, 10_000)
    assert len(out) <= 10_000
    assert out.endswith(TRUNCATION_SUFFIX)
    assert out.startswith("a" * 1000)


def test_a_newline_boundary_is_preferred() -> None:
    text = lines(1000)
    out = truncate_tool_result_text(text, 10_000)
    kept = out[: -len(TRUNCATION_SUFFIX)]
    assert kept.endswith("x") and text.startswith(kept)
    assert text[len(kept)] == "\n"


def test_min_keep_holds_for_tiny_windows() -> None:
    limit = calculate_max_tool_result_chars(1_000)  # 1,200 chars
    out = truncate_tool_result_text("b" * 20_000, limit)
    assert len(out) >= MIN_KEEP_CHARS
    assert out[:MIN_KEEP_CHARS] == "b" * MIN_KEEP_CHARS


def test_head_and_tail_are_kept_when_the_tail_reports_an_error() -> None:
    text = lines(2000) + "Traceback (most recent call last):\nValueError: boom\n"
    out = truncate_tool_result_text(text, 20_000)
    assert MIDDLE_OMISSION_MARKER in out
    assert "ValueError: boom" in out
    assert out.startswith("000000 ")
    assert len(out) <= 20_000


def test_multiple_blocks_are_truncated_in_proportion_and_images_kept() -> None:
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    message = result("c1", "a" * 60_000, "b" * 20_000)
    message["content"].append(image)
    out = truncate_tool_result_message(message, 20_000)
    first, second, kept_image = out["content"]
    assert len(first["text"]) <= 15_000 and len(second["text"]) <= 5_000
    assert len(first["text"]) > len(second["text"])
    assert kept_image is image
    assert message["content"][0]["text"] == "a" * 60_000


def test_is_oversized_ignores_non_tool_messages() -> None:
    big = "z" * 100_000
    assert not is_oversized_tool_result({"role": "user", "content": big}, 10_000)
    assert not is_oversized_tool_result(
        {"role": "assistant", "content": [{"type": "text", "text": big}]}, 10_000
    )
    assert is_oversized_tool_result(result("c", big), 10_000)


def test_in_memory_truncation_counts_and_keeps_small_results() -> None:
    small = result("c1", "fine")
    messages = [{"role": "user", "content": "q"}, small, result("c2", "y" * 50_000)]
    out, count = truncate_oversized_tool_results_in_messages(messages, 10_000)
    assert count == 1 and out[1] is small
    assert tool_result_text_length(out[2]) <= 12_000
    assert session_likely_has_oversized_tool_results(messages, 10_000)
    assert not session_likely_has_oversized_tool_results(out, 10_000)
    again, zero = truncate_oversized_tool_results_in_messages(out, 10_000)
    assert zero == 0 and again is out


def assistant(*blocks: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks),
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude",
        "stopReason": "toolUse",
        "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
        "timestamp": 2,
    }


def build_session(path: Path) -> tuple[SessionManager, dict[str, str]]:
    session = SessionManager.open(path)
    ids = {
        "user": session.append_message({"role": "user", "content": "read it", "timestamp": 1}),
        "call": session.append_message(
            assistant(
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "big.log"}}
            )
        ),
        "big": session.append_message(result("c1", lines(2000))),
        "model": session.append_model_change("anthropic", "claude"),
        "reply": session.append_message(assistant({"type": "text", "text": "done"})),
        "custom": session.append_custom_entry("openclaw.cache-ttl", {"t": 1}),
    }
    ids["label"] = session.append_label_change(ids["reply"], "checkpoint")
    return session, ids


def test_in_session_truncation_rewrites_the_branch_and_keeps_the_other_entries(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    session, ids = build_session(path)
    before_entries = len(session.get_entries())
    outcome = truncate_oversized_tool_results_in_session(session, 10_000)
    assert outcome.truncated and outcome.truncated_count == 1
    assert outcome.rewritten[0][0] == ids["big"]

    reopened = SessionManager.open(path)
    assert reopened.get_leaf_id() == outcome.new_leaf_id == session.get_leaf_id()
    branch = reopened.get_branch()
    kinds = [e["type"] for e in branch]
    assert kinds == ["message", "message", "message", "model_change", "message", "custom", "label"]
    assert branch[0]["id"] == ids["user"] and branch[1]["id"] == ids["call"]
    new_result = branch[2]["message"]
    assert tool_result_text_length(new_result) <= 12_000
    assert new_result["content"][0]["text"].endswith(TRUNCATION_SUFFIX)
    assert branch[4]["message"]["content"] == [{"type": "text", "text": "done"}]
    assert branch[5]["data"] == {"t": 1}
    assert branch[6]["targetId"] == branch[4]["id"]  # the label follows its entry
    assert reopened.get_label(branch[4]["id"]) == "checkpoint"
    # nothing is lost: the original entries are still in the file
    all_ids = {e["id"] for e in reopened.get_entries()}
    assert set(ids.values()) <= all_ids
    assert len(reopened.get_entries()) == before_entries + 5
    messages = reopened.build_session_context().messages
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]


def test_in_session_truncation_remaps_a_compaction_first_kept_entry(tmp_path: Path) -> None:
    session = SessionManager.open(tmp_path / "c.jsonl")
    session.append_message({"role": "user", "content": "q", "timestamp": 1})
    session.append_message(
        assistant({"type": "toolCall", "id": "c1", "name": "read", "arguments": {}})
    )
    big = session.append_message(result("c1", "x" * 50_000))
    kept = session.append_message(assistant({"type": "text", "text": "after"}))
    session.append_compaction("summary", kept, 1234)
    outcome = truncate_oversized_tool_results_in_session(session, 10_000)
    assert outcome.rewritten[0][0] == big
    branch = session.get_branch()
    compaction = branch[-1]
    assert compaction["type"] == "compaction"
    assert compaction["firstKeptEntryId"] == branch[-2]["id"] != kept


def test_nothing_oversized_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "n.jsonl"
    session = SessionManager.open(path)
    session.append_message({"role": "user", "content": "q", "timestamp": 1})
    session.append_message(assistant({"type": "text", "text": "hi"}))
    size = path.stat().st_size
    outcome = truncate_oversized_tool_results_in_session(path, 10_000)
    assert not outcome.truncated and outcome.reason == "no oversized tool results"
    assert path.stat().st_size == size


def test_empty_session_reports_it(tmp_path: Path) -> None:
    outcome = truncate_oversized_tool_results_in_session(SessionManager.in_memory(), 10_000)
    assert not outcome.truncated and outcome.reason == "empty session"


def test_truncation_by_path_and_twice_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    build_session(path)
    first = truncate_oversized_tool_results_in_session(path, 10_000)
    second = truncate_oversized_tool_results_in_session(path, 10_000)
    assert first.truncated and not second.truncated


def test_the_tool_result_guard_is_bypassed_and_restored(tmp_path: Path) -> None:
    session, _ = build_session(tmp_path / "g.jsonl")

    def hook(message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "content": [{"type": "text", "text": "HOOKED"}]}

    guard = install_tool_result_guard(session, tool_result_persist=hook)
    truncate_oversized_tool_results_in_session(session, 10_000)
    rewritten = session.get_branch()[2]["message"]
    assert rewritten["content"][0]["text"].endswith(TRUNCATION_SUFFIX)  # not re-hooked
    session.append_message(result("c9", "later"))
    assert session.get_branch()[-1]["message"]["content"][0]["text"] == "HOOKED"
    guard.uninstall()


def test_the_context_guard_truncates_a_result_over_half_the_window() -> None:
    from clawpi.runner.truncation import guard_tool_loop_context

    messages = [{"role": "user", "content": "q"}, result("c1", "w" * 30_000)]
    out = guard_tool_loop_context(messages, 10_000)  # half the window: 5,000 tokens, 2 per char
    assert tool_result_text_length(out[1]) <= 10_000
    assert out[1]["content"][0]["text"].endswith(TRUNCATION_SUFFIX)
    small = [{"role": "user", "content": "q"}, result("c1", "fine")]
    assert guard_tool_loop_context(small, 10_000) is small


def test_the_context_guard_raises_an_overflow_the_error_classifier_recognises() -> None:
    import pytest

    from clawpi.ai.errors import is_context_overflow_error
    from clawpi.runner.truncation import ToolLoopContextOverflow, guard_tool_loop_context

    messages = [{"role": "user", "content": "u" * 20_000}]
    messages += [result(f"c{i}", "t" * 9_000) for i in range(2)]  # counted double
    with pytest.raises(ToolLoopContextOverflow) as caught:
        guard_tool_loop_context(messages, 14_000)  # 56,000 chars, 90% = 50,400
    assert caught.value.estimated_chars == 20_000 + 2 * 18_000
    assert is_context_overflow_error(str(caught.value))


def test_entry_types_this_version_does_not_know_are_copied_onto_the_new_branch(
    tmp_path: Path,
) -> None:
    import orjson

    path = tmp_path / "u.jsonl"
    session, _ = build_session(path)
    leaf = session.get_leaf_id()
    unknown = {
        "type": "future_entry",
        "id": "fe000001",
        "parentId": leaf,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "payload": {"keep": True},
    }
    with path.open("ab") as handle:
        handle.write(orjson.dumps(unknown) + b"\n")
    reopened = SessionManager.open(path)
    assert reopened.get_leaf_id() == "fe000001"
    outcome = truncate_oversized_tool_results_in_session(reopened, 10_000)
    assert outcome.truncated
    copied = SessionManager.open(path).get_branch()[-1]
    assert copied["type"] == "future_entry" and copied["payload"] == {"keep": True}
    assert copied["id"] != "fe000001"

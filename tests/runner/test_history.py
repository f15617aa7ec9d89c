"""History limits (reference §4.13)."""

from __future__ import annotations

import random
from typing import Any

from clawpi.runner.history import get_history_limit_from_session_key, limit_history_turns
from clawpi.session.context import COMPACTION_SUMMARY_PREFIX


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": list(blocks) or [{"type": "text", "text": "ok"}],
        "stopReason": "stop",
        "timestamp": 2,
    }


def call(call_id: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}


def result(call_id: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": "r"}],
        "isError": False,
        "timestamp": 3,
    }


HISTORY = [
    user("one"),
    assistant(),
    user("two"),
    assistant(call("c1")),
    result("c1"),
    assistant(),
    user("three"),
    assistant(call("c2")),
    result("c2"),
    assistant(),
]


def test_no_limit_or_zero_returns_the_same_list() -> None:
    assert limit_history_turns(HISTORY, None) is HISTORY
    assert limit_history_turns(HISTORY, 0) is HISTORY
    assert limit_history_turns(HISTORY, -3) is HISTORY


def test_limit_one_keeps_the_last_user_turn_and_everything_after_it() -> None:
    assert limit_history_turns(HISTORY, 1) == HISTORY[6:]


def test_limit_two_starts_with_a_user_message() -> None:
    out = limit_history_turns(HISTORY, 2)
    assert out == HISTORY[2:]
    assert out[0]["role"] == "user"


def test_limit_larger_than_the_history_keeps_everything() -> None:
    assert limit_history_turns(HISTORY, 10) is HISTORY


def test_a_tool_result_is_never_separated_from_its_call() -> None:
    history = [
        user("one"),
        assistant(call("c1")),
        user("interrupting"),
        result("c1"),
        assistant(),
        user("two"),
        assistant(),
    ]
    out = limit_history_turns(history, 2)
    assert out == history  # cutting before "interrupting" would orphan c1's result
    assert limit_history_turns(history, 1) == history[5:]


def test_a_leading_compaction_summary_is_kept() -> None:
    summary = user(COMPACTION_SUMMARY_PREFIX + "before\n</summary>")
    history = [summary, user("a"), assistant(), user("b"), assistant()]
    assert limit_history_turns(history, 1) == [summary, *history[3:]]


CONFIG = {
    "channels": {
        "telegram": {
            "dmHistoryLimit": 20,
            "historyLimit": 50,
            "dms": {"42": {"historyLimit": 5}},
            "accounts": {"bot2": {"dmHistoryLimit": 7}},
        },
        "Slack": {"historyLimit": 30},
        "discord": {"historyLimit": 10},
    }
}


def _limit_by_the_definition(history: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The rule read straight: the last `limit` user turns after any leading summary; while a
    kept result's call would be cut off, one user turn more; all of it when none is left."""
    start = 0
    while start < len(history) and (
        history[start].get("role") in ("compactionSummary", "branchSummary")
        or str(history[start].get("content")).startswith(COMPACTION_SUMMARY_PREFIX)
    ):
        start += 1
    turns = [i for i in range(start, len(history)) if history[i]["role"] == "user"]
    for turn in range(len(turns) - limit, 0, -1):
        kept = history[turns[turn] :]
        kept_calls = {
            b["id"] for m in kept if m["role"] == "assistant" for b in m["content"] if "id" in b
        }
        cut_calls = {
            b["id"]
            for m in history[start : turns[turn]]
            if m["role"] == "assistant"
            for b in m["content"]
            if "id" in b
        }
        if not any(
            m["role"] == "toolResult"
            and m["toolCallId"] in cut_calls
            and m["toolCallId"] not in kept_calls
            for m in kept
        ):
            return history[:start] + kept
    return history


def test_the_limit_reads_from_the_end_and_cuts_where_the_rule_says() -> None:
    rng = random.Random(5)
    summary = {"role": "user", "content": f"{COMPACTION_SUMMARY_PREFIX}\nolder", "timestamp": 0}
    for _ in range(400):
        history: list[dict[str, Any]] = [summary] if rng.random() < 0.3 else []
        open_calls: list[str] = []
        for step in range(rng.randrange(40)):
            kind = rng.random()
            if kind < 0.3:
                history.append(user(f"u{step}"))
            elif kind < 0.55:
                call_id = f"c{rng.randrange(6)}"  # ids come back, as some providers reuse them
                open_calls.append(call_id)
                history.append(assistant(call(call_id)))
            elif kind < 0.85 and open_calls:  # answered now or several turns later
                history.append(result(open_calls.pop(rng.randrange(len(open_calls)))))
            else:
                history.append(assistant())
        limit = rng.randrange(1, 6)
        assert limit_history_turns(history, limit) == _limit_by_the_definition(history, limit)


def test_dm_limit_comes_from_dm_history_limit() -> None:
    assert get_history_limit_from_session_key("agent:main:telegram:dm:99", CONFIG) == 20
    assert get_history_limit_from_session_key("telegram:dm:99", CONFIG) == 20
    assert get_history_limit_from_session_key("agent:main:telegram:direct:99", CONFIG) == 20


def test_a_per_dm_override_beats_the_channel_default() -> None:
    assert get_history_limit_from_session_key("agent:main:telegram:dm:42", CONFIG) == 5


def test_thread_suffixed_keys_resolve_to_the_base_user() -> None:
    assert get_history_limit_from_session_key("agent:main:telegram:dm:42:thread:7", CONFIG) == 5
    assert get_history_limit_from_session_key("telegram:dm:42:topic:3", CONFIG) == 5


def test_group_and_channel_sessions_use_history_limit() -> None:
    assert get_history_limit_from_session_key("agent:main:telegram:group:-100", CONFIG) == 50
    assert get_history_limit_from_session_key("agent:main:slack:channel:C1", CONFIG) == 30


def test_account_scoped_keys_read_the_account_first() -> None:
    assert get_history_limit_from_session_key("agent:main:telegram:bot2:dm:99", CONFIG) == 7
    assert get_history_limit_from_session_key("agent:main:telegram:bot3:group:1", CONFIG) == 50


def test_missing_config_gives_none() -> None:
    assert get_history_limit_from_session_key("agent:main:discord:dm:1", CONFIG) is None
    assert get_history_limit_from_session_key("agent:main:whatsapp:dm:1", CONFIG) is None
    assert get_history_limit_from_session_key("agent:main:telegram:dm:1", None) is None
    assert get_history_limit_from_session_key(None, CONFIG) is None


def test_keys_without_a_chat_kind_give_none() -> None:
    assert get_history_limit_from_session_key("main:telegram:42", CONFIG) is None
    assert get_history_limit_from_session_key("agent:main:main", CONFIG) is None


def test_an_orphaned_trailing_user_message_is_branched_past(tmp_path: Any) -> None:
    from clawpi.runner.history import branch_past_orphaned_user_message
    from clawpi.session import SessionManager

    path = tmp_path / "s.jsonl"
    session = SessionManager.open(path)
    session.append_message(user("hi"))
    reply = session.append_message(assistant())
    session.append_message(user("lost in a crash"))
    reopened = SessionManager.open(path)
    orphan = branch_past_orphaned_user_message(reopened)
    assert orphan is not None and orphan["content"] == "lost in a crash"
    assert reopened.get_leaf_id() == reply
    reopened.append_message(user("new prompt"))
    roles = [m["role"] for m in SessionManager.open(path).build_session_context().messages]
    assert roles == ["user", "assistant", "user"]
    assert branch_past_orphaned_user_message(reopened) is not None  # the new one is a leaf too


def test_an_orphaned_user_message_whose_parent_was_lost_starts_a_new_root(
    tmp_path: Any,
) -> None:
    """Damage can take the entry a message hangs from (repair keeps the message as a root)."""
    import orjson

    from clawpi.runner.history import branch_past_orphaned_user_message
    from clawpi.session import SessionManager

    path = tmp_path / "s.jsonl"
    session = SessionManager.open(path)
    session.append_message(user("hi"))
    session.append_message(assistant())
    lines = path.read_bytes().splitlines()
    lost = {"type": "message", "id": "u2", "parentId": "gone", "timestamp": "x"}
    lost["message"] = user("after the damage")
    path.write_bytes(b"\n".join([*lines, orjson.dumps(lost)]) + b"\n")
    reopened = SessionManager.open(path)
    orphan = branch_past_orphaned_user_message(reopened)
    assert orphan is not None and orphan["content"] == "after the damage"
    assert reopened.get_leaf_id() is None
    reopened.append_message(user("new prompt"))
    roles = [m["role"] for m in SessionManager.open(path).build_session_context().messages]
    assert roles == ["user"]


def test_a_session_ending_with_a_reply_is_left_alone(tmp_path: Any) -> None:
    from clawpi.runner.history import branch_past_orphaned_user_message
    from clawpi.session import SessionManager

    session = SessionManager.open(tmp_path / "ok.jsonl")
    session.append_message(user("hi"))
    leaf = session.append_message(assistant())
    assert branch_past_orphaned_user_message(session) is None
    assert session.get_leaf_id() == leaf
    empty = SessionManager.in_memory()
    assert branch_past_orphaned_user_message(empty) is None

"""Context building: pi's conversion wording and the fast path agreeing with the general one."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from clawpi.ai.prefix_memo import ResumableMemo
from clawpi.session.context import (
    _resolve_general,
    bash_execution_to_text,
    convert_to_llm,
    get_path,
    iso_to_ms,
    llm_conversion_pass,
    resolve_path,
)
from tests.session.pi_compat import DATA_DIR


def test_summaries_and_custom_messages_convert_with_pis_wording() -> None:
    converted = convert_to_llm(
        [
            {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 5},
            {"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 6},
            {"role": "custom", "customType": "t", "content": "C", "display": True, "timestamp": 7},
            {
                "role": "bashExecution",
                "command": "ls",
                "output": "",
                "exitCode": 0,
                "cancelled": True,
                "truncated": False,
                "timestamp": 8,
            },
            {
                "role": "bashExecution",
                "command": "x",
                "output": "o",
                "exitCode": 0,
                "cancelled": False,
                "truncated": False,
                "timestamp": 9,
                "excludeFromContext": True,
            },
            {"role": "somethingNew", "content": "?", "timestamp": 10},
        ]
    )
    texts = [m["content"][0]["text"] for m in converted]
    assert texts == [
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\nS\n</summary>",
        "The following is a summary of a branch that this conversation came back from:"
        "\n\n<summary>\nB</summary>",
        "C",
        "Ran `ls`\n(no output)\n\n(command cancelled)",
    ]
    assert [m["timestamp"] for m in converted] == [5, 6, 7, 8]
    assert all(m["role"] == "user" for m in converted)


def test_a_plain_chat_converts_to_a_new_list_of_the_same_messages() -> None:
    chat = [
        {"role": "user", "content": "hi", "timestamp": 1},
        {"role": "assistant", "content": [], "timestamp": 2},
        {"role": "toolResult", "toolCallId": "t", "content": [], "timestamp": 3},
    ]
    converted = convert_to_llm(chat)
    assert converted == chat and converted is not chat
    assert all(a is b for a, b in zip(converted, chat, strict=True))
    # one message without a role (a damaged entry) is left out, the rest kept
    assert convert_to_llm([*chat, {"content": "?"}]) == chat


def test_bash_execution_text_reports_exit_code_and_truncation() -> None:
    text = bash_execution_to_text(
        {
            "command": "make",
            "output": "err",
            "exitCode": 2,
            "cancelled": False,
            "truncated": True,
            "fullOutputPath": "/tmp/o",
        }
    )
    assert (
        text == "Ran `make`\n```\nerr\n```\n\nCommand exited with code 2\n\n"
        "[Output truncated. Full output: /tmp/o]"
    )


def test_iso_timestamps_convert_like_javascript_date() -> None:
    assert iso_to_ms("2026-11-21T22:43:34.713Z") == 1795301014713
    assert iso_to_ms("not a date") is None and iso_to_ms(None) is None


def _paths() -> list[list[dict[str, Any]]]:
    paths = []
    for file in sorted(DATA_DIR.glob("*.jsonl")):
        entries = [orjson.loads(line) for line in file.read_bytes().splitlines()][1:]
        by_id = {e.get("id"): e for e in entries}
        for entry in entries:
            paths.append(get_path(by_id, entry))
    return paths


@pytest.mark.parametrize("path", _paths())
def test_fast_path_agrees_with_the_general_walk(path: list[dict[str, Any]]) -> None:
    assert resolve_path(path) == _resolve_general(path)


def test_a_history_converted_turn_by_turn_matches_a_whole_conversion() -> None:
    """The session's conversion memo (`llm_conversion_pass` per session) against
    `convert_to_llm` of the whole history, as it grows, is cut back or is copied."""
    memo = ResumableMemo(llm_conversion_pass)

    class Session:
        pass

    session = Session()
    rng = random.Random(3)
    kinds: list[dict[str, Any]] = [
        {"role": "user", "content": "q", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}], "timestamp": 2},
        {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 3},
        {"role": "custom", "customType": "t", "content": "C", "display": True, "timestamp": 4},
        {"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 5},
        {"role": "somethingNew", "content": "?", "timestamp": 6},
    ]
    history: list[dict[str, Any]] = []
    for _ in range(300):
        step = rng.random()
        if step < 0.8:
            history = [*history, dict(rng.choice(kinds))]
        elif step < 0.9:
            history = history[: rng.randrange(len(history) + 1)]
        else:
            history = [dict(m) for m in history]
        assert memo(session, history) == convert_to_llm(history)

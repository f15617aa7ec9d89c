"""A recorded multi-turn run (text, tool calls, an overflow, compaction retry) replayed whole.

The recording (data/multi_turn_events.json, re-made by data/record_replay.py) holds the events
as the agent loop emits them: assistant turns from the real stream over the faux provider.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from clawpi.reply import (
    BlockReplyChunking,
    ReplyPayload,
    build_embedded_run_payloads,
    subscribe_embedded_session,
)
from tests.reply.events import Emitter

EVENTS: list[dict[str, Any]] = orjson.loads(
    (Path(__file__).parent / "data" / "multi_turn_events.json").read_bytes()
)


def run(events: list[dict[str, Any]]) -> tuple[Any, list[str]]:
    emitter = Emitter()
    log: list[str] = []

    def block(p: ReplyPayload) -> None:
        log.append(f"block:{p.text!r}:{p.media_urls}:{p.reply_to_id}")

    sub = subscribe_embedded_session(
        emitter,
        "run-replay",
        on_block_reply=block,
        on_block_reply_flush=lambda: log.append("flush"),
        on_tool_result=lambda p: log.append(f"tool:{p.text}"),
        verbose_level="on",
        block_reply_chunking=BlockReplyChunking(min_chars=10, max_chars=200),
        current_message_id="msg-1",
    )
    emitter.replay(events)
    return sub, log


EXPECTED_LOG = [
    "block:'Let me check the files.':[]:None",
    "flush",
    "tool:🛠️ exec: `ls`",
    "block:'There are two files:':[]:None",
    "block:'- a.py\\n- b.py':[]:None",
    "flush",
    "tool:📖 read: `a.py`",
    "block:'Here is the summary after compaction.':[]:msg-1",
    "block:\"```python\\nprint('hello')\\n```\":[]:None",
    "block:'The chart:':[]:None",
    "block:None:['https://cdn.example.com/chart.png']:None",
    "flush",
]


def test_replay_produces_exactly_the_expected_block_replies() -> None:
    sub, log = run(EVENTS)
    assert log == EXPECTED_LOG
    assert sub.compaction_count == 1
    assert not sub.is_compacting()
    assert sub.last_tool_error is None  # cleared by the compaction retry
    assert sub.tool_metas == []
    assert sub.assistant_texts == [
        "[[reply_to_current]] Here is the summary after compaction.",
        "```python\nprint('hello')\n```",
        "The chart:",
        "MEDIA: https://cdn.example.com/chart.png",
        "NO_REPLY",
    ]


def test_replay_final_payloads_never_repeat_streamed_blocks() -> None:
    sub, _ = run(EVENTS)
    common: dict[str, Any] = {
        "assistant_texts": sub.assistant_texts,
        "tool_metas": sub.tool_metas,
        "last_assistant": sub.last_assistant,
        "last_tool_error": sub.last_tool_error,
        "current_message_id": "msg-1",
    }
    assert build_embedded_run_payloads(**common, streamed_keys=sub.block_reply_keys) == []
    final = build_embedded_run_payloads(**common)
    assert [(p.text, p.media_urls, p.reply_to_id) for p in final] == [
        ("Here is the summary after compaction.", [], "msg-1"),
        ("```python\nprint('hello')\n```", [], None),
        ("The chart:", [], None),
        (None, ["https://cdn.example.com/chart.png"], None),
    ]


def test_replay_without_the_retry_reports_the_overflow_and_tool_failure() -> None:
    cut = next(i for i, e in enumerate(EVENTS) if e["type"] == "auto_compaction_start")
    sub, log = run(EVENTS[:cut])
    assert log == EXPECTED_LOG[:7]
    assert sub.last_tool_error is not None
    assert sub.last_tool_error.tool_name == "read"
    payloads = build_embedded_run_payloads(
        assistant_texts=sub.assistant_texts,
        last_assistant=sub.last_assistant,
        last_tool_error=sub.last_tool_error,
        streamed_keys=sub.block_reply_keys,
    )
    assert [(p.text, p.is_error) for p in payloads] == [
        (
            "Context overflow: prompt too large for the model. Try /reset (or /new) to start a "
            "fresh session, or use a larger-context model.",
            True,
        ),
        ("⚠️ Read (a.py) failed: ENOENT: no such file", True),
    ]


async def test_replay_waiter_resolves_when_the_retried_run_ends() -> None:
    emitter = Emitter()
    sub = subscribe_embedded_session(emitter, "r")
    cut = next(i for i, e in enumerate(EVENTS) if e["type"] == "auto_compaction_end")
    emitter.replay(EVENTS[: cut + 1])
    waiter = asyncio.ensure_future(sub.wait_for_compaction_retry())
    await asyncio.sleep(0)
    assert not waiter.done()
    emitter.replay(EVENTS[cut + 1 :])
    await asyncio.wait_for(waiter, 1)

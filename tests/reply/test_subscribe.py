"""subscribe_embedded_session: events in, chat replies out (§4.19)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from clawpi.errors import AbortedError
from clawpi.reply import (
    BlockReplyChunking,
    PartialReply,
    ReplyPayload,
    build_embedded_run_payloads,
    subscribe_embedded_session,
)
from clawpi.testing import FauxProvider, faux_text, faux_thinking
from tests.reply.events import (
    Emitter,
    assistant,
    faux_turn_events,
    text,
    text_message_events,
    thinking,
    tool_call,
    tool_events,
)


def collect(**options: Any) -> tuple[Emitter, Any, list[ReplyPayload]]:
    emitter = Emitter()
    blocks: list[ReplyPayload] = []
    options.setdefault("on_block_reply", blocks.append)
    sub = subscribe_embedded_session(emitter, "run-1", **options)
    return emitter, sub, blocks


def block_texts(blocks: list[ReplyPayload]) -> list[str | None]:
    return [b.text for b in blocks]


def test_repeated_text_end_gives_one_block_reply() -> None:
    emitter, sub, blocks = collect()
    emitter.replay(text_message_events("Hello there, friend.", repeat_end=True))
    assert block_texts(blocks) == ["Hello there, friend."]
    assert sub.assistant_texts == ["Hello there, friend."]


def test_repeated_message_end_gives_no_duplicate() -> None:
    emitter, sub, blocks = collect(block_reply_break="message_end")
    emitter.replay(text_message_events("Only once please.", repeat_end=True))
    assert block_texts(blocks) == ["Only once please."]
    assert sub.assistant_texts == ["Only once please."]
    assert sub.usage_totals().input == 10


def test_text_end_with_full_content_only_adds_the_new_suffix() -> None:
    emitter, _, blocks = collect()
    partial = assistant()
    emitter.emit({"type": "message_start", "message": partial})
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "text_delta", "delta": "Hello"},
        }
    )
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "text_end", "content": "Hello world"},
        }
    )
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "text_end", "content": "Hello world"},
        }
    )
    emitter.emit({"type": "message_end", "message": assistant(text("Hello world"))})
    assert block_texts(blocks) == ["Hello world"]


def test_chunked_streaming_does_not_duplicate_the_final_message() -> None:
    body = "First paragraph is here.\n\nSecond paragraph follows.\n\nThird one ends it."
    emitter, sub, blocks = collect(
        block_reply_chunking=BlockReplyChunking(min_chars=10, max_chars=40)
    )
    emitter.replay(text_message_events(body, step=3))
    assert block_texts(blocks) == [
        "First paragraph is here.",
        "Second paragraph follows.",
        "Third one ends it.",
    ]
    final = build_embedded_run_payloads(
        assistant_texts=sub.assistant_texts,
        last_assistant=sub.last_assistant,
        streamed_keys=sub.block_reply_keys,
    )
    assert final == []


def test_think_tags_split_across_deltas_are_stripped() -> None:
    emitter, sub, blocks = collect()
    emitter.replay(text_message_events("Hi <think>private plan</think>there!", step=2))
    assert block_texts(blocks) == ["Hi there!"]
    assert sub.assistant_texts == ["Hi there!"]


def test_final_tag_enforcement_drops_text_outside_final() -> None:
    body = "Let me think about it... <final>The answer is 4.</final>"
    emitter, sub, blocks = collect(enforce_final_tag=True)
    emitter.replay(text_message_events(body, step=4))
    assert block_texts(blocks) == ["The answer is 4."]
    assert sub.assistant_texts == ["The answer is 4."]


def test_final_enforcement_falls_back_to_untagged_text() -> None:
    emitter, _sub, blocks = collect(enforce_final_tag=True, block_reply_break="message_end")
    emitter.replay(text_message_events("No tags here.", step=4))
    assert block_texts(blocks) == ["No tags here."]


def test_code_spans_keep_literal_tags() -> None:
    body = "Wrap it in `<think>` tags:\n```\n<think>x</think>\n```"
    emitter, _, blocks = collect()
    emitter.replay(text_message_events(body, step=3))
    assert block_texts(blocks) == [body]


def test_reasoning_on_gives_reasoning_before_the_answer() -> None:
    emitter, _, blocks = collect(reasoning_mode="on", block_reply_break="message_end")
    final = assistant(thinking("Check the units.\nThen add."), text("It is 5 km."))
    emitter.replay(text_message_events("It is 5 km.", final=final))
    assert block_texts(blocks) == ["Reasoning:\n_Check the units._\n_Then add._", "It is 5 km."]
    assert blocks[0].is_reasoning


def test_reasoning_off_never_shows_reasoning() -> None:
    emitter, _, blocks = collect(block_reply_break="message_end")
    emitter.replay(
        text_message_events("Answer.", final=assistant(thinking("secret"), text("Answer.")))
    )
    assert block_texts(blocks) == ["Answer."]


def test_tool_summaries_only_when_verbose() -> None:
    for verbose, expected in (("off", []), ("on", ["🛠️ exec: `ls -la`"])):
        results: list[ReplyPayload] = []
        emitter, sub, _ = collect(verbose_level=verbose, on_tool_result=results.append)
        emitter.replay(tool_events("exec", {"command": "ls -la"}, "c1", "a\nb"))
        assert [r.text for r in results] == expected
        assert [(m.tool_name, m.meta) for m in sub.tool_metas] == [("exec", "ls -la")]


def test_verbose_full_emits_tool_output_in_a_txt_fence() -> None:
    results: list[ReplyPayload] = []
    emitter, _, _ = collect(
        verbose_level="full", tool_result_format="plain", on_tool_result=results.append
    )
    emitter.replay(tool_events("read", {"path": "a.txt"}, "c1", "file body"))
    assert [r.text for r in results] == ["📖 read: a.txt", "📖 read: a.txt\nfile body"]
    md: list[ReplyPayload] = []
    emitter, _, _ = collect(verbose_level="full", on_tool_result=md.append)
    emitter.replay(tool_events("read", {"path": "a.txt"}, "c1", "file body"))
    assert md[-1].text == "📖 read: `a.txt`\n```txt\nfile body\n```"


def test_messaging_tool_texts_recorded_only_after_success() -> None:
    emitter, sub, _ = collect()
    args = {"action": "send", "to": "chat:42", "message": "Sent you the report"}
    emitter.replay(tool_events("message", args, "m1", "failed", is_error=True))
    assert sub.messaging_tool_sent_texts == []
    assert not sub.did_send_via_messaging_tool()
    emitter.replay(tool_events("message", args, "m2", '{"ok":true}'))
    assert sub.messaging_tool_sent_texts == ["Sent you the report"]
    assert sub.messaging_tool_sent_targets == [{"to": "chat:42", "tool": "message"}]
    assert sub.did_send_via_messaging_tool()


def test_block_reply_duplicating_a_messaging_send_is_dropped() -> None:
    emitter, _, blocks = collect()
    emitter.replay(tool_events("message", {"message": "The report is attached here"}, "m1", "ok"))
    emitter.replay(text_message_events("The report is attached here!"))
    assert blocks == []


def test_block_replies_flush_before_a_tool_runs() -> None:
    order: list[str] = []
    emitter = Emitter()
    subscribe_embedded_session(
        emitter,
        "r",
        block_reply_break="message_end",
        block_reply_chunking=BlockReplyChunking(min_chars=100, max_chars=200),
        on_block_reply=lambda p: order.append(f"block:{p.text}"),
        on_block_reply_flush=lambda: order.append("flush"),
        on_tool_result=lambda p: order.append(f"tool:{p.text}"),
        verbose_level="on",
    )
    partial = assistant()
    emitter.emit({"type": "message_start", "message": partial})
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "text_delta", "delta": "Let me check."},
        }
    )
    emitter.replay(tool_events("exec", {"command": "date"}, "c1", "today"))
    assert order == ["block:Let me check.", "flush", "tool:🛠️ exec: `date`"]


def test_narration_before_a_tool_call_is_not_a_final_answer() -> None:
    emitter, sub, _ = collect(on_block_reply=None)
    final = assistant(
        text("Looking it up."), tool_call("web_search", {"query": "x"}, "c1"), stop="toolUse"
    )
    emitter.replay(text_message_events("Looking it up.", final=final))
    emitter.replay(text_message_events("Found it: 42."))
    assert sub.assistant_texts == ["Found it: 42."]


def test_silent_reply_is_not_delivered() -> None:
    emitter, _, blocks = collect()
    emitter.replay(text_message_events("NO_REPLY"))
    assert blocks == []
    emitter, _, blocks = collect(block_reply_break="message_end")
    emitter.replay(text_message_events("NO_REPLY", step=2))
    assert blocks == []


def test_partial_reply_only_when_text_changes() -> None:
    partials: list[PartialReply] = []
    emitter, _, _ = collect(on_block_reply=None, on_partial_reply=partials.append)
    partial = assistant()
    emitter.emit({"type": "message_start", "message": partial})
    for delta in ["Hel", "lo", "<think>", "hidden", "</think>", " you"]:
        emitter.emit(
            {
                "type": "message_update",
                "message": partial,
                "assistantMessageEvent": {"type": "text_delta", "delta": delta},
            }
        )
    assert [(p.text, p.delta) for p in partials] == [
        ("Hel", "Hel"),
        ("Hello", "lo"),
        ("Hello you", " you"),
    ]


def test_partial_reply_hides_a_directive_being_typed() -> None:
    partials: list[PartialReply] = []
    emitter, _, _ = collect(on_block_reply=None, on_partial_reply=partials.append)
    partial = assistant()
    emitter.emit({"type": "message_start", "message": partial})
    for delta in ["Hi [[rep", "ly_to_current]] there"]:
        emitter.emit(
            {
                "type": "message_update",
                "message": partial,
                "assistantMessageEvent": {"type": "text_delta", "delta": delta},
            }
        )
    assert [p.text for p in partials] == ["Hi", "Hi there"]


def test_agent_event_lifecycle_order() -> None:
    seen: list[tuple[str, str]] = []
    emitter, _, _ = collect(
        on_agent_event=lambda e: seen.append(
            (e["stream"], e["data"].get("phase") or e["data"].get("delta"))
        )
    )
    emitter.emit({"type": "agent_start"})
    emitter.replay(text_message_events("abcdef", step=3))
    emitter.emit({"type": "agent_end", "messages": []})
    assert seen == [
        ("lifecycle", "start"),
        ("assistant", "abc"),
        ("assistant", "def"),
        ("lifecycle", "end"),
    ]


def test_agent_end_reports_error_phase() -> None:
    seen: list[dict[str, Any]] = []
    emitter, _, _ = collect(on_agent_event=seen.append)
    emitter.emit({"type": "message_end", "message": assistant(stop="error", error="boom")})
    emitter.emit({"type": "agent_end", "messages": []})
    assert seen[-1]["data"]["phase"] == "error"
    assert seen[-1]["data"]["error"] == "boom"


def test_last_tool_error_recorded_and_cleared_by_same_action_success() -> None:
    emitter, sub, _ = collect()
    emitter.replay(tool_events("exec", {"command": "make"}, "c1", "exit 2", is_error=True))
    assert sub.last_tool_error is not None
    assert (
        sub.last_tool_error.tool_name,
        sub.last_tool_error.error,
        sub.last_tool_error.mutating_action,
    ) == ("exec", "exit 2", True)
    emitter.replay(tool_events("read", {"path": "x"}, "c2", "fine"))
    assert sub.last_tool_error is not None
    emitter.replay(tool_events("exec", {"command": "make"}, "c3", "ok"))
    assert sub.last_tool_error is None


def test_status_error_in_result_json_counts_as_failure() -> None:
    emitter, sub, _ = collect()
    emitter.replay(
        tool_events(
            "web_fetch", {"url": "https://x.example"}, "c1", '{"status":"error","error":"404"}'
        )
    )
    assert sub.last_tool_error is not None


async def test_compaction_retry_resets_buffers_and_counts() -> None:
    emitter, sub, blocks = collect(
        block_reply_chunking=BlockReplyChunking(min_chars=500, max_chars=800)
    )
    partial = assistant()
    emitter.emit({"type": "message_start", "message": partial})
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "text_delta", "delta": "stale partial text"},
        }
    )
    emitter.emit({"type": "auto_compaction_start", "reason": "overflow"})
    assert sub.is_compacting()
    waiter = asyncio.ensure_future(sub.wait_for_compaction_retry())
    await asyncio.sleep(0)
    emitter.emit(
        {
            "type": "auto_compaction_end",
            "result": {"summary": "s"},
            "aborted": False,
            "willRetry": True,
        }
    )
    assert sub.compaction_count == 1
    assert not waiter.done()
    emitter.replay(text_message_events("Fresh answer."))
    emitter.emit({"type": "agent_end", "messages": []})
    await asyncio.wait_for(waiter, 1)
    assert block_texts(blocks) == ["Fresh answer."]
    assert sub.assistant_texts == ["Fresh answer."]
    assert not sub.is_compacting()


async def test_wait_for_compaction_returns_at_once_when_idle_and_fails_after_unsubscribe() -> None:
    emitter, sub, _ = collect()
    await sub.wait_for_compaction_retry()
    emitter.emit({"type": "auto_compaction_start", "reason": "threshold"})
    waiter = asyncio.ensure_future(sub.wait_for_compaction_retry())
    await asyncio.sleep(0.01)
    sub.unsubscribe()
    with pytest.raises(AbortedError):
        await waiter
    assert emitter.listeners == []
    with pytest.raises(AbortedError):
        await sub.wait_for_compaction_retry()


async def test_wait_for_compaction_gives_up_after_its_timeout_and_can_wait_again() -> None:
    emitter, sub, _ = collect()
    emitter.emit({"type": "auto_compaction_start", "reason": "threshold"})
    with pytest.raises(TimeoutError):
        await sub.wait_for_compaction_retry(0.05)
    assert sub.is_compacting()
    waiter = asyncio.ensure_future(sub.wait_for_compaction_retry(30))
    await asyncio.sleep(0.01)
    emitter.emit({"type": "auto_compaction_end", "result": None, "aborted": False})
    await asyncio.wait_for(waiter, 5)
    assert not sub.is_compacting()


async def test_async_callbacks_run_in_event_order() -> None:
    delivered: list[str] = []

    async def slow_first(payload: ReplyPayload) -> None:
        await asyncio.sleep(0.02 if payload.text == "One." else 0)
        delivered.append(payload.text or "")

    emitter, sub, _ = collect(
        on_block_reply=slow_first,
        block_reply_chunking=BlockReplyChunking(min_chars=2, max_chars=50),
    )
    emitter.replay(text_message_events("One.\n\nTwo.\n\nThree.", step=1))
    await sub.wait_for_deliveries()
    assert delivered == ["One.", "Two.", "Three."]


def test_failing_callback_does_not_break_the_stream() -> None:
    def boom(payload: ReplyPayload) -> None:
        raise RuntimeError("channel down")

    emitter, sub, _ = collect(on_block_reply=boom)
    emitter.replay(text_message_events("Still recorded."))
    assert sub.assistant_texts == ["Still recorded."]


def test_directives_and_media_in_blocks() -> None:
    emitter, _, blocks = collect(current_message_id="m5")
    emitter.replay(
        text_message_events(
            "[[reply_to_current]] Chart below\nMEDIA: https://cdn.example.com/c.png", step=4
        )
    )
    assert len(blocks) == 1
    assert (blocks[0].text, blocks[0].media_urls, blocks[0].reply_to_id) == (
        "Chart below",
        ["https://cdn.example.com/c.png"],
        "m5",
    )


def test_reasoning_stream_from_native_and_tagged_thinking() -> None:
    streamed: list[str] = []
    ended: list[bool] = []
    emitter, _, _ = collect(
        reasoning_mode="stream",
        on_reasoning_stream=lambda p: streamed.append(p.text),
        on_reasoning_end=lambda: ended.append(True),
    )
    partial = assistant(thinking("Plan"))
    emitter.emit({"type": "message_start", "message": assistant()})
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "thinking_delta", "delta": "Plan"},
        }
    )
    emitter.emit(
        {
            "type": "message_update",
            "message": partial,
            "assistantMessageEvent": {"type": "thinking_end", "content": "Plan"},
        }
    )
    assert streamed == ["Reasoning:\n_Plan_"]
    assert ended == [True]
    emitter.replay(text_message_events("<think>Step A</think>Done", step=3))
    assert streamed[-1] == "Reasoning:\n_Step A_"
    assert len(ended) == 2


async def test_real_stream_events_from_faux_provider() -> None:
    provider = FauxProvider(
        [
            [
                faux_thinking("Let me count."),
                faux_text("Counting:\n\n1, 2, 3.\n\n<think>no leak</think>Done!"),
            ]
        ],
        chunk_size=3,
    )
    events = await faux_turn_events(provider, {"messages": []})
    assert any(e["type"] == "message_update" for e in events)
    emitter, sub, blocks = collect(
        reasoning_mode="on", block_reply_chunking=BlockReplyChunking(min_chars=5, max_chars=100)
    )
    emitter.replay(events)
    assert block_texts(blocks) == ["Reasoning:\n_Let me count._", "Counting:", "1, 2, 3.", "Done!"]
    assert sub.usage_totals() is not None
    assert sub.last_assistant is not None
    assert sub.last_assistant["stopReason"] == "stop"


async def test_real_error_stream_gives_error_payload() -> None:
    from clawpi.testing import FauxResponse

    provider = FauxProvider(
        [
            FauxResponse(
                content=[faux_text("Partial")],
                error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
                error_after=3,
            )
        ]
    )
    emitter, sub, _blocks = collect()
    emitter.replay(await faux_turn_events(provider, {"messages": []}))
    payloads = build_embedded_run_payloads(
        assistant_texts=sub.assistant_texts,
        last_assistant=sub.last_assistant,
        streamed_keys=sub.block_reply_keys,
    )
    assert payloads[0].is_error
    assert (
        payloads[0].text
        == "The AI service is temporarily overloaded. Please try again in a moment."
    )


def test_unsubscribe_aborts_a_compaction_nobody_waits_for() -> None:
    class Session(Emitter):
        aborted = 0

        def abort_compaction(self) -> None:
            self.aborted += 1

    session = Session()
    sub = subscribe_embedded_session(session, "r")
    session.emit({"type": "auto_compaction_start", "reason": "threshold"})
    sub.unsubscribe()
    sub.unsubscribe()
    assert session.aborted == 1
    session.emit({"type": "auto_compaction_end", "willRetry": False})
    assert sub.compaction_count == 0


def test_bad_events_are_ignored() -> None:
    emitter, sub, blocks = collect()
    for bad in [
        None,
        "text",
        {"type": 3},
        {"type": "message_update"},
        {"type": "message_end", "message": "x"},
    ]:
        emitter.emit(bad)  # type: ignore[arg-type]
    emitter.emit({"type": "message_update", "message": assistant(), "assistantMessageEvent": None})
    emitter.replay(text_message_events("Still fine."))
    assert block_texts(blocks) == ["Still fine."]
    assert sub.assistant_texts == ["Still fine."]

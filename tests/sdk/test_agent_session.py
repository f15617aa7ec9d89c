"""AgentSession end to end on the scripted provider: persistence, resume, retry, compaction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from clawpi.sdk import AgentSessionError
from clawpi.sdk.compaction import CompactionError
from clawpi.sdk.session_compaction import OVERFLOW_RECOVERY_FAILED
from clawpi.session import SessionManager
from clawpi.testing import FauxProvider, FauxResponse, faux_text, faux_tool_call
from tests.sdk.conftest import SessionFactory, record

OVERFLOW = '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}'
FAST_RETRY = {"retry": {"baseDelayMs": 1, "maxRetries": 2}}


def lines(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def roles(entries: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["role"] for e in entries if e["type"] == "message"]


async def test_prompt_persists_every_message_and_resume_restores_model(
    make_session: SessionFactory, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("remember the milk\n")
    faux = FauxProvider(
        [faux_tool_call("read", {"path": "notes.txt"}), "It says: remember the milk."]
    )
    session = await make_session(faux.model)
    events = record(session)
    await session.prompt("What do my notes say?")
    assert session.get_last_assistant_text() == "It says: remember the milk."
    written = lines(session.session_file)
    assert written[0]["type"] == "session"
    assert [e["type"] for e in written[1:3]] == ["model_change", "thinking_level_change"]
    assert roles(written) == ["user", "assistant", "toolResult", "assistant"]
    assert "remember the milk" in written[5]["message"]["content"][0]["text"]
    assert [e["type"] for e in events][:2] == ["agent_start", "turn_start"]
    assert events[-1]["type"] == "agent_end"
    # the model's second request saw the tool result
    assert faux.requests[1]["messages"][-1]["role"] == "toolResult"

    # resume: same file, model restored from the session, context rebuilt
    faux.push("Still the milk.")
    reopened = SessionManager.open(session.session_file)  # type: ignore[arg-type]
    from clawpi.sdk import ModelRegistry

    resumed = await make_session(faux.model, session_manager=reopened)
    assert resumed.model == faux.model
    assert len(resumed.messages) == 4
    await resumed.prompt("And now?")
    assert roles(lines(session.session_file)) == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    assert len(faux.requests[2]["messages"]) == 5
    assert ModelRegistry  # imported for the registry-based restore below


async def test_transient_error_is_retried_and_leaves_the_models_context(
    make_session: SessionFactory,
) -> None:
    faux = FauxProvider(
        [
            FauxResponse(
                error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
            ),
            "Recovered.",
        ]
    )
    session = await make_session(faux.model, settings=FAST_RETRY)
    events = record(session)
    await session.prompt("hello")
    kinds = [e["type"] for e in events]
    assert "auto_retry_start" in kinds
    start = next(e for e in events if e["type"] == "auto_retry_start")
    assert (start["attempt"], start["maxAttempts"], start["delayMs"]) == (1, 2, 1)
    end = next(e for e in events if e["type"] == "auto_retry_end")
    assert end == {"type": "auto_retry_end", "success": True, "attempt": 1}
    # the failed reply stays in the file but not in what the model sees next
    assert [m.get("stopReason") for m in session.messages if m["role"] == "assistant"] == ["stop"]
    stops = [
        e["message"].get("stopReason")
        for e in lines(session.session_file)
        if e["type"] == "message"
    ]
    assert stops == [None, "error", "stop"]
    assert [m["role"] for m in faux.requests[1]["messages"]] == ["user"]


async def test_retries_stop_after_the_configured_maximum(make_session: SessionFactory) -> None:
    faux = FauxProvider([FauxResponse(error="503 Service Unavailable")] * 3)
    session = await make_session(faux.model, settings=FAST_RETRY)
    events = record(session)
    await session.prompt("hello")
    starts = [e for e in events if e["type"] == "auto_retry_start"]
    assert [e["attempt"] for e in starts] == [1, 2]
    assert [e["delayMs"] for e in starts] == [1, 2]
    end = [e for e in events if e["type"] == "auto_retry_end"]
    assert end == [
        {
            "type": "auto_retry_end",
            "success": False,
            "attempt": 2,
            "finalError": "503 Service Unavailable",
        }
    ]
    assert faux.remaining == 0


async def test_non_transient_errors_are_not_retried(make_session: SessionFactory) -> None:
    faux = FauxProvider(
        [FauxResponse(error='401 {"error":{"message":"invalid x-api-key"}}'), "never"]
    )
    session = await make_session(faux.model, settings=FAST_RETRY)
    await session.prompt("hello")
    assert faux.remaining == 1
    assert session.messages[-1]["stopReason"] == "error"


async def test_threshold_compaction_after_a_turn(make_session: SessionFactory) -> None:
    faux = FauxProvider(
        [
            FauxResponse(content=[faux_text("first answer " * 50)], usage={"input": 100}),
            FauxResponse(content=[faux_text("second answer " * 50)], usage={"input": 1900}),
            "## Goal\nKeep chatting.",  # the summary of the earlier turns
            "## Original Request\nSecond question.",  # the cut falls inside the last turn
        ],
        context_window=2000,
    )
    settings = {"compaction": {"reserveTokens": 400, "keepRecentTokens": 100}}
    session = await make_session(faux.model, settings=settings)
    events = record(session)
    await session.prompt("first question " * 30)
    assert not [e for e in events if e["type"].startswith("auto_compaction")]
    await session.prompt("second question " * 30)
    start = next(e for e in events if e["type"] == "auto_compaction_start")
    assert start["reason"] == "threshold"
    end = next(e for e in events if e["type"] == "auto_compaction_end")
    assert end["willRetry"] is False
    assert end["result"]["summary"].startswith("## Goal\nKeep chatting.")
    assert "**Turn Context (split turn):**\n\n## Original Request" in end["result"]["summary"]
    compaction = [e for e in lines(session.session_file) if e["type"] == "compaction"]
    assert len(compaction) == 1
    assert compaction[0]["fromHook"] is False
    assert session.messages[0]["role"] == "compactionSummary"
    summary_request = faux.requests[-1]
    assert "<conversation>" in summary_request["messages"][0]["content"][0]["text"]


async def test_overflow_error_compacts_and_retries_once(make_session: SessionFactory) -> None:
    faux = FauxProvider(
        [
            FauxResponse(content=[faux_text("long answer " * 100)], usage={"input": 50}),
            FauxResponse(error=OVERFLOW),
            "## Goal\nSummarised.",
            "Answer after compaction.",
        ]
    )
    session = await make_session(faux.model, settings={"compaction": {"keepRecentTokens": 10}})
    events = record(session)
    await session.prompt("start " * 200)
    await session.prompt("more please")
    start = next(e for e in events if e["type"] == "auto_compaction_start")
    assert start["reason"] == "overflow"
    end = next(e for e in events if e["type"] == "auto_compaction_end")
    assert end["willRetry"] is True
    assert session.get_last_assistant_text() == "Answer after compaction."
    # the retried request went out with the summary in place of the old turns
    retried = faux.requests[-1]["messages"]
    assert "compacted into the following summary" in retried[0]["content"][0]["text"]
    assert retried[-1]["content"][0]["text"] == "more please"


async def test_second_overflow_reports_failure_instead_of_looping(
    make_session: SessionFactory,
) -> None:
    faux = FauxProvider(
        [
            FauxResponse(content=[faux_text("long answer " * 100)], usage={"input": 50}),
            FauxResponse(error=OVERFLOW),
            "## Goal\nSummarised.",
            FauxResponse(error=OVERFLOW),
        ]
    )
    session = await make_session(faux.model, settings={"compaction": {"keepRecentTokens": 10}})
    events = record(session)
    await session.prompt("start " * 200)
    await session.prompt("more please")
    ends = [e for e in events if e["type"] == "auto_compaction_end"]
    assert ends[-1]["errorMessage"] == OVERFLOW_RECOVERY_FAILED
    assert faux.remaining == 0


async def test_disabled_compaction_is_honoured_on_the_overflow_path(
    make_session: SessionFactory,
) -> None:
    faux = FauxProvider([FauxResponse(error=OVERFLOW), "should not be used"])
    session = await make_session(faux.model, settings={"compaction": {"enabled": False}})
    events = record(session)
    await session.prompt("hi")
    assert not [e for e in events if e["type"].startswith("auto_compaction")]
    assert faux.remaining == 1
    assert session.messages[-1]["stopReason"] == "error"


async def test_manual_compaction_and_nothing_to_compact(make_session: SessionFactory) -> None:
    faux = FauxProvider(["short"])
    session = await make_session(faux.model)
    await session.prompt("hi")
    assert await session.compact() is None  # too small: a no-op, not an error
    faux.push(
        FauxResponse(content=[faux_text("big " * 500)]),
        "## Goal\nManual.",
        "## Original Request\nA lot.",
    )
    await session.prompt("tell me a lot " * 100)
    settings = session.settings_manager
    settings.apply_overrides({"compaction": {"keepRecentTokens": 10}})
    result = await session.compact("focus on the big answer")
    assert result is not None
    assert result.summary.startswith("## Goal\nManual.")
    assert (
        "Additional focus: focus on the big answer"
        in faux.requests[-2]["messages"][0]["content"][0]["text"]
    )
    with pytest.raises(CompactionError, match="Already compacted"):
        await session.compact()


async def test_thinking_levels_clamp_to_the_model(make_session: SessionFactory) -> None:
    plain = FauxProvider(["x"])
    session = await make_session(plain.model, thinking_level="high")
    assert session.thinking_level == "off"
    assert session.available_thinking_levels() == ["off"]
    reasoning = FauxProvider(["x"], reasoning=True)
    thinker = await make_session(reasoning.model, thinking_level="low")
    assert thinker.thinking_level == "low"
    assert thinker.set_thinking_level("xhigh") == "high"
    changes = [
        e for e in thinker.session_manager.get_entries() if e["type"] == "thinking_level_change"
    ]
    assert [e["thinkingLevel"] for e in changes] == ["low", "high"]
    thinker.set_thinking_level("high")  # unchanged: nothing appended
    assert (
        len(
            [
                e
                for e in thinker.session_manager.get_entries()
                if e["type"] == "thinking_level_change"
            ]
        )
        == 2
    )


async def test_prompt_while_streaming_needs_a_behaviour_and_steering_is_delivered(
    make_session: SessionFactory,
) -> None:
    faux = FauxProvider(
        [FauxResponse(content=[faux_text("slow " * 40)], delay=0.005), "Got your note."],
        chunk_size=2,
    )
    session = await make_session(faux.model)
    task = asyncio.create_task(session.prompt("start"))
    while not session.is_streaming:
        await asyncio.sleep(0.001)
    with pytest.raises(AgentSessionError, match="already processing"):
        await session.prompt("again")
    await session.prompt("also consider this", streaming_behavior="follow_up")
    await task
    assert session.get_last_assistant_text() == "Got your note."
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user", "assistant"]


async def test_abort_stops_the_turn_and_keeps_the_partial(make_session: SessionFactory) -> None:
    faux = FauxProvider([FauxResponse(content=[faux_text("x" * 400)], delay=0.01)], chunk_size=1)
    session = await make_session(faux.model)
    task = asyncio.create_task(session.prompt("go"))
    while not session.is_streaming:
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.05)
    await session.abort()
    await task
    last = session.messages[-1]
    assert last["stopReason"] == "aborted"
    saved = [e for e in lines(session.session_file) if e["type"] == "message"]
    assert saved[-1]["message"]["stopReason"] == "aborted"


async def test_abort_stops_a_running_compaction(make_session: SessionFactory) -> None:
    faux = FauxProvider(
        [
            FauxResponse(content=[faux_text("big " * 500)]),
            FauxResponse(content=[faux_text("slow summary")], delay=30),
        ]
    )
    session = await make_session(faux.model, settings={"compaction": {"keepRecentTokens": 10}})
    await session.prompt("tell me a lot " * 100)
    task = asyncio.create_task(session.compact())
    while not session.is_compacting:
        await asyncio.sleep(0.001)
    await session.abort()
    with pytest.raises(CompactionError, match="aborted"):
        await task
    assert not [e for e in session.session_manager.get_entries() if e["type"] == "compaction"]


async def test_a_given_system_prompt_is_what_the_model_gets(make_session: SessionFactory) -> None:
    faux = FauxProvider(["ok"])
    session = await make_session(faux.model, system_prompt="You answer in haiku.")
    assert session.system_prompt == "You answer in haiku."
    await session.prompt("hello")
    assert faux.requests[0]["systemPrompt"] == "You answer in haiku."


async def test_listeners_see_each_event_in_order_and_async_ones_are_awaited(
    make_session: SessionFactory,
) -> None:
    """Sync listeners cost no coroutine; an async listener is awaited before the listeners
    after it and before the next event, so every listener sees the same order."""
    faux = FauxProvider(["Hello there."])
    session = await make_session(faux.model)
    seen: list[tuple[str, str]] = []

    def first(event: dict[str, Any]) -> None:
        seen.append(("first", event["type"]))

    async def slow(event: dict[str, Any]) -> None:
        await asyncio.sleep(0.001)
        seen.append(("slow", event["type"]))

    def failing(event: dict[str, Any]) -> None:
        raise RuntimeError("a listener bug")

    def last(event: dict[str, Any]) -> None:
        seen.append(("last", event["type"]))

    for listener in (first, slow, failing, last):
        session.subscribe(listener)
    await session.prompt("hi")
    kinds = [kind for who, kind in seen if who == "first"]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end"
    assert seen == [(who, kind) for kind in kinds for who in ("first", "slow", "last")]
    assert session.get_last_assistant_text() == "Hello there."

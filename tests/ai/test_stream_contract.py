"""The `stream()` contract, on the scripted provider: event order, result, never raising, abort."""

from __future__ import annotations

import asyncio
from typing import Any

from clawpi.ai import AbortController, Model, complete, stream
from clawpi.ai.types import AssistantMessageEvent
from clawpi.testing import FauxProvider, FauxResponse, faux_text, faux_thinking, faux_tool_call
from tests.fakes.events import assert_event_order

CONTEXT: Any = {
    "systemPrompt": "sys",
    "messages": [{"role": "user", "content": "hi", "timestamp": 1}],
}


async def collect(model: Model, **options: Any) -> list[AssistantMessageEvent]:
    return [event async for event in stream(model, CONTEXT, **options)]


async def test_scripted_turn_streams_blocks_in_protocol_order() -> None:
    faux = FauxProvider(
        [
            [
                faux_thinking("let me think", "sig-1"),
                faux_text("Hello there"),
                faux_tool_call("read", {"path": "a.txt"}, "call-1"),
            ]
        ],
        chunk_size=3,
    )
    events = await collect(faux.model)
    assert_event_order(events)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["start", "thinking_start"]
    deltas = [e for e in events if e["type"] == "toolcall_delta"]
    assert len(deltas) > 1
    assert events[-1]["type"] == "done"
    message = events[-1]["message"]
    assert message["stopReason"] == "toolUse"
    assert message["content"][2] == {
        "type": "toolCall",
        "id": "call-1",
        "name": "read",
        "arguments": {"path": "a.txt"},
    }
    assert message["content"][0]["thinkingSignature"] == "sig-1"  # type: ignore[typeddict-item]
    assert message["usage"]["totalTokens"] > 0


async def test_partial_is_the_live_message() -> None:
    faux = FauxProvider(["abcdef"], chunk_size=2)
    seen = []
    async for event in stream(faux.model, CONTEXT):
        if event["type"] == "text_delta":
            seen.append(event["partial"]["content"][0]["text"])  # type: ignore[typeddict-item]
    assert seen == ["ab", "abcd", "abcdef"]


async def test_result_drains_the_stream() -> None:
    faux = FauxProvider(["one", "two"])
    first = await stream(faux.model, CONTEXT).result()
    assert first["content"] == [{"type": "text", "text": "one"}]
    assert (await complete(faux.model, CONTEXT))["content"][0]["text"] == "two"  # type: ignore[typeddict-item]


async def test_exception_inside_provider_becomes_error_event_with_partial_kept() -> None:
    faux = FauxProvider(
        [
            FauxResponse(
                content=[faux_text("partial answer")],
                raise_error=ConnectionResetError("peer reset"),
                error_after=4,
            )
        ],
        chunk_size=4,
    )
    events = await collect(faux.model)
    last: Any = events[-1]
    assert last["type"] == "error"
    assert last["reason"] == "error"
    assert last["error"]["stopReason"] == "error"
    assert "peer reset" in last["error"]["errorMessage"]
    assert last["error"]["content"][0]["text"] == "partial "


async def test_failure_before_start_yields_only_an_error_event() -> None:
    faux = FauxProvider([FauxResponse(raise_error=RuntimeError("cannot connect"))])
    events = await collect(faux.model)
    assert [e["type"] for e in events] == ["error"]
    error: Any = events[0]
    assert error["error"]["errorMessage"] == "cannot connect"
    assert error["error"]["model"] == faux.model.id


async def test_unknown_api_is_an_error_event_not_an_exception() -> None:
    model = Model(id="m", api="no-such-api", provider="p")
    events = await collect(model)
    assert len(events) == 1
    assert "No API provider registered for api: no-such-api" in events[0]["error"]["errorMessage"]  # type: ignore[typeddict-item]


async def test_abort_mid_stream_keeps_partial_and_ends_aborted() -> None:
    faux = FauxProvider(["x" * 500], chunk_size=1, delay=0.005)
    controller = AbortController()
    events = []
    async for event in stream(faux.model, CONTEXT, signal=controller.signal):
        events.append(event)
        if len(events) == 10:
            controller.abort()
    last: Any = events[-1]
    assert last["type"] == "error"
    assert last["reason"] == "aborted"
    assert last["error"]["stopReason"] == "aborted"
    assert last["error"]["errorMessage"] == "Request was aborted"
    text = last["error"]["content"][0]["text"]
    assert 0 < len(text) < 500


async def test_abort_while_waiting_for_the_provider_interrupts_the_wait() -> None:
    faux = FauxProvider([FauxResponse(content=[faux_text("slow")], delay=60)])
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.05, controller.abort)
    message = await stream(faux.model, CONTEXT, signal=controller.signal).result()
    assert message["stopReason"] == "aborted"
    # the consuming task is not left cancelled
    await asyncio.sleep(0)


async def test_abort_before_start() -> None:
    faux = FauxProvider(["never"])
    controller = AbortController()
    controller.abort()
    message = await complete(faux.model, CONTEXT, signal=controller.signal)
    assert message["stopReason"] == "aborted"
    assert faux.remaining == 1


async def test_outer_cancellation_is_not_swallowed() -> None:
    faux = FauxProvider([FauxResponse(content=[faux_text("slow")], delay=60)])

    async def consume() -> None:
        await complete(faux.model, CONTEXT)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()


async def test_scripted_error_turn_and_exhausted_script() -> None:
    faux = FauxProvider([FauxResponse(content=[faux_text("oops")], error="429 rate limited")])
    first = await complete(faux.model, CONTEXT)
    assert first["stopReason"] == "error"
    assert first["errorMessage"] == "429 rate limited"
    second = await complete(faux.model, CONTEXT)
    assert "no scripted response left" in second["errorMessage"]  # type: ignore[operator]


async def test_function_provider_sees_the_context() -> None:
    from clawpi.testing import FunctionProvider

    def answer(context: Any, options: Any) -> str:
        return f"{len(context['messages'])} messages, system={context['systemPrompt']}"

    provider = FunctionProvider(answer)
    message = await complete(provider.model, CONTEXT)
    assert message["content"] == [{"type": "text", "text": "1 messages, system=sys"}]
    assert provider.requests[0]["systemPrompt"] == "sys"

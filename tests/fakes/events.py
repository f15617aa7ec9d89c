"""Assertions every provider test shares: pi's event-order contract and the final message."""

from __future__ import annotations

import asyncio
from typing import Any

from clawpi.ai.abort import AbortController
from clawpi.ai.models import Model
from clawpi.ai.stream import stream
from clawpi.ai.types import AssistantMessage, AssistantMessageEvent
from tests.fakes.http_server import FakeServer, RecordedRequest


def assert_event_order(events: list[AssistantMessageEvent]) -> None:
    """pi-mono §1.3: start first; per block X_start, X_delta*, X_end with consecutive content
    indices; exactly one terminal done/error, last."""
    assert events[0]["type"] == "start"
    assert events[-1]["type"] in ("done", "error")
    assert sum(e["type"] in ("done", "error") for e in events) == 1
    open_block: tuple[str, int] | None = None
    next_index = 0
    for event in events[1:-1]:
        kind, _, phase = event["type"].partition("_")
        index = event["contentIndex"]  # type: ignore[typeddict-item]
        if phase == "start":
            assert open_block is None, f"{event['type']} while block {open_block} is open"
            assert index == next_index
            open_block = (kind, index)
            next_index += 1
        else:
            assert open_block == (kind, index), f"{event['type']} outside its block"
            if phase == "end":
                open_block = None
    if events[-1]["type"] == "done":
        assert open_block is None


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last: Any = events[-1]
    return last["message"] if last["type"] == "done" else last["error"]  # type: ignore[no-any-return]


def only_request(server: FakeServer) -> RecordedRequest:
    assert len(server.requests) == 1
    return server.requests[0]


async def stream_aborting_after(
    model: Model, context: Any, *, api_key: str, after_delta: str, timeout: float = 10
) -> list[AssistantMessageEvent]:
    """Stream and fire the abort signal right after the text delta `after_delta` arrives (the
    server is expected to stall there); returns every event, which must end in `aborted`."""
    controller = AbortController()
    events: list[AssistantMessageEvent] = []

    async def consume() -> None:
        async for event in stream(model, context, api_key=api_key, signal=controller.signal):
            events.append(event)
            if event["type"] == "text_delta" and event["delta"] == after_delta:
                asyncio.get_running_loop().call_soon(controller.abort)

    await asyncio.wait_for(consume(), timeout=timeout)
    return events
